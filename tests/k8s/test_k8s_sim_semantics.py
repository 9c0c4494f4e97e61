"""The simulator's Kubernetes semantics, with a stand-in container (fake_container.py: a gRPC
health server) instead of iqmesh, so each takes seconds: OrderedReady vs Parallel, the grace
period, crash back-off, the PodDisruptionBudget, a lost node, and what a tcpSocket liveness
probe cannot see."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loadtest.k8s_sim.namespace import MARKER, UNSHARE, can_isolate

SCENARIOS = Path(__file__).with_name("sim_scenarios.py")
ROOT = Path(__file__).resolve().parents[2]


def scenario(name: str) -> dict[str, Any]:
    why = can_isolate()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the simulator cannot run under CI=true: {why}")
        pytest.skip(f"the simulator cannot run here: {why}")
    env = {**os.environ, MARKER: "1", "PYTHONPATH": str(ROOT)}
    out = subprocess.run([*UNSHARE, sys.executable, str(SCENARIOS), name], capture_output=True, text=True,
                         timeout=180, env=env, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-4000:]
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def times(r: dict[str, Any], event: str, pod: str) -> list[float]:
    return [e["t"] for e in r["events"] if e["event"] == event and e["pod"] == pod]


def test_ordered_ready_creates_in_order_and_deletes_in_reverse() -> None:
    r = scenario("ordered")
    assert times(r, "created", "fake-1")[0] >= times(r, "ready", "fake-0")[0]
    assert times(r, "created", "fake-2")[0] >= times(r, "ready", "fake-1")[0]
    # scale 3 -> 1: fake-2 gone before fake-1 is touched
    assert times(r, "not ready", "fake-1")[0] >= times(r, "terminated", "fake-2")[0]
    assert r["exit"] == {"fake-0": 0}


def test_parallel_creates_all_at_once() -> None:
    r = scenario("parallel")
    first_ready = min(times(r, "ready", f"fake-{i}")[0] for i in range(3))
    assert all(times(r, "created", f"fake-{i}")[0] < first_ready for i in range(3))


def test_sigkill_after_the_grace_period() -> None:
    r = scenario("grace")
    assert r["exit"] == {"fake-0": -9}
    assert 2.0 <= r["terminate_s"] < 4.0
    assert [e["detail"] for e in r["events"] if e["event"] == "grace period over"] == ["SIGKILL after 2 s"]
    assert "ignoring SIGTERM" in "".join(r["logs"].values())


def test_a_crashing_container_restarts_at_once_then_backs_off() -> None:
    r = scenario("crash")
    assert [e["detail"] for e in r["events"] if e["event"] == "back-off"] == ["restart 1 in 0 s", "restart 2 in 10 s"]
    exits = times(r, "container exited", "fake-0")
    starts = times(r, "container started", "fake-0")
    assert len(exits) == 2 and len(starts) == 2  # the third start is still backing off


def test_the_budget_refuses_a_second_disruption() -> None:
    r = scenario("pdb")
    assert "budget allows 1" in r["refused"] and "evicted" not in r


def test_a_lost_node_takes_the_volume() -> None:
    r = scenario("lose-node")
    logs = [r["logs"][k] for k in sorted(r["logs"])]
    assert [("claim had a marker: True" in text) for text in logs] == [False, True, False]
    assert r["claims"] == {"data-fake-0": True}


def test_tcp_liveness_does_not_see_a_hung_process() -> None:
    """Why the manifests' liveness probe is not a tcpSocket check: a stopped process still has its
    connections accepted by the kernel, so it is never restarted. The manifests ask the instance's
    liveness health service instead (tests/integration/test_liveness.py: a stopped process does
    not answer it)."""
    r = scenario("liveness")
    assert not [e for e in r["events"] if e["event"] == "liveness probe failed"]
    assert times(r, "container started", "fake-0") and len(times(r, "container started", "fake-0")) == 1
