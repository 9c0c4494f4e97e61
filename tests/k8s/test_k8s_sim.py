"""loadtest.k8s_sim: the dev overlay's rendered StatefulSet run here on a dev broker, each pod in
its own network namespace and found by its headless DNS name; the smoke run with its default steps
(start, counts exact, rolling update, kill -9, scale-out, scale-in, delete every pod), what
Kubernetes semantics it must show, and that it leaves nothing in the temporary folder."""

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
def temp_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The temporary folder (TMPDIR) the smoke runs get: what they leave there is left behind."""
    return tmp_path_factory.mktemp("tmpdir")


def run_smoke(temp_folder: Path, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess[str]:
    """``python -m loadtest.k8s_sim smoke --overlay dev ARGS`` without --work-dir: its files go to
    the temporary folder."""
    return subprocess.run([sys.executable, "-m", "loadtest.k8s_sim", "smoke", "--overlay", "dev", *args],
                          capture_output=True, text=True, timeout=timeout, cwd=K8S.parent,
                          env={**os.environ, "TMPDIR": str(temp_folder)})


@pytest.fixture(scope="module")
def smoke(temp_folder: Path) -> dict[str, Any]:
    """The default steps (no --steps), no --work-dir: the pods' logs are in stderr if a step fails."""
    _need_sim()
    out = run_smoke(temp_folder, "--lines", "300", "--timeout", "150")
    assert out.returncode == 0, out.stderr[-12000:]
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
    """New input after each step is counted exactly (the summary has a step only if it was); the
    default steps are every step the README lists, scale-in included."""
    assert smoke["steps"] == ["start", "rolling-update", "kill", "scale-out", "scale-in"]
    for step in smoke["steps"]:
        assert smoke[step]["counts_exact_s"] >= 0


def test_scale_in_removes_the_highest_ordinal_which_leaves_the_group(smoke: dict[str, Any]) -> None:
    """4 -> 3: iqmesh-3 is deleted (SIGTERM, a clean exit) and keeps its claim; a static member, it
    reads its StatefulSet at close and leaves the group, so its partitions move at once: the counts
    are exact again well within the dev overlay's session.timeout.ms (90 s), which they would wait
    for otherwise."""
    (step,) = _events(smoke, "step", detail="scale-in")
    assert [e["detail"] for e in smoke["events"] if e["event"] == "scale" and e["t"] >= step] == ["4 -> 3"]
    gone = [(e["pod"], e["detail"]) for e in smoke["events"] if e["event"] == "terminated" and e["t"] >= step]
    assert gone[0] == ("iqmesh-3", "exit 0")
    assert smoke["scale-in"]["counts_exact_s"] < 90
    assert "wordcount" in smoke["claims"]["state-iqmesh-3"]


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
    """The scaled-in pod and the three deleted at the end; every claim outlives its pod."""
    assert smoke["exit_codes"] == {f"iqmesh-{i}": 0 for i in range(4)}
    assert not _events(smoke, "grace period over")
    assert smoke["restarts"] == {"iqmesh-0": 0, "iqmesh-1": 0, "iqmesh-2": 1}
    assert {claim: "wordcount" in held for claim, held in smoke["claims"].items()} == {
        f"state-iqmesh-{i}": True for i in range(4)}


def test_the_smoke_leaves_nothing_in_the_temporary_folder(smoke: dict[str, Any], temp_folder: Path) -> None:
    assert smoke["work_dir"] is None
    assert sorted(p.name for p in temp_folder.iterdir()) == []


def test_a_failed_smoke_prints_the_logs_and_leaves_nothing_either(temp_folder: Path) -> None:
    """A step that fails (no pod can be Ready within 1 s): exit status 1, the pods' last log lines
    in stderr, since their directory is removed with the rest."""
    _need_sim()
    before = sorted(p.name for p in temp_folder.iterdir())
    out = run_smoke(temp_folder, "--steps", "start", "--timeout", "1", timeout=600)
    assert out.returncode != 0 and "pods not ready within 1 s" in out.stderr, out.stderr[-4000:]
    assert "--- pods/" in out.stderr and "container.log" in out.stderr
    assert sorted(p.name for p in temp_folder.iterdir()) == before == []
