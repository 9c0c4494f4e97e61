"""The StatefulSet controller, for one rendered StatefulSet: pods ``<name>-<ordinal>``, one
claim directory per pod and template that survives the pod, ``Parallel`` or ``OrderedReady``
scaling, rolling updates from the highest ordinal down (each waiting for Ready and
``minReadySeconds``), the PodDisruptionBudget on evictions, and the Services' DNS names kept to
their endpoints (``publishNotReadyAddresses`` honoured). Pods that mount a service-account token
can read their StatefulSet from the API server (loadtest/k8s_sim/api_server.py)."""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.api_server import ApiServer
from loadtest.k8s_sim.manifests import PodIdentity, Rendered, command_line, container_env, pod_template
from loadtest.k8s_sim.network import NODE_IP, ClusterNetwork
from loadtest.k8s_sim.pod import EventSink, Pod
from loadtest.k8s_sim.probes import probes_of
from loadtest.k8s_sim.volumes import localize, materialize

CLUSTER_DOMAIN = "cluster.local"


class DisruptionRefused(Exception):
    """An eviction the PodDisruptionBudget does not allow now (HTTP 429 in Kubernetes)."""


@dataclass
class Options:
    root: Path
    #: image entrypoint -> local command (e.g. "iqmesh" -> [python, -m, iqmesh])
    entrypoint: list[str]
    commands: Mapping[str, list[str]]
    base_env: Mapping[str, str]


class StatefulSetSim:
    def __init__(self, rendered: Rendered, name: str, network: ClusterNetwork, options: Options,
                 on_event: EventSink) -> None:
        self.rendered, self.network, self.options, self.on_event = rendered, network, options, on_event
        self.sts = rendered.get("StatefulSet", name)
        spec = self.sts["spec"]
        self.name = name
        self.namespace = rendered.namespace
        self.replicas = int(spec.get("replicas", 1))
        self.parallel = spec.get("podManagementPolicy", "OrderedReady") == "Parallel"
        self.min_ready_s = float(spec.get("minReadySeconds", 0))
        self.service = spec["serviceName"]
        self.template = pod_template(self.sts)
        self.container = self.template["spec"]["containers"][0]
        self.grace_s = float(self.template["spec"].get("terminationGracePeriodSeconds", 30))
        self.revision = 1
        self._incarnations = 0
        self.pods: dict[int, Pod] = {}
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._dns = threading.Thread(target=self._endpoints_loop, name="endpoints", daemon=True)
        self._dns.start()
        # the API server needs a certificate (openssl); without it, pods see no API (as outside Kubernetes)
        self.api = (ApiServer(rendered, NODE_IP, options.root, lambda n: self.replicas if n == name else None)
                    if shutil.which("openssl") else None)

    # -- pods -------------------------------------------------------------------------------------
    def pod_name(self, ordinal: int) -> str:
        return f"{self.name}-{ordinal}"

    def claim_dirs(self, ordinal: int) -> dict[str, Path]:
        """Each volumeClaimTemplate's directory for this ordinal (PVC ``<claim>-<pod>``)."""
        return {c["metadata"]["name"]: self.options.root / "pvc" / f"{c['metadata']['name']}-{self.pod_name(ordinal)}"
                for c in self.sts["spec"].get("volumeClaimTemplates") or []}

    def _create(self, ordinal: int) -> Pod:
        name = self.pod_name(ordinal)
        box = self.network.sandbox(name)
        self._incarnations += 1
        root = self.options.root / "pods" / f"{self._incarnations:03d}-{name}-r{self.revision}"
        root.mkdir(parents=True, exist_ok=True)
        labels = self.template["metadata"].get("labels", {})
        env = container_env(self.container, PodIdentity(name, self.namespace, box.ip, "sim-node", labels),
                            self.rendered)
        mounts = materialize(self.rendered, self.sts, self.container["name"], root, self.claim_dirs(ordinal))
        argv = [localize(a, mounts) for a in command_line(self.container, env, self.options.entrypoint)]
        argv = [*self.options.commands.get(argv[0], [argv[0]]), *argv[1:]]
        full_env = {**self.options.base_env, "HOSTNAME": name,
                    **{k: localize(v, mounts) for k, v in env.items()},
                    **(self.api.mount(self.template["spec"], self.namespace, root) if self.api else {})}
        pod = Pod(name, ordinal, self.revision, argv, full_env, probes_of(self.container), self.grace_s, box,
                  root / "container.log", root, self.on_event)
        with self._lock:
            self.pods[ordinal] = pod
        self.on_event("created", name, f"revision {self.revision}")
        pod.start()
        return pod

    def _delete(self, ordinal: int, grace_s: float | None = None) -> int | None:
        with self._lock:
            pod = self.pods.pop(ordinal, None)
        if pod is None:
            return None
        rc = pod.terminate(grace_s)
        self.network.remove(pod.name)
        self.network.set_name(f"{pod.name}.{self.service}.{self.namespace}.svc.{CLUSTER_DOMAIN}", [])
        return rc

    # -- what users do ----------------------------------------------------------------------------
    def scale(self, replicas: int, timeout: float = 300.0) -> dict[str, int | None]:
        """Create the missing ordinals / delete the highest ones; OrderedReady one at a time
        (creation waits for each to be Ready), Parallel all at once. Returns the exit status of
        each deleted pod's container."""
        self.on_event("scale", self.name, f"{self.replicas} -> {replicas}")
        current = sorted(self.pods)
        adding = [i for i in range(replicas) if i not in self.pods]
        removing = [i for i in current if i >= replicas][::-1]
        self.replicas = replicas
        if self.parallel:
            with ThreadPoolExecutor(max_workers=max(1, len(removing))) as pool:
                codes = list(pool.map(self._delete, removing))
            for i in adding:
                self._create(i)
            self.wait_ready(adding, timeout)
        else:
            codes = [self._delete(i) for i in removing]
            for i in adding:
                self._create(i)
                self.wait_ready([i], timeout)
        return {self.pod_name(i): rc for i, rc in zip(removing, codes, strict=True)}

    def rolling_update(self, timeout: float = 600.0) -> list[str]:
        """A new template revision (``kubectl rollout restart``): from the highest ordinal down,
        each pod deleted and created again once every pod is Ready, the next one only after the
        new pod has been Ready for ``minReadySeconds``. Returns the order."""
        self.revision += 1
        self.on_event("rolling update", self.name, f"revision {self.revision}")
        order = []
        for i in sorted(self.pods, reverse=True):
            self.wait_ready(sorted(self.pods), timeout)
            self._delete(i)
            self._create(i)
            self.wait_ready([i], timeout, available=True)
            order.append(self.pod_name(i))
        return order

    def evict(self, ordinal: int) -> int | None:
        """A voluntary disruption (drain): refused while the PodDisruptionBudget has no room."""
        budget = self.max_unavailable()
        unavailable = sum(1 for p in self.pods.values() if not p.ready)
        if budget is not None and unavailable + (1 if self.pods[ordinal].ready else 0) > budget:
            raise DisruptionRefused(f"evicting {self.pod_name(ordinal)} would leave {unavailable + 1} pods "
                                    f"unavailable; the budget allows {budget}")
        rc = self._delete(ordinal)
        self._create(ordinal)
        return rc

    def kill(self, ordinal: int, sig: int) -> None:
        """Signal the container from outside (the kubelet restarts it in the same pod)."""
        self.pods[ordinal].signal(sig)

    def lose_node(self, ordinal: int) -> None:
        """The pod's node is gone with its disk: the pod dies unannounced, its claim is lost, and
        it is created again from an empty volume."""
        self._delete(ordinal, grace_s=0)
        for d in self.claim_dirs(ordinal).values():
            shutil.rmtree(d, ignore_errors=True)
        self.on_event("volume lost", self.pod_name(ordinal), "")
        self._create(ordinal)

    def max_unavailable(self) -> int | None:
        selector = self.template["metadata"].get("labels", {})
        for pdb in self.rendered.of_kind("PodDisruptionBudget"):
            match = pdb["spec"]["selector"].get("matchLabels", {})
            if match.items() <= selector.items() and "maxUnavailable" in pdb["spec"]:
                return int(pdb["spec"]["maxUnavailable"])
        return None

    def wait_ready(self, ordinals: list[int], timeout: float, available: bool = False) -> None:
        """Until these pods are Ready (``available``: for ``minReadySeconds`` too)."""
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                pods = [self.pods.get(i) for i in ordinals]
            now = time.monotonic()
            if all(p is not None and p.ready and p.ready_since is not None
                   and (not available or now - p.ready_since >= self.min_ready_s) for p in pods):
                return
            if now > deadline:
                states = {self.pod_name(i): (p.ready if p else "absent") for i, p in zip(ordinals, pods, strict=True)}
                raise TimeoutError(f"pods not ready within {timeout:.0f} s: {states}")
            time.sleep(0.1)

    def close(self) -> dict[str, int | None]:
        """Delete every pod at once (each SIGTERM, SIGKILL after its grace period)."""
        self._stop.set()
        with ThreadPoolExecutor(max_workers=max(1, len(self.pods))) as pool:
            ordinals = sorted(self.pods)
            codes = list(pool.map(self._delete, ordinals))
        if self.api is not None:
            self.api.close()
        return {self.pod_name(i): rc for i, rc in zip(ordinals, codes, strict=True)}

    # -- Services -----------------------------------------------------------------------------------
    def services(self) -> list[dict[str, Any]]:
        labels = self.template["metadata"].get("labels", {})
        return [s for s in self.rendered.of_kind("Service")
                if s["spec"].get("selector") and s["spec"]["selector"].items() <= labels.items()]

    def _endpoints_loop(self) -> None:
        while not self._stop.is_set():
            self.update_endpoints()
            self._stop.wait(0.1)

    def update_endpoints(self) -> None:
        with self._lock:
            pods = list(self.pods.values())
        for svc in self.services():
            name = svc["metadata"]["name"]
            fqdn = f"{name}.{self.namespace}.svc.{CLUSTER_DOMAIN}"
            publish_all = bool(svc["spec"].get("publishNotReadyAddresses"))
            ips = [p.box.ip for p in pods if (publish_all or p.ready) and not p.terminating]
            self.network.set_name(fqdn, ips)
            if name == self.service:  # per-pod names of the headless governing Service
                for p in pods:
                    self.network.set_name(f"{p.name}.{fqdn}", [] if p.terminating else [p.box.ip])


def local_commands(python: str) -> dict[str, list[str]]:
    """The image's commands, run from this checkout."""
    return {"iqmesh": [python, "-m", "iqmesh"], "python": [python]}

