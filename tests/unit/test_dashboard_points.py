"""The dashboard's chart points (router/gateway/points.py, series.py): each instance's mean Get
latency from its own counters, nulls while an instance is gone (so its lines break rather than
run across the time it was away), and a gap point, every figure null, when no instance answers."""

from __future__ import annotations

from typing import Any

import pytest

from kernel.instance_state import State
from router.gateway.backend import Backend
from router.gateway.discovery import Discovery
from router.gateway.metrics import GatewayMetrics
from router.gateway.points import GATEWAY_FIELDS, INSTANCE_FIELDS, chart_point, gap_point
from router.gateway.series import GetTimes, instance_get_ms
from router.gateway.snapshot import SnapshotPoller


def _inst(iid: str, gets: int, seconds: float, state: State = State.RUNNING, age_ms: int = 100,
          forwarded: int = 0) -> dict[str, Any]:
    return {"instance_id": iid, "state": state, "alive": state is State.RUNNING and age_ms < 3000,
            "heartbeat_age_ms": age_ms, "heartbeat_interval_ms": 1000, "session_timeout_ms": 10_000,
            "restoring_tasks": [], "stores": [],
            "counters": {"gets_local": gets // 2, "gets_routed": gets - gets // 2, "gets_forwarded": forwarded,
                         "get_seconds": seconds, "scans": 0, "records_processed": 0, "query_errors": {}}}


def test_an_instance_s_mean_get_latency_is_its_get_seconds_over_its_gets() -> None:
    base = GetTimes.of({"instances": [_inst("a", 100, 0.5), _inst("b", 40, 0.2), _inst("c", 900, 9.0)]})
    now = GetTimes.of({"instances": [_inst("a", 300, 1.3, forwarded=100), _inst("b", 40, 0.2),
                                     _inst("c", 10, 0.05), _inst("d", 4, 0.002)]})
    got = instance_get_ms(now, base)
    assert got["a"] == pytest.approx(800 / 300, abs=0.001)  # (1.3 - 0.5) s over 300 Gets, forwarded ones included
    assert got["b"] is None                      # no Get in the window: no latency, not 0
    assert got["c"] == pytest.approx(5.0)        # restarted (its count went down): from zero
    assert got["d"] == pytest.approx(0.5)        # new since the base
    assert instance_get_ms(now, None) == dict.fromkeys(["a", "b", "c", "d"])


def test_a_gone_instance_is_null_on_every_chart_and_a_late_one_is_not() -> None:
    md = {"instances": [_inst("a", 10, 0.1), _inst("b", 10, 0.1, age_ms=5000), _inst("c", 10, 0.1, age_ms=12_000),
                        _inst("d", 10, 0.1, state=State.ERROR)]}
    rates = {iid: {"store_updates_per_s": 1.0, "records_per_s": 2.0, "queries_per_s": 3.0,
                   "query_errors_per_s": 0.0, "lag": 4.0} for iid in "abcd"}
    gateway = {"p50_ms": 2.0, "p99_ms": 9.0, "queries_per_s": 5.0, "client_errors_per_s": 0.0,
               "server_errors_per_s": 0.0}
    plag = {"by_instance": {"a": 1, "c": 7, "(no owner)": 3}, "by_topic": {"t": 11}}
    p = chart_point(100.1234, md, rates, {"a": 0.25, "b": None}, gateway, plag)
    assert p["t"] == 100.123 and p["gateway"] == gateway
    assert p["rates"]["a"] == {**rates["a"], "get_ms": 0.25, "presence": "alive"}
    assert p["rates"]["b"] == {**rates["b"], "get_ms": None, "presence": "late"}  # late: still drawn
    for gone in ("c", "d"):  # silent past its session timeout, or failed: a gap in every line
        assert p["rates"][gone] == {**dict.fromkeys(INSTANCE_FIELDS), "presence": "gone"}
    assert p["processing_lag"] == {"by_instance": {"a": 1, "(no owner)": 3}, "by_topic": {"t": 11}}
    gap = gap_point(101.0, md)
    assert gap["gateway"] == dict.fromkeys(GATEWAY_FIELDS) and gap["processing_lag"] == {}
    assert {iid: r["presence"] for iid, r in gap["rates"].items()} == {"a": "alive", "b": "late", "c": "gone",
                                                                       "d": "gone"}
    assert all(r[k] is None for r in gap["rates"].values() for k in INSTANCE_FIELDS)


async def test_a_snapshot_nobody_answers_adds_a_gap_point_to_the_history() -> None:
    backend = Backend(Discovery())  # knows no instance: every Metadata call fails
    poller = SnapshotPoller(backend, GatewayMetrics())
    try:
        first = await poller.poll_once()
        second = await poller.poll_once()
    finally:
        await backend.close()
    assert first.error and second.error
    assert [p["t"] for p in poller.history] == [first.point["t"], second.point["t"]]
    assert second.point["t"] >= first.point["t"]
    assert second.to_json(GatewayMetrics())["point"] == second.point
    assert second.point["gateway"] == dict.fromkeys(GATEWAY_FIELDS)
