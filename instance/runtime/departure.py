"""Whether a static member that closes is leaving the group for good.

A static member sends no LeaveGroup when it stops (KIP-345): the group keeps its partitions for
``session.timeout.ms`` so that a restart moves nothing. That is right for a rolling update and
wrong for a scale-in: the removed pods' partitions had no live replica until the session timed
out (180 s in the manifests; measured in docs/benchmarks.md). Kafka Streams leaves the choice to
the caller (``close(CloseOptions.leaveGroup(true))``, which removes the member with the admin
API). In Kubernetes the pod can tell for itself: the StatefulSet controller lowers
``spec.replicas`` before it deletes the pods above it, and deletes every pod when the StatefulSet
itself is deleted. So at close the instance reads its StatefulSet through the API server with the
pod's service account (the manifests grant ``get`` on it) and leaves when its ordinal is no longer
counted.

``iqmesh.leave.group.on.close``: ``auto`` (that check; outside Kubernetes, or when the API cannot
be read, the member stays, as before), ``true`` (always leave), ``false`` (never).
"""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from instance.config import StreamsConfig
from instance.errors import StreamsException
from instance.group_protocol import CLASSIC, STREAMS
from instance.runtime.group_admin import GroupMember, remove_members

log = logging.getLogger(__name__)

#: where Kubernetes mounts the pod's service account (token, ca.crt, namespace)
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
#: overrides SERVICE_ACCOUNT_DIR (loadtest/k8s_sim runs its pods without a mount namespace)
SERVICE_ACCOUNT_DIR_ENV = "IQMESH_SERVICE_ACCOUNT_DIR"
_POD_OF_STATEFULSET = re.compile(r"^(?P<set>[a-z0-9]([-a-z0-9]*[a-z0-9])?)-(?P<ordinal>\d+)$")


@dataclass(frozen=True)
class StatefulSetPod:
    """A pod of a StatefulSet, known by its name (``<statefulset>-<ordinal>``)."""

    statefulset: str
    ordinal: int

    @staticmethod
    def of(pod_name: str) -> StatefulSetPod | None:
        m = _POD_OF_STATEFULSET.match(pod_name)
        return StatefulSetPod(m["set"], int(m["ordinal"])) if m else None


class InClusterApi:
    """The Kubernetes API server as a pod reaches it: the service's address from the environment,
    the service account's token and CA from its mounted directory."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        env = dict(os.environ) if env is None else env
        self.host = env.get("KUBERNETES_SERVICE_HOST", "")
        self.port = env.get("KUBERNETES_SERVICE_PORT", "443")
        self.account = Path(env.get(SERVICE_ACCOUNT_DIR_ENV) or SERVICE_ACCOUNT_DIR)

    @property
    def available(self) -> bool:
        return bool(self.host) and (self.account / "token").is_file()

    def replicas(self, statefulset: str, timeout: float = 5.0) -> int:
        """``spec.replicas`` of ``statefulset`` in the pod's namespace; 0 when it is gone (404)."""
        namespace = (self.account / "namespace").read_text().strip()
        host = f"[{self.host}]" if ":" in self.host else self.host
        url = f"https://{host}:{self.port}/apis/apps/v1/namespaces/{namespace}/statefulsets/{statefulset}"
        ca = self.account / "ca.crt"
        ctx = ssl.create_default_context(cafile=str(ca) if ca.is_file() else None)
        token = (self.account / "token").read_text().strip()
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}",
                                                       "Accept": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout, context=ctx) as reply:
                spec = json.load(reply).get("spec", {})
        except urllib.error.HTTPError as e:
            if e.code == 404:
                return 0
            raise
        return int(spec.get("replicas", 1))


def leaving_for_good(setting: str, instance_id: str, api: InClusterApi | None = None) -> bool:
    """Whether the static member ``instance_id`` (= pod name) should remove itself at close."""
    if setting in ("true", "false"):
        return setting == "true"
    pod = StatefulSetPod.of(instance_id)
    api = api or InClusterApi()
    if pod is None or not api.available:
        return False
    try:
        replicas = api.replicas(pod.statefulset)
    except (OSError, ValueError) as e:  # no RBAC, API away: stay, as a static member always did
        log.warning("cannot read StatefulSet %s to tell a scale-in from a restart (%s); staying in the group "
                    "until session.timeout.ms", pod.statefulset, e)
        return False
    return pod.ordinal >= replicas


def static_member_id(group_instance_id: str, thread_index: int) -> str:
    """The group.instance.id of stream thread ``thread_index`` (numbered from 1)."""
    return f"{group_instance_id}-{thread_index}"


def departing(config: StreamsConfig) -> bool:
    """Whether this instance, a static member, should remove itself from the group at close."""
    gid = config.group_instance_id
    return bool(gid) and leaving_for_good(config.leave_group_on_close, gid)


def remove_static_members(config: StreamsConfig) -> bool:
    """After the stream threads closed: remove this instance's static members from the group (the
    remove-members operation, as Kafka Streams' close with ``leaveGroup``), so their partitions
    move now instead of after ``session.timeout.ms``. True if they were removed."""
    if config.group_protocol == STREAMS:
        return True  # the stream threads' members left with epoch -1 (runtime/streams_group/member.py)
    if config.group_protocol != CLASSIC:
        log.warning("leaving for good, but group.protocol=%s members cannot be removed with LeaveGroup: "
                    "their partitions move after the broker's session timeout", config.group_protocol)
        return False
    gid = config.group_instance_id
    members = [GroupMember("", "", static_member_id(gid, i), "") for i in range(1, config.num_stream_threads + 1)]
    try:
        errors = remove_members(config.client_config("admin"), config.application_id, members)
    except StreamsException as e:
        log.warning("leaving for good, but removing our static members failed (%s): their partitions move "
                    "after session.timeout.ms", e)
        return False
    refused = {m: e for m, e in errors.items() if e not in ("NONE", "UNKNOWN_MEMBER_ID")}
    if refused:
        log.warning("leaving for good: the coordinator refused to remove %s", refused)
        return False
    log.info("left the group for good: static members of %s removed", gid)
    return True
