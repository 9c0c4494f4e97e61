"""The dashboard's derived figures: latency quantiles from histogram growth, the gateway's error
rates, and the cluster events read from two routing tables in a row."""

from __future__ import annotations

from typing import Any

import pytest

from router.gateway.metrics import BUCKETS, GatewayMetrics
from router.gateway.series import GatewayReading, gateway_rates, quantile
from router.gateway.timeline import changes


def test_quantiles_interpolate_within_a_bucket_and_stop_at_the_largest_bound() -> None:
    counts = [0] * (len(BUCKETS) + 1)
    assert quantile(0.5, counts) is None
    counts[BUCKETS.index(0.01)] = 100  # 100 answers in (0.005, 0.01]
    assert quantile(0.5, counts) == pytest.approx(0.0075)
    assert quantile(0.99, counts) == pytest.approx(0.00995)
    counts[-1] = 100  # and 100 slower than the largest bound
    assert quantile(0.99, counts) == BUCKETS[-1]
    assert quantile(0.25, counts) == pytest.approx(0.0075)


def test_gateway_rates_count_query_routes_for_latency_and_every_route_for_errors() -> None:
    m = GatewayMetrics()
    base = GatewayReading.of(m)
    for _ in range(98):
        m.latency["/v1/stores/{store}/keys/{key}"].observe(0.002)
    m.latency["/v1/stores/{store}/all"].observe(0.3)
    m.latency["/v1/stores/{store}/all"].observe(0.3)
    m.latency["/v1/stores/{store}/watch"].observe(60.0)  # a stream: not a query's latency
    m.latency["/v1/events"].observe(30.0)
    m.requests[("GET", "/v1/stores/{store}/keys/{key}", 200)] += 95
    m.requests[("GET", "/v1/stores/{store}/keys/{key}", 404)] += 3
    m.requests[("GET", "/v1/stores/{store}/all", 503)] += 2
    r = gateway_rates(GatewayReading.of(m), base, 2.0)
    assert r["queries_per_s"] == 50.0
    assert r["p50_ms"] is not None and 1.0 < r["p50_ms"] <= 2.5
    assert r["p99_ms"] is not None and 250.0 < r["p99_ms"] <= 500.0
    assert (r["client_errors_per_s"], r["server_errors_per_s"]) == (1.5, 1.0)
    assert gateway_rates(GatewayReading.of(m), None, 0.0)["p50_ms"] is None


def _inst(iid: str, state: str = "RUNNING", alive: bool = True, restoring: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"instance_id": iid, "state": state, "alive": alive, "heartbeat_age_ms": 7000 if not alive else 100,
            "restoring_tasks": list(restoring)}


def test_events_joins_crashes_rebalances_and_restores() -> None:
    before = {"instances": [_inst("a"), _inst("b"), _inst("c")]}
    after = {"instances": [_inst("a", "REBALANCING", restoring=("0_1",)), _inst("b"), _inst("c", alive=False),
                           _inst("d", "REBALANCING")]}
    got = [(e.kind, e.instance) for e in changes(before, after, 10.0)]
    assert got == [("joined", "d"), ("gone", "c"), ("rebalance", "a"), ("restore", "a")]
    gone = next(e for e in changes(before, after, 10.0) if e.kind == "gone")
    assert "RUNNING" in gone.text and "7.0 s" in gone.text and gone.at == 10.0
    done = {"instances": [_inst("a"), _inst("b"), _inst("d", "ERROR")]}
    assert [(e.kind, e.instance) for e in changes(after, done, 11.0)] == [("restored", "a"), ("error", "d")]
    assert changes(done, done, 12.0) == []


def test_processing_lag_is_summed_per_owner_of_the_task_and_per_topic() -> None:
    from router.gateway.topology import processing_lag

    md = {"instances": [{"instance_id": "a", "alive": True, "active_tasks": ["0_0", "1_0"]},
                        {"instance_id": "b", "alive": True, "active_tasks": ["0_1"]},
                        {"instance_id": "c", "alive": False, "active_tasks": ["1_1"]}]}
    lags = [{"task": "0_0", "topic": "in", "lag": 5}, {"task": "0_1", "topic": "in", "lag": 7},
            {"task": "1_0", "topic": "app-x-repartition", "lag": 1},
            {"task": "1_1", "topic": "app-x-repartition", "lag": 4}]  # its owner is dead: no owner
    assert processing_lag(lags, md) == {"by_instance": {"a": 6, "b": 7, "(no owner)": 4},
                                        "by_topic": {"app-x-repartition": 5, "in": 12}}
    assert processing_lag([], md) == {"by_instance": {"a": 0, "b": 0}, "by_topic": {}}
