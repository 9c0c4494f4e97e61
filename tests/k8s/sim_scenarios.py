"""Scenarios of the simulator's StatefulSet semantics with a stand-in container
(fake_container.py), run inside the simulator's namespaces:

    python tests/k8s/sim_scenarios.py SCENARIO   -> one JSON object on stdout

(tests/k8s/test_k8s_sim_semantics.py runs them)."""

from __future__ import annotations

import json
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.manifests import Rendered
from loadtest.k8s_sim.network import ClusterNetwork
from loadtest.k8s_sim.statefulset import DisruptionRefused, Options, StatefulSetSim, local_commands

FAKE = str(Path(__file__).with_name("fake_container.py"))
LABELS = {"app": "fake"}


def statefulset(policy: str, env: dict[str, str], grace: int = 5, min_ready: int = 0,
                liveness: bool = False) -> Rendered:
    c: dict[str, Any] = {
        "name": "c", "image": "fake", "command": ["python", FAKE],
        "env": [{"name": "FAKE_CLAIM", "value": "/data"}, *({"name": k, "value": v} for k, v in env.items())],
        "ports": [{"name": "grpc", "containerPort": 50051}],
        "startupProbe": {"grpc": {"port": 50051}, "periodSeconds": 1, "failureThreshold": 60},
        "readinessProbe": {"grpc": {"port": 50051}, "periodSeconds": 1, "failureThreshold": 1},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    if liveness:
        c["livenessProbe"] = {"tcpSocket": {"port": 50051}, "periodSeconds": 1, "failureThreshold": 2}
    sts = {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "fake", "namespace": "t"},
           "spec": {"replicas": 3, "serviceName": "fake-headless", "podManagementPolicy": policy,
                    "minReadySeconds": min_ready, "selector": {"matchLabels": LABELS},
                    "template": {"metadata": {"labels": LABELS},
                                 "spec": {"terminationGracePeriodSeconds": grace, "containers": [c]}},
                    "volumeClaimTemplates": [{"metadata": {"name": "data"}}]}}
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "fake-headless", "namespace": "t"},
           "spec": {"clusterIP": "None", "publishNotReadyAddresses": True, "selector": LABELS}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "fake", "namespace": "t"},
           "spec": {"maxUnavailable": 1, "selector": {"matchLabels": LABELS}}}
    return Rendered((sts, svc, pdb))


class Log:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: str, pod: str, detail: str) -> None:
        self.events.append({"t": round(time.monotonic() - self.t0, 2), "event": event, "pod": pod, "detail": detail})


def run(scenario: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="k8s-sim-t-") as d:
        return _run(scenario, Path(d))


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``cond`` until it holds; TimeoutError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"not within {timeout:.0f} s: {what}")
        time.sleep(0.05)


def _count(log: Log, event: str, pod: str | None = None) -> int:
    return sum(1 for e in list(log.events) if e["event"] == event and (pod is None or e["pod"] == pod))


def _run(scenario: str, root: Path) -> dict[str, Any]:
    net = ClusterNetwork(root / "hosts")
    net.setup()
    log = Log()
    env = {"FAKE_READY_AFTER": "1"}
    policy, grace, liveness = "OrderedReady", 5, False
    gate = root / "ready"  # parallel: no pod is ready before the test opens this gate
    die = root / "die"  # crash: every container of the pod exits once this file exists
    if scenario == "parallel":
        policy, env["FAKE_READY_FILE"] = "Parallel", str(gate)
    if scenario == "grace":
        env["FAKE_IGNORE_TERM"], grace = "1", 2
    if scenario == "crash":
        env["FAKE_DIE_FILE"] = str(die)
    if scenario == "liveness":
        liveness = True
    sts = StatefulSetSim(statefulset(policy, env, grace, liveness=liveness), "fake", net,
                         Options(root, ["python"], local_commands(sys.executable), {"PATH": "/usr/bin:/bin"}), log)
    out: dict[str, Any] = {}
    try:
        if scenario == "ordered":
            sts.scale(3, timeout=60)
            sts.scale(1, timeout=60)
        elif scenario == "parallel":
            def open_gate() -> None:
                """Readiness held back until all three pods exist: a controller that waited for
                one to be Ready before creating the next never gets there (then the gate opens
                after a minute anyway, and the test sees the order it used)."""
                try:
                    wait_for(lambda: _count(log, "created") >= 3, "three pods created")
                finally:
                    gate.touch()
            threading.Thread(target=open_gate, daemon=True).start()
            sts.scale(3, timeout=120)
            sts.scale(1, timeout=60)
        elif scenario == "grace":
            sts.scale(1, timeout=60)
            t = time.monotonic()
            out["exit"] = sts.close()
            out["terminate_s"] = round(time.monotonic() - t, 2)
        elif scenario == "crash":
            sts.scale(1, timeout=60)
            die.touch()  # it exits; restarted at once, it exits again; restarted after 10 s of back-off
            wait_for(lambda: _count(log, "container started", "fake-0") >= 3, "the third start of fake-0")
        elif scenario == "liveness":
            sts.scale(1, timeout=60)
            pod = sts.pods[0]
            probe = pod.probes["liveness"]
            runs = pod.probe_runs.get("liveness", 0)
            pod.signal(signal.SIGSTOP)  # hung: connections are accepted by the kernel, not served
            # held hung until the kubelet has run the liveness probe more times than its failure
            # threshold, and the readiness probe (gRPC) has seen the hang
            wait_for(lambda: not pod.ready and pod.probe_runs.get("liveness", 0) >= runs + probe.failure_threshold + 2,
                     "the readiness probe failing and the liveness probe run past its failure threshold")
            out["liveness_probes_while_stopped"] = pod.probe_runs["liveness"] - runs
            out["liveness_failure_threshold"] = probe.failure_threshold
            out["note"] = "tcpSocket succeeds on a stopped process"
            pod.signal(signal.SIGCONT)
        elif scenario == "pdb":
            sts.scale(3, timeout=60)
            sts.kill(0, signal.SIGSTOP)  # hangs (until SIGCONT): the readiness probe times out, pod 0 not ready
            wait_for(lambda: not sts.pods[0].ready, "fake-0 not ready while stopped")
            try:
                sts.evict(1)
                out["evicted"] = True
            except DisruptionRefused as e:
                out["refused"] = str(e)
            sts.kill(0, signal.SIGCONT)
        elif scenario == "lose-node":
            sts.scale(1, timeout=60)
            sts.evict(0)  # deleted and created again: same claim
            sts.wait_ready([0], 60)
            sts.lose_node(0)  # gone with its disk: an empty claim
            sts.wait_ready([0], 60)
        out["claims"] = {d.name: (d / "marker").exists() for d in sorted((root / "pvc").iterdir())}
        out["logs"] = {p.parent.name: p.read_text() for p in sorted((root / "pods").rglob("container.log"))}
    finally:
        out.setdefault("exit", sts.close())
        net.close()
    out["events"] = log.events
    return out


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1])), flush=True)
