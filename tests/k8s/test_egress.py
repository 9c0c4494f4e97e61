"""k8s/: the egress NetworkPolicies, evaluated as Kubernetes does (a pod selected by any Egress
policy reaches only what one of their rules allows): every pod resolves names; instances reach
Kafka on the ports KAFKA_BOOTSTRAP names, each other and the API server; the gateway reaches the
instances and nothing else it does not use; the snapshot job reaches Kafka and the instances, and
with Spark on Kubernetes also the API server and its executors."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from loadtest.k8s_sim.manifests import Rendered, container, pod_template
from tests.k8s.conftest import OVERLAYS, RENDERINGS, WITH_COMPONENTS

INSTANCE = {"app.kubernetes.io/name": "iqmesh", "app.kubernetes.io/component": "instance"}
KUBE_DNS = {"k8s-app": "kube-dns"}
KUBE_SYSTEM = {"kubernetes.io/metadata.name": "kube-system"}
API_SERVER_PORTS = (443, 6443)


@dataclass(frozen=True)
class Peer:
    """Where a connection goes: a pod (labels; ``namespace`` labels, None for the policies' own
    namespace) or, with no labels, an address outside the cluster's pods."""

    labels: Mapping[str, str] = field(default_factory=dict)
    namespace: Mapping[str, str] | None = None

    @property
    def external(self) -> bool:
        return not self.labels


OUTSIDE = Peer()


def selects(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    if not selector.get("matchLabels", {}).items() <= labels.items():
        return False
    for e in selector.get("matchExpressions", []):
        value, op = labels.get(e["key"]), e["operator"]
        if (op == "In" and value not in e["values"]) or (op == "NotIn" and value in e["values"]) \
                or (op == "Exists" and value is None) or (op == "DoesNotExist" and value is not None):
            return False
    return True


def _peer_matches(entry: Mapping[str, Any], peer: Peer) -> bool:
    if "ipBlock" in entry:
        return peer.external
    if peer.external:
        return False
    if "namespaceSelector" in entry:
        if peer.namespace is None or not selects(entry["namespaceSelector"], peer.namespace):
            return False
    elif peer.namespace is not None:  # a podSelector alone: the policy's own namespace
        return False
    return selects(entry.get("podSelector", {}), peer.labels)


def egress_rules(r: Rendered, labels: Mapping[str, str]) -> list[dict[str, Any]] | None:
    """The egress rules that apply to a pod with ``labels``; None when no policy isolates it."""
    pols = [p["spec"] for p in r.of_kind("NetworkPolicy")
            if "Egress" in p["spec"].get("policyTypes", []) and selects(p["spec"]["podSelector"], labels)]
    return None if not pols else [rule for p in pols for rule in p.get("egress", [])]


def allows(r: Rendered, labels: Mapping[str, str], peer: Peer, port: int, protocol: str = "TCP") -> bool:
    rules = egress_rules(r, labels)
    if rules is None:
        return True
    for rule in rules:
        ports = rule.get("ports") or []
        if ports and not any(p.get("protocol", "TCP") == protocol and p.get("port") in (None, port) for p in ports):
            continue
        if not rule.get("to") or any(_peer_matches(t, peer) for t in rule["to"]):
            return True
    return False


def pod_labels(r: Rendered) -> dict[str, dict[str, str]]:
    """Each workload's pod labels: the instances, the gateway, the snapshot job."""
    return {w["metadata"]["name"]: dict(pod_template(w)["metadata"]["labels"])
            for w in r.docs if w["kind"] in ("StatefulSet", "Deployment", "CronJob")}


def kafka_ports(r: Rendered) -> set[int]:
    bootstrap = r.config_map_data(next(c["metadata"]["name"] for c in r.of_kind("ConfigMap")
                                       if "KAFKA_BOOTSTRAP" in (c.get("data") or {})))["KAFKA_BOOTSTRAP"]
    return {int(hostport.rsplit(":", 1)[1]) for hostport in bootstrap.split(",")}


@pytest.mark.parametrize("name", RENDERINGS)
def test_every_pod_is_isolated_for_egress_and_resolves_names(renderings: dict[str, Rendered], name: str) -> None:
    r = renderings[name]
    pods = pod_labels(r)
    assert set(pods) == {"iqmesh", "iqmesh-gateway", "iqmesh-snapshot"}
    for workload, labels in pods.items():
        assert egress_rules(r, labels) is not None, f"{workload}: egress is open"
        dns = Peer(KUBE_DNS, KUBE_SYSTEM)
        assert allows(r, labels, dns, 53, "UDP") and allows(r, labels, dns, 53, "TCP"), workload
        assert not allows(r, labels, OUTSIDE, 25), f"{workload}: reaches any address on any port"
        assert not allows(r, labels, Peer(KUBE_DNS, {"kubernetes.io/metadata.name": "elsewhere"}), 53, "UDP")


@pytest.mark.parametrize("name", RENDERINGS)
def test_instances_reach_kafka_each_other_and_the_api_server(renderings: dict[str, Rendered], name: str) -> None:
    r = renderings[name]
    me = pod_labels(r)["iqmesh"]
    grpc = next(p["containerPort"] for p in container(r.get("StatefulSet", "iqmesh"), "instance")["ports"]
                if p["name"] == "grpc")
    for port in kafka_ports(r):
        assert allows(r, me, OUTSIDE, port), f"Kafka on {port}"
    assert allows(r, me, Peer(INSTANCE), grpc)
    # departure.py reads the StatefulSet at close: the API server, on its own port
    assert all(allows(r, me, OUTSIDE, port) for port in API_SERVER_PORTS)


@pytest.mark.parametrize("name", RENDERINGS)
def test_the_gateway_reaches_the_instances_only(renderings: dict[str, Rendered], name: str) -> None:
    r = renderings[name]
    gw = pod_labels(r)["iqmesh-gateway"]
    args = container(r.get("Deployment", "iqmesh-gateway"), "gateway")["args"]
    grpc = next(p["containerPort"] for p in container(r.get("StatefulSet", "iqmesh"), "instance")["ports"]
                if p["name"] == "grpc")
    assert allows(r, gw, Peer(INSTANCE), grpc)
    # seeds, not the instances topic: no Kafka (a gateway started with --bootstrap would need it)
    uses_kafka = any(a.startswith("--bootstrap") for a in args)
    assert all(allows(r, gw, OUTSIDE, port) == uses_kafka for port in kafka_ports(r))
    assert not any(allows(r, gw, OUTSIDE, port) for port in API_SERVER_PORTS)


@pytest.mark.parametrize("name", RENDERINGS)
def test_the_snapshot_job_reaches_kafka_and_the_instances(renderings: dict[str, Rendered], name: str) -> None:
    r = renderings[name]
    job = pod_labels(r)["iqmesh-snapshot"]
    grpc = next(p["containerPort"] for p in container(r.get("StatefulSet", "iqmesh"), "instance")["ports"]
                if p["name"] == "grpc")
    assert all(allows(r, job, OUTSIDE, port) for port in kafka_ports(r))
    assert allows(r, job, Peer(INSTANCE), grpc)  # --source instances
    spark_on_k8s = name == WITH_COMPONENTS
    # local mode needs no API server; Spark on Kubernetes asks it for executors, which connect back
    assert allows(r, job, OUTSIDE, 443) == spark_on_k8s
    executor = {"app.kubernetes.io/name": "iqmesh", "app.kubernetes.io/component": "snapshot"}
    assert allows(r, executor, Peer(job), 7078) == allows(r, executor, Peer(job), 7079) == spark_on_k8s


def test_the_overlays_share_the_base_policies(renderings: dict[str, Rendered]) -> None:
    names = [{p["metadata"]["name"] for p in renderings[o].of_kind("NetworkPolicy")} for o in OVERLAYS]
    assert names[0] == names[1] and {"iqmesh-dns-egress", "iqmesh-kafka-egress"} <= names[0]
