"""loadtest.scenarios --smoke: each scenario (steady, rolling update, scale 3 -> 5 -> 3, kill -9,
node lost) on the simulated StatefulSet with a dev broker, ingest and open-loop queries running
throughout, small rates and seconds of load; what each must show for a Kafka Streams team: no
record lost or counted twice (exactly-once), every stale answer flagged, the cluster settled
again, the plot written, and what the action itself must have done (restarts, restores)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from devtools.suite_broker import suite_engine
from loadtest.k8s_sim.manifests import kubectl
from loadtest.k8s_sim.namespace import can_isolate
from loadtest.scenarios import SCENARIOS
from tests.k8s.conftest import K8S


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    why = "kubectl is not installed" if kubectl() is None else can_isolate()
    if why is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"the scenarios cannot run under CI=true: {why}")
        pytest.skip(f"the scenarios cannot run here: {why}")
    out, work = tmp_path_factory.mktemp("scenarios"), tmp_path_factory.mktemp("scenarios-work")
    engine = suite_engine()
    proc = subprocess.run([sys.executable, "-m", "loadtest.scenarios", "--smoke", "--engine", engine,
                           "--out", str(out), "--work-dir", str(work)],
                          capture_output=True, text=True, timeout=2400, cwd=K8S.parent)
    found = {p.stem.split("-", 1)[1]: json.loads(p.read_text()) for p in out.glob(f"{engine}-*.json")
             if not p.name.endswith(".timeline.json")}
    expected = set(SCENARIOS)
    logs = "\n".join(f"--- {p}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(work.rglob("*.log")))
    assert expected <= set(found), f"{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}\n{logs}"
    assert (out / f"{engine}-summary.md").read_text().count("\n") == 2 + len(SCENARIOS)
    return found


def result(results: dict[str, dict[str, Any]], scenario: str) -> dict[str, Any]:
    return results[scenario]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_nothing_lost_nothing_doubled_every_stale_answer_flagged(results: dict[str, dict[str, Any]],
                                                                 scenario: str) -> None:
    r = result(results, scenario)
    load = r["load"]
    assert r["lines_acked"] > 0 and r["ingest_error"] is None
    assert r["counts_exact"], r
    assert (r["records_lost"], r["records_double_counted"], r["unreadable_words"]) == (0, 0, 0)
    # the open-loop schedule kept: about rate x how long the load generator ran, answered or failed
    # (the scenario waits for its first answers before the quiet period: it ran throughout)
    assert load["ran_s"] >= 2 * r["settings"]["quiet_s"]
    assert load["requests"] >= 0.8 * r["settings"]["query_rate"] * load["ran_s"]
    # the crash scenarios too: under exactly-once a query reads only committed state, which the
    # crash cannot take back (state/committed_view.py)
    assert load["stale_unflagged"] == 0, load["unflagged_examples"]
    assert load["stale_flagged"] <= load["ok"]
    assert r["settled_s"] >= r["action_s"] >= 0
    assert Path(load["plot"]).read_bytes()[:4] == b"\x89PNG"
    assert set(r["exit_codes"].values()) == {0}, r["exit_codes"]


def test_no_query_fails_in_the_steady_state(results: dict[str, dict[str, Any]]) -> None:
    load = results["steady"]["load"]
    assert load["failed"] == 0, load["errors"]
    assert load["stale_flagged"] == 0


@pytest.mark.parametrize("scenario", ["rolling-update", "kill", "scale"])
def test_no_query_fails_while_pods_are_replaced_restarted_added_or_removed(results: dict[str, dict[str, Any]],
                                                                           scenario: str) -> None:
    """Stale reads allowed, a pod away is answered for by its standby; once it is back (at a new
    address after a replacement) its peers and the client reach it again at once; and pods removed
    by a scale-in leave the group at once (their StatefulSet no longer counts them), so their
    partitions move without waiting for session.timeout.ms."""
    load = result(results, scenario)["load"]
    assert load["failed"] == 0, (load["errors"], load["error_examples"])


def test_kill_restarts_the_container_in_its_pod(results: dict[str, dict[str, Any]]) -> None:
    r = results["kill"]
    assert r["restarts"] == {"iqmesh-0": 0, "iqmesh-1": 0, "iqmesh-2": 1}
    assert [e["detail"] for e in r["events"] if e["event"] == "container exited"] == ["-9"]


def test_a_lost_node_restores_its_pod_from_the_changelog(results: dict[str, dict[str, Any]]) -> None:
    r = results["node-lost"]
    assert any(e["event"] == "volume lost" and e["pod"] == "iqmesh-2" for e in r["events"])
    assert r["records_restored"] > 0


def test_scale_goes_to_five_and_back_to_three(results: dict[str, dict[str, Any]]) -> None:
    r = result(results, "scale")
    assert r["settled_at_5_s"] > 0 and r["settled_back_at_3_s"] > 0
    created = {e["pod"] for e in r["events"] if e["event"] == "created"}
    assert created == {f"iqmesh-{i}" for i in range(5)}
    assert sorted(r["restarts"]) == ["iqmesh-0", "iqmesh-1", "iqmesh-2"]


def test_rolling_update_replaces_every_pod_highest_first(results: dict[str, dict[str, Any]]) -> None:
    assert results["rolling-update"]["order"] == ["iqmesh-2", "iqmesh-1", "iqmesh-0"]
