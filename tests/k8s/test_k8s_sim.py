"""loadtest.k8s_sim: the dev overlay's rendered StatefulSet run here on a dev broker, each pod in
its own network namespace and found by its headless DNS name; the smoke run (start, counts exact,
rolling update, scale-out, delete every pod) and what Kubernetes semantics it must show."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadtest.k8s_sim.manifests import expand, kubectl
from loadtest.k8s_sim.namespace import can_isolate
from tests.k8s.conftest import K8S


def test_kubelet_variable_expansion() -> None:
    env = {"A": "x", "B": "$(A)"}
    assert expand("$(A)-$(B)-$(C)-$$(A)-$", env) == "x-$(A)-$(C)-$(A)-$"


def _need_sim() -> None:
    why = "kubectl is not installed" if kubectl() is None else can_isolate()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the StatefulSet simulator cannot run under CI=true: {why}")
        pytest.skip(f"the StatefulSet simulator cannot run here: {why}")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    _need_sim()
    work = tmp_path_factory.mktemp("k8s-sim")
    out = subprocess.run([sys.executable, "-m", "loadtest.k8s_sim", "smoke", "--overlay", "dev", "--lines", "300",
                          "--steps", "start,rolling-update,kill,scale-out",
                          "--timeout", "150", "--work-dir", str(work)], capture_output=True, text=True, timeout=900,
                         cwd=K8S.parent)
    logs = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-3000:]}" for p in sorted(work.rglob("container.log")))
    assert out.returncode == 0, f"{out.stderr[-6000:]}\n{logs}"
    summary: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return summary


def _events(summary: dict[str, Any], event: str, pod: str | None = None, detail: str | None = None) -> list[float]:
    return [e["t"] for e in summary["events"] if e["event"] == event and (pod is None or e["pod"] == pod)
            and (detail is None or e["detail"] == detail)]


def test_pods_answer_at_their_headless_dns_names(smoke: dict[str, Any]) -> None:
    assert smoke["application_servers"] == [
        f"iqmesh-{i}.iqmesh-headless.iqmesh-dev.svc.cluster.local:50051" for i in range(3)]
    # each pod (3 + 3 recreated by the rolling update + 1 scaled out) in its own network
    # namespace, with an address of its own
    started = {e["detail"].split(" at ")[1] for e in smoke["events"] if e["event"] == "container started"}
    assert len(started) == len(_events(smoke, "created")) == 7


def test_counts_are_exact_after_every_step(smoke: dict[str, Any]) -> None:
    """New input after each step is counted exactly (the summary has a step only if it was)."""
    assert smoke["steps"] == ["start", "rolling-update", "kill", "scale-out"]
    for step in smoke["steps"]:
        assert smoke[step]["counts_exact_s"] >= 0


def test_a_killed_container_is_restarted_in_its_pod(smoke: dict[str, Any]) -> None:
    """kill -9: the kubelet restarts the container at once (first restart, no back-off), same
    pod, same address, same claim; it becomes Ready again. Killed once every record read was
    committed, so the counts after it are exact even at-least-once."""
    assert smoke["kill_quiet_after_s"] >= 0
    (step,) = [e["t"] for e in smoke["events"] if e["event"] == "step" and e["detail"] == "kill"]
    exits = [e for e in smoke["events"] if e["event"] == "container exited" and e["t"] > step]
    assert [(e["pod"], e["detail"]) for e in exits] == [("iqmesh-2", "-9")]
    starts = [e["detail"].split(" at ")[1] for e in smoke["events"]
              if e["event"] == "container started" and e["pod"] == "iqmesh-2"]
    assert starts[-1] == starts[-2], "the restarted container keeps the pod's address"
    assert any(t > exits[0]["t"] for t in _events(smoke, "ready", "iqmesh-2"))


def test_rolling_update_goes_down_the_ordinals_each_ready_for_min_ready_seconds(smoke: dict[str, Any]) -> None:
    assert smoke["rolling_update_order"] == ["iqmesh-2", "iqmesh-1", "iqmesh-0"]
    (begin,) = _events(smoke, "rolling update")
    min_ready_s = 5  # the dev overlay's minReadySeconds
    for newer, older in (("iqmesh-2", "iqmesh-1"), ("iqmesh-1", "iqmesh-0")):
        ready = min(t for t in _events(smoke, "ready", newer) if t > begin)
        # the older pod's deletion (not a readiness probe that timed out on a busy machine)
        next_stop = min(t for t in _events(smoke, "not ready", older, "terminating") if t > begin)
        assert next_stop >= ready + min_ready_s, (newer, ready, older, next_stop)


def test_every_pod_leaves_cleanly_within_its_grace_period(smoke: dict[str, Any]) -> None:
    assert smoke["exit_codes"] == {f"iqmesh-{i}": 0 for i in range(4)}
    assert not _events(smoke, "grace period over")
    assert smoke["restarts"] == {"iqmesh-0": 0, "iqmesh-1": 0, "iqmesh-2": 1, "iqmesh-3": 0}
    assert all(Path(smoke["work_dir"], "pvc", f"state-iqmesh-{i}", "wordcount").is_dir() for i in range(4))
