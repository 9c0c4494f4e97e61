"""QueryRouter over a ClusterView built from InstanceInfo values; query options; position tokens."""

from __future__ import annotations

import base64
import itertools
import json
import sys
import time
from collections.abc import Callable, Iterator

import pytest

from instance.runtime.query.execute import replica_refusal
from kernel.instance_state import State
from kernel.local_read import LocalReplica, Role
from kernel.metadata import ClusterView, InstanceInfo, StorePartitionInfo
from kernel.options import QueryOptions
from kernel.status_details import refusal_text
from kernel.task_id import TaskId
from kernel.tokens import PositionToken
from kernel.unavailable import FailureReason as R
from kernel.unavailable import UnavailableError
from kernel.wire_enums import reason_of, reason_pb
from router.client.query_router import Candidate, QueryRouter

STORE = "counts"
TASK = TaskId(0, 3)
LIVENESS_MS = 5000


def now_ms() -> int:
    return int(time.time() * 1000)


def info(iid: str, *, active: bool = False, standby: bool = False, restoring: bool = False, lag: int = 0,
         state: State = State.RUNNING, heartbeat_age_ms: int = 0, assigned_at_ms: int = 0) -> InstanceInfo:
    role = Role.ACTIVE if active else Role.RESTORING if restoring else Role.STANDBY
    stores = (StorePartitionInfo(STORE, TASK.partition, role, 100 - lag, 100, TASK),) if active or standby or \
        restoring else ()
    return InstanceInfo(instance_id=iid, endpoint=f"{iid}:9000", state=state,
                        active_tasks=(TASK,) if active else (), standby_tasks=(TASK,) if standby else (),
                        restoring_tasks=(TASK,) if restoring else (), assigned_at_ms=assigned_at_ms,
                        heartbeat_ms=now_ms() - heartbeat_age_ms, stores=stores)


def view_of(*infos: InstanceInfo) -> ClusterView:
    view = ClusterView(liveness_ms=LIVENESS_MS)
    for i in infos:
        view.update(i)
    return view


class Calls:
    """Records which candidate was asked; each endpoint answers or refuses as configured."""

    def __init__(self, refuse: dict[str, R] | None = None, local_refuses: R | None = None) -> None:
        self.refuse = refuse or {}
        self.local_refuses = local_refuses
        self.asked: list[str] = []

    def answer_local(self) -> str:
        self.asked.append("local")
        if self.local_refuses is not None:
            raise UnavailableError(self.local_refuses, "local refuses")
        return "local"

    def forward(self, endpoint: str) -> str:
        self.asked.append(endpoint)
        if endpoint in self.refuse:
            raise UnavailableError(self.refuse[endpoint], f"{endpoint} refuses")
        return endpoint


STRICT = QueryOptions()


def route(view: ClusterView, calls: Calls, options: QueryOptions = STRICT, local_id: str | None = "me", *,
          forwarded: bool = False, local_state: State = State.RUNNING) -> str:
    return QueryRouter(view, local_id).route(STORE, TASK, options, calls.answer_local, calls.forward,
                                             forwarded=forwarded, local_state=local_state)


def refusal(fn: Callable[[], object]) -> UnavailableError:
    with pytest.raises(UnavailableError) as e:
        fn()
    return e.value


# --- candidates and routing -------------------------------------------------------------------


def test_active_is_asked_first() -> None:
    view = view_of(info("b", standby=True), info("a", active=True), info("c", standby=True, lag=5))
    calls = Calls()
    assert route(view, calls, QueryOptions(allow_stale=True)) == "a:9000"
    assert calls.asked == ["a:9000"]


def test_local_active_answers_locally() -> None:
    calls = Calls()
    assert route(view_of(info("me", active=True), info("b", standby=True)), calls) == "local"
    assert calls.asked == ["local"]


def test_client_without_replicas_forwards_even_to_the_active() -> None:
    calls = Calls()
    assert route(view_of(info("me", active=True)), calls, local_id=None) == "me:9000"


def test_standbys_only_with_allow_stale_least_lag_first() -> None:
    view = view_of(info("a", active=True), info("b", standby=True, lag=30), info("c", standby=True, lag=7),
                   info("d", standby=True, lag=0))
    router = QueryRouter(view, "me")
    assert [c.instance_id for c in router.candidates(TASK, QueryOptions())] == ["a"]
    assert router.candidates(TASK, QueryOptions(allow_stale=True)) == [
        Candidate("a", "a:9000", 0), Candidate("d", "d:9000", 0), Candidate("c", "c:9000", 7),
        Candidate("b", "b:9000", 30)]

    calls = Calls(refuse={"a:9000": R.NOT_AVAILABLE})
    e = refusal(lambda: route(view, calls))
    assert (e.reason, e.tried, calls.asked) == (R.NOT_AVAILABLE, ("a",), ["a:9000"])

    calls = Calls(refuse={"a:9000": R.NOT_AVAILABLE, "d:9000": R.NOT_AVAILABLE})
    assert route(view, calls, QueryOptions(allow_stale=True)) == "c:9000"
    assert calls.asked == ["a:9000", "d:9000", "c:9000"]


def test_restoring_owner_is_the_active_candidate() -> None:
    view = view_of(info("a", restoring=True, lag=40), info("b", standby=True))
    assert [c.instance_id for c in QueryRouter(view, "me").candidates(TASK, QueryOptions())] == ["a"]


def test_most_recent_assignment_wins_between_two_claimants() -> None:
    view = view_of(info("a", active=True, assigned_at_ms=1), info("b", active=True, assigned_at_ms=2))
    assert route(view, Calls()) == "b:9000"


def test_dead_instances_are_skipped() -> None:
    stale_heartbeat = LIVENESS_MS + 1000
    view = view_of(info("a", active=True, heartbeat_age_ms=stale_heartbeat), info("b", standby=True),
                   info("c", standby=True, state=State.PENDING_SHUTDOWN))
    calls = Calls()
    assert route(view, calls, QueryOptions(allow_stale=True)) == "b:9000"
    assert calls.asked == ["b:9000"]
    e = refusal(lambda: route(view, Calls()))  # without allow_stale nobody is left
    assert e.reason is R.REBALANCING and e.tried == ()
    assert str(e).startswith(f"no live replica of {STORE!r} partition 3")


def test_no_candidates_reason() -> None:
    assert refusal(lambda: route(view_of(), Calls())).reason is R.NOT_AVAILABLE
    assert refusal(lambda: route(view_of(), Calls(), local_state=State.REBALANCING)).reason is R.REBALANCING
    assert refusal(lambda: route(view_of(info("x")), Calls())).reason is R.REBALANCING  # someone is there


def test_active_is_not_routed_to_unless_this_instance_runs_or_rebalances() -> None:
    view = view_of(info("a", active=True), info("b", standby=True))
    router = QueryRouter(view, "me")
    for state in (State.CREATED, State.PENDING_SHUTDOWN, State.ERROR):
        assert router.candidates(TASK, QueryOptions(), state) == []
        assert [c.instance_id for c in router.candidates(TASK, QueryOptions(allow_stale=True), state)] == ["b"]
    assert [c.instance_id for c in router.candidates(TASK, QueryOptions(), State.REBALANCING)] == ["a"]


def test_max_lag_skips_replicas_that_report_more_lag() -> None:
    view = view_of(info("a", active=True), info("b", standby=True, lag=50), info("c", standby=True, lag=8))
    calls = Calls(refuse={"a:9000": R.REBALANCING})
    assert route(view, calls, QueryOptions(allow_stale=True, max_lag=10)) == "c:9000"
    assert calls.asked == ["a:9000", "c:9000"]

    calls = Calls(refuse={"a:9000": R.NOT_AVAILABLE})
    e = refusal(lambda: route(view, calls, QueryOptions(allow_stale=True, max_lag=5)))
    assert e.reason is R.NO_REPLICA_WITHIN_LAG
    assert e.tried == ("a",) and calls.asked == ["a:9000"]  # b and c were never asked
    assert "(NOT_AVAILABLE, NO_REPLICA_WITHIN_LAG, NO_REPLICA_WITHIN_LAG)" in str(e)


def test_position_bound_not_reached_is_not_up_to_bound() -> None:
    bound = PositionToken(STORE, TASK.partition, 120)
    options = QueryOptions(allow_stale=True, bound=bound)
    view = view_of(info("me", active=True), info("b", standby=True))

    def answer_local() -> str:
        assert options.bound is not None
        replica = LocalReplica(Role.ACTIVE, TASK.partition, 100, 100)
        refused = replica_refusal(STORE, replica, True, None, options.bound.offset)
        assert refused is not None and refused[0] is R.NOT_UP_TO_BOUND
        raise UnavailableError(R.NOT_UP_TO_BOUND, refused[1])

    def forward(endpoint: str) -> str:
        raise UnavailableError(R.NOT_ACTIVE, "the standby is not there any more")

    e = refusal(lambda: QueryRouter(view, "me").route(STORE, TASK, options, answer_local, forward))
    assert e.reason is R.NOT_UP_TO_BOUND and e.tried == ("me", "b")


@pytest.mark.parametrize("reasons", list(itertools.permutations(R)))
def test_reason_priority(reasons: tuple[R, ...]) -> None:
    assert R.most_relevant(reasons) is min(reasons, key=list(R).index)
    view = view_of(info("a", active=True), *(info(f"s{i}", standby=True, lag=i) for i in range(1, len(reasons))))
    endpoints = [c.endpoint for c in QueryRouter(view, "me").candidates(TASK, QueryOptions(allow_stale=True))]
    calls = Calls(refuse=dict(zip(endpoints, reasons, strict=True)))
    assert refusal(lambda: route(view, calls, QueryOptions(allow_stale=True))).reason is min(
        reasons, key=list(R).index)


def test_reason_order_and_details() -> None:
    assert [r.name for r in R] == ["NOT_UP_TO_BOUND", "NO_REPLICA_WITHIN_LAG", "REBALANCING", "NOT_ACTIVE",
                                   "NOT_AVAILABLE"]
    assert R.most_relevant([]) is R.NOT_AVAILABLE
    assert reason_of(reason_pb(R.NOT_ACTIVE)) is R.NOT_ACTIVE
    assert reason_of(99) is R.NOT_AVAILABLE  # a newer writer's reason
    assert reason_of(0) is R.NOT_AVAILABLE  # unspecified


def test_forwarded_query_is_answered_locally_or_refused_never_forwarded() -> None:
    view = view_of(info("a", active=True), info("b", standby=True))
    calls = Calls()
    assert route(view, calls, QueryOptions(allow_stale=True), forwarded=True) == "local"
    calls = Calls(local_refuses=R.NOT_ACTIVE)
    e = refusal(lambda: route(view, calls, QueryOptions(allow_stale=True), forwarded=True))
    assert e.reason is R.NOT_ACTIVE and calls.asked == ["local"]
    # the receiver need not resolve the key's task first; a query from a client must
    calls = Calls()
    assert QueryRouter(view, "me").route(STORE, None, QueryOptions(), calls.answer_local, calls.forward,
                                         forwarded=True) == "local"
    with pytest.raises(ValueError):
        QueryRouter(view, "me").route(STORE, None, QueryOptions(), Calls().answer_local, Calls().forward)


def test_other_errors_end_routing() -> None:
    view = view_of(info("a", active=True), info("b", standby=True))
    asked: list[str] = []

    def forward(endpoint: str) -> str:
        asked.append(endpoint)
        raise KeyError("unknown store on the other side")

    with pytest.raises(KeyError):
        QueryRouter(view, "me").route(STORE, TASK, QueryOptions(allow_stale=True), lambda: "local", forward)
    assert asked == ["a:9000"]


# --- options and tokens -----------------------------------------------------------------------


def test_query_options_parse() -> None:
    token = PositionToken(STORE, 3, 42).encode()
    assert QueryOptions.parse(STORE, True, -1, token) == QueryOptions(True, None, PositionToken(STORE, 3, 42))
    assert QueryOptions.parse(STORE, max_lag=0) == QueryOptions(max_lag=0)
    with pytest.raises(ValueError, match="for store"):
        QueryOptions.parse("other", position=token)
    with pytest.raises(ValueError, match="position token"):
        QueryOptions.parse(STORE, position="garbage")
    with pytest.raises(ValueError, match="names partition 3 of store"):
        QueryOptions.parse(STORE, position=token, partitions=3)
    assert QueryOptions.parse(STORE, position=token, partitions=4).bound == PositionToken(STORE, 3, 42)


# --- task ids ---------------------------------------------------------------------------------


def test_task_id() -> None:
    assert str(TaskId(0, 3)) == "0_3" and TaskId.parse("12_7") == TaskId(12, 7)
    assert sorted([TaskId(1, 0), TaskId(0, 10), TaskId(0, 2)]) == [TaskId(0, 2), TaskId(0, 10), TaskId(1, 0)]
    with pytest.raises(AttributeError):
        TaskId(0, 1).partition = 2  # type: ignore[misc]


@pytest.mark.parametrize("text", ["", "0", "0_", "_3", "0-3", "a_b", "-1_3", "0_3_1", " 0_3", "0_3\n", "١_٢"])
def test_task_id_parse_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="<subtopology>_<partition>"):
        TaskId.parse(text)


# --- position tokens --------------------------------------------------------------------------


def b64(raw: str | bytes) -> str:
    data = raw.encode() if isinstance(raw, str) else raw
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def test_token_round_trip() -> None:
    for t in (PositionToken(STORE, 0, 0), PositionToken("a-b.c", 2**31 - 1, 2**63 - 1), PositionToken("s", 3, -1)):
        assert PositionToken.decode(t.encode()) == t


MALFORMED = {
    "empty": "",
    "not base64": "!!!!",
    "bad base64 length": "aaaaa",
    "non-ascii": "é",
    "garbage": "garbage",
    "not utf-8": b64(b"\xff\xfe\xfd"),
    "not json": b64("{s:1}"),
    "json list": b64("[1,2,3]"),
    "json string": b64('"counts"'),
    "json null": b64("null"),
    "missing offset": b64('{"s":"counts","p":0}'),
    "extra field": b64('{"s":"counts","p":0,"o":1,"x":2}'),
    "store not string": b64('{"s":1,"p":0,"o":1}'),
    "empty store": b64('{"s":"","p":0,"o":1}'),
    "partition string": b64('{"s":"counts","p":"0","o":1}'),
    "partition bool": b64('{"s":"counts","p":true,"o":1}'),
    "negative partition": b64('{"s":"counts","p":-1,"o":1}'),
    "partition beyond int32": b64('{"s":"counts","p":2147483648,"o":1}'),
    "offset float": b64('{"s":"counts","p":0,"o":1.5}'),
    "offset 1e999 (inf, OverflowError in int())": b64('{"s":"counts","p":0,"o":1e999}'),
    "offset NaN": b64('{"s":"counts","p":0,"o":NaN}'),
    "offset below -1": b64('{"s":"counts","p":0,"o":-2}'),
    "offset beyond int64": b64('{"s":"counts","p":0,"o":9223372036854775808}'),
    "offset with 1400 digits": b64('{"s":"counts","p":0,"o":' + "9" * 1400 + "}"),
    "too long": b64('{"s":"' + "x" * 3000 + '","p":0,"o":1}'),
    "deep nesting, too long": b64("[" * 100_000 + "]" * 100_000),
}


@pytest.mark.parametrize("token", list(MALFORMED.values()), ids=list(MALFORMED))
def test_malformed_token_raises_value_error(token: str) -> None:
    with pytest.raises(ValueError, match="position token .* is not valid"):
        PositionToken.decode(token)


@pytest.mark.parametrize("token", [None, 42, b"abc"])
def test_non_string_token_raises_value_error(token: object) -> None:
    with pytest.raises(ValueError):
        PositionToken.decode(token)  # type: ignore[arg-type]


@pytest.fixture
def low_recursion_limit() -> Iterator[None]:
    """A recursion limit just above the current depth, so modest JSON nesting overflows it."""
    depth, frame = 0, sys._getframe()
    while frame is not None and frame.f_back is not None:
        depth, frame = depth + 1, frame.f_back
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + 60)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_deeply_nested_token_within_length_raises_value_error(low_recursion_limit: None) -> None:
    nested = b64("[" * 500 + "]" * 500)
    assert len(nested) < 2048
    # before 3.12 the C JSON scanner counts its nesting against the Python recursion limit
    match = "nested too deeply" if sys.version_info < (3, 12) else "position token"
    with pytest.raises(ValueError, match=match):
        PositionToken.decode(nested)


def test_a_strict_read_refused_while_a_standby_holds_the_partition_suggests_allow_stale() -> None:
    hint = "a standby holds this partition: allow stale reads"
    view = view_of(info("b", standby=True))  # the active is gone (rebalancing)
    e = refusal(lambda: route(view, Calls()))
    assert e.reason is R.REBALANCING and e.standby_holds  # typed; the status text says it to people
    assert hint in refusal_text(e) and "--allow-stale" in refusal_text(e)
    view = view_of(info("a", active=True), info("b", standby=True))
    e = refusal(lambda: route(view, Calls(refuse={"a:9000": R.REBALANCING})))
    assert e.reason is R.REBALANCING and e.standby_holds and e.tried == ("a",)
    e = refusal(lambda: route(view_of(info("x")), Calls()))  # no standby: nothing to suggest
    assert not e.standby_holds and "allow" not in refusal_text(e)
    e = refusal(lambda: route(view, Calls(refuse={"a:9000": R.REBALANCING, "b:9000": R.REBALANCING}),
                              QueryOptions(allow_stale=True)))
    assert not e.standby_holds  # asked already: nothing to suggest


def test_instance_info_is_typed_and_its_json_keeps_the_wire_names() -> None:
    """State, TaskId and Role are types on both sides; names and task-id text only in the JSON."""
    i = info("a", standby=True, lag=4, state=State.REBALANCING)
    doc = json.loads(i.to_json())
    assert (doc["state"], doc["standby_tasks"], doc["stores"][0]["role"], doc["stores"][0]["task_id"]) == \
           ("REBALANCING", ["0_3"], "STANDBY", "0_3")
    back = InstanceInfo.from_json(i.to_json())
    assert back == i and back.state is State.REBALANCING and back.standby_tasks == (TASK,)
    assert back.stores[0].role is Role.STANDBY and back.stores[0].task_id == TASK
    newer = json.loads(i.to_json())
    newer["state"] = "SOME_FUTURE_STATE"
    assert InstanceInfo.from_json(json.dumps(newer).encode()).state is State.NOT_RUNNING  # never routed to


def test_the_view_answers_from_its_latest_updates_in_instance_id_order() -> None:
    view = view_of(info("c", standby=True, lag=5), info("b", active=True, assigned_at_ms=1),
                   info("a", standby=True, lag=1))
    assert [i.instance_id for i in view.instances()] == ["a", "b", "c"]
    listed = view.instances()
    listed.clear()  # the caller's copy
    assert len(view.instances()) == 3
    assert view.owner(TASK).instance_id == "b"  # type: ignore[union-attr]
    assert [i.instance_id for i in view.standbys(TASK)] == ["a", "c"]
    view.update(info("a", active=True, assigned_at_ms=2))  # a takes the task over
    assert view.owner(TASK).instance_id == "a"  # type: ignore[union-attr]
    assert [i.instance_id for i in view.standbys(TASK)] == ["c"]
    view.update(info("c", standby=True, lag=0, heartbeat_age_ms=LIVENESS_MS + 1000))  # older: ignored
    assert [i.instance_id for i in view.standbys(TASK)] == ["c"]
    view.remove("a")
    assert view.owner(TASK).instance_id == "b"  # type: ignore[union-attr]
    assert [i.instance_id for i in view.instances()] == ["b", "c"]
    view.update(info("b", active=True, assigned_at_ms=1, state=State.PENDING_SHUTDOWN))
    assert view.owner(TASK) is None
