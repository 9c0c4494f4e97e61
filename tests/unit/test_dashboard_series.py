"""The dashboard's derived figures: latency quantiles from histogram growth, the gateway's error
rates, and the cluster events read from two routing tables in a row."""

from __future__ import annotations

from typing import Any

import pytest

from kernel.instance_state import State
from router.gateway.metrics import BUCKETS, GatewayMetrics
from router.gateway.series import GatewayReading, gateway_rates, quantile
from router.gateway.timeline import aged, changes, presence


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


def _inst(iid: str, state: State = State.RUNNING, age_ms: int = 100, restoring: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"instance_id": iid, "state": state, "alive": age_ms <= 3000 and state.is_running_or_rebalancing(),
            "heartbeat_age_ms": age_ms, "heartbeat_interval_ms": 1000, "session_timeout_ms": 10_000,
            "restoring_tasks": list(restoring)}


def test_events_joins_late_and_gone_instances_rebalances_and_restores() -> None:
    before = {"instances": [_inst("a"), _inst("b"), _inst("c")]}
    after = {"instances": [_inst("a", State.REBALANCING, restoring=("0_1",)), _inst("b"), _inst("c", age_ms=7000),
                           _inst("d", State.REBALANCING)]}
    got = [(e.kind, e.instance) for e in changes(before, after, 10.0)]
    assert got == [("rebalance", "a"), ("restore", "a"), ("late", "c"), ("joined", "d")]
    late = next(e for e in changes(before, after, 10.0) if e.kind == "late")
    assert "7.0 s old" in late.text and "gone after 10 s" in late.text and late.at == 10.0
    done = {"instances": [_inst("a"), _inst("b"), _inst("c", age_ms=12_000), _inst("d", State.ERROR)]}
    got = [(e.kind, e.instance, e.text) for e in changes(after, done, 11.0)]
    assert [(k, i) for k, i, _ in got] == [("restored", "a"), ("gone", "c"), ("gone", "d"), ("error", "d")]
    assert "no heartbeat for 12.0 s" in got[1][2] and "state ERROR" in got[2][2]
    assert changes(done, done, 12.0) == []
    # a heartbeat late under load, then on time again: no disappearance and no second join
    again = {"instances": [_inst("c")]}
    assert [(e.kind, e.instance) for e in changes(after, again, 12.0)][-2:] == [("back", "c"), ("gone", "d")]


def test_a_dirty_close_is_an_event() -> None:
    def with_dirty(n: int) -> dict[str, Any]:
        return {**_inst("a"), "counters": {"dirty_closes": n}}
    before, after = {"instances": [with_dirty(0)]}, {"instances": [with_dirty(3)]}
    got = changes(before, after, 5.0)
    assert [(e.kind, e.instance) for e in got] == [("dirty-close", "a")]
    assert "closed 3 task(s) without a commit" in got[0].text
    assert changes(after, after, 6.0) == []


def test_a_table_nobody_answers_ages_until_its_instances_are_gone() -> None:
    table = {"instances": [_inst("a"), _inst("b", age_ms=900)]}
    assert [presence(i) for i in aged(table, 2.5)["instances"]] == ["alive", "late"]
    later = aged(table, 9.5)
    assert [presence(i) for i in later["instances"]] == ["late", "gone"]
    assert not any(i["alive"] for i in later["instances"])
    assert [(e.kind, e.instance) for e in changes(table, later, 9.5)] == [("late", "a"), ("gone", "b")]
    # what the instances topic says they last published wins when it is newer: b failed
    heard = aged(table, 2.0, {"b": (State.ERROR, 1500), "a": (State.RUNNING, 99_000)})
    assert [(i["state"], presence(i)) for i in heard["instances"]] == [(State.RUNNING, "alive"), (State.ERROR, "gone")]


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
