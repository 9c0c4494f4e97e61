"""The query entry point's parts without a broker: the checks that decide whether a local replica
may answer, position bounds, the request builders, the result accessors, and the refusal the query
server makes of each failure. KafkaStreams.query itself runs against a real broker in
tests/integration/test_embedded_query.py."""

from __future__ import annotations

import pytest

from instance.runtime.query import (
    UNBOUNDED,
    FailureReason,
    KeyQuery,
    PositionBound,
    QueryResult,
    StateQueryRequest,
    StateQueryResult,
    WindowKeyQuery,
    WindowRangeQuery,
)
from instance.runtime.query.execute import replica_refusal
from instance.runtime.query.request import check_store_kind
from instance.serde import LongSerde, StringSerde
from instance.state.spec import StoreSpec
from kernel.instance_state import State
from kernel.local_read import LocalReplica, Role
from kernel.unavailable import FailureReason as RoutingReason

STORE = "counts"
F = FailureReason


def check(role: Role, position: int, end: int, *, allow_stale: bool = False, max_lag: int | None = None,
          bound: PositionBound = UNBOUNDED, partition: int = 3) -> FailureReason | None:
    got = replica_refusal(STORE, LocalReplica(role, partition, position, end), allow_stale, max_lag,
                  bound.bound_for(partition))
    return None if got is None else got[0]


def test_local_checks() -> None:
    assert check(Role.ACTIVE, 10, 10) is None
    assert check(Role.STANDBY, 10, 10) is F.NOT_ACTIVE
    assert check(Role.RESTORING, 5, 10) is F.REBALANCING
    assert check(Role.STANDBY, 10, 10, allow_stale=True) is None
    assert check(Role.RESTORING, 5, 10, allow_stale=True) is None
    assert check(Role.STANDBY, 5, 10, allow_stale=True, max_lag=4) is F.NO_REPLICA_WITHIN_LAG
    assert check(Role.STANDBY, 5, 10, allow_stale=True, max_lag=5) is None
    assert check(Role.ACTIVE, -1, 10, max_lag=0) is None  # not logged: no lag
    bounded = PositionBound.at({3: 11})
    assert check(Role.ACTIVE, 10, 10, bound=bounded) is F.NOT_UP_TO_BOUND
    assert check(Role.ACTIVE, 11, 11, bound=bounded) is None
    assert check(Role.ACTIVE, 10, 10, bound=bounded, partition=4) is None  # the bound is per partition
    replica = LocalReplica(Role.ACTIVE, 3, 10, 10)
    assert not replica.is_stale(State.RUNNING) and replica.is_stale(State.REBALANCING)
    assert LocalReplica(Role.ACTIVE, 3, 9, 10).is_stale(State.RUNNING)
    assert LocalReplica(Role.STANDBY, 3, 10, 10).is_stale(State.RUNNING)


def test_a_global_copy_answers_without_allow_stale_and_only_the_bounds_apply() -> None:
    assert check(Role.GLOBAL, 100, 120, partition=0) is None
    assert check(Role.GLOBAL, 100, 120, max_lag=5, partition=0) is F.NO_REPLICA_WITHIN_LAG
    assert check(Role.GLOBAL, 100, 120, bound=PositionBound.at({0: 101}), partition=0) is F.NOT_UP_TO_BOUND


def test_refusal_messages_name_store_partition_and_figures() -> None:
    got = replica_refusal(STORE, LocalReplica(Role.RESTORING, 2, 5, 10), False, None, None)
    assert got == (F.REBALANCING, "store 'counts' partition 2 is restoring (lag 5)")
    got = replica_refusal(STORE, LocalReplica(Role.ACTIVE, 2, 5, 10), False, None, 7)
    assert got == (F.NOT_UP_TO_BOUND, "replica at 5, bound 7")


def test_a_query_result_speaks_the_reason_routing_passes_on() -> None:
    # one vocabulary from the store to the wire: no table translates the runtime's reasons
    assert FailureReason is RoutingReason


def test_request_builders_and_defaults() -> None:
    r = StateQueryRequest.in_store(STORE).with_query(KeyQuery.with_key("a"))
    assert r == StateQueryRequest(STORE, KeyQuery("a"))
    assert r.partitions is None and r.position_bound is UNBOUNDED and not r.allow_stale and r.max_lag is None
    r2 = r.with_partitions({3, 1}).with_position_bound(PositionBound.at({1: 5})).with_stale_reads(max_lag=10)
    assert r2.partitions == (1, 3) and r2.position_bound.bound_for(1) == 5 and r2.position_bound.bound_for(3) is None
    assert r2.allow_stale and r2.max_lag == 10
    assert r2.with_all_partitions().partitions is None
    assert PositionBound.unbounded().bound_for(0) is None


def test_queries_fit_only_their_kind_of_store() -> None:
    window = StoreSpec("w", StringSerde(), LongSerde(), kind="window")
    check_store_kind("w", window, WindowKeyQuery("k", 0, 10).store_kind)
    check_store_kind("w", window, KeyQuery("k").store_kind)  # the store itself refuses a key query
    with pytest.raises(ValueError, match="store 'w' is a window store, not a session store"):
        check_store_kind("w", window, WindowRangeQuery("k").store_kind)


def test_results() -> None:
    ok = QueryResult(1, 7, LocalReplica(Role.ACTIVE, 1, 42, 42))
    refused = QueryResult[int](2, failure=F.NOT_ACTIVE, message="not here")
    both = StateQueryResult({1: ok, 2: refused})
    assert ok.is_success and ok.position == 42 and not refused.is_success and refused.position == -1
    assert both.position == {1: 42}
    with pytest.raises(ValueError):
        both.only_partition_result()
    assert StateQueryResult({1: ok}).only_partition_result() is ok
