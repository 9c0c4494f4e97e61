"""Foreign-key table-table joins (KIP-213) through the TopologyTestDriver: inner and left join
results as rows, foreign keys and right rows change, stale answers dropped by their value hash,
the internal topics the runtime creates, names, and bad arguments. Expected values follow Kafka
Streams' KTableKTableForeignKeyJoinIntegrationTest cases (the oracle checks the rest:
tests/oracle, template ``fk_join``)."""

from __future__ import annotations

from typing import Any

import pytest

from instance.errors import TopologyException
from instance.runtime.internal_topics import plan
from instance.serde import StringSerde
from instance.state import origins
from instance.testing import TopologyTestDriver
from instance.topology import KTable, Materialized, StreamsBuilder, TableJoined
from instance.topology import fk_wire as W

S = StringSerde()


def joiner(order: Any, customer: Any) -> str:
    return f"{order}/{'null' if customer is None else customer}"


def customer_of(order: str) -> str | None:
    """Orders are ``customer:item``; an empty customer is no foreign key."""
    return order.split(":")[0] or None


def _topology(left: bool, extractor: Any = customer_of, **join_kwargs: Any) -> tuple[StreamsBuilder, KTable]:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    orders = b.table("orders", "orders-store")
    customers = b.table("customers", "customers-store")
    op = orders.left_join if left else orders.join
    joined = op(customers, extractor, joiner, Materialized.as_("joined"), **join_kwargs)
    joined.to_stream().to("out")
    return b, joined


class Harness:
    def __init__(self, left: bool, **kw: Any) -> None:
        b, self.table = _topology(left, **kw)
        self.driver = TopologyTestDriver(b.build())
        self.orders = self.driver.create_input_topic("orders", S, S)
        self.customers = self.driver.create_input_topic("customers", S, S)
        self.out = self.driver.create_output_topic("out", S, S)

    def order(self, key: str, value: str | None, ts: int) -> list[tuple[Any, Any, int]]:
        self.orders.pipe_input(key, value, ts)
        return self.read()

    def customer(self, key: str, value: str | None, ts: int) -> list[tuple[Any, Any, int]]:
        self.customers.pipe_input(key, value, ts)
        return self.read()

    def read(self) -> list[tuple[Any, Any, int]]:
        return [(r.key, r.value, r.timestamp) for r in self.out.read_records_to_list()]

    def joined(self) -> dict[str, Any]:
        return dict(self.driver.get_key_value_store("joined").all())


@pytest.fixture
def inner() -> Any:
    h = Harness(left=False)
    yield h
    h.driver.close()


@pytest.fixture
def left() -> Any:
    h = Harness(left=True)
    yield h
    h.driver.close()


def test_inner_join_follows_both_sides(inner: Harness) -> None:
    assert inner.order("o1", "c1:pen", 10) == []                         # no customer yet
    assert inner.customer("c1", "Ann", 20) == [("o1", "c1:pen/Ann", 20)]  # the later time
    assert inner.order("o2", "c1:ink", 15) == [("o2", "c1:ink/Ann", 20)]
    # a right update answers every subscriber of its key
    assert sorted(inner.customer("c1", "Ann B", 30)) == [("o1", "c1:pen/Ann B", 30), ("o2", "c1:ink/Ann B", 30)]
    # the same foreign key, a new value: joined again
    assert inner.order("o1", "c1:pencil", 40) == [("o1", "c1:pencil/Ann B", 40)]
    assert inner.joined() == {"o1": "c1:pencil/Ann B", "o2": "c1:ink/Ann B"}


def test_inner_join_foreign_key_change_and_deletes(inner: Harness) -> None:
    inner.customer("c1", "Ann", 1)
    inner.customer("c2", "Bob", 2)
    assert inner.order("o1", "c1:pen", 3) == [("o1", "c1:pen/Ann", 3)]
    assert inner.order("o1", "c2:pen", 4) == [("o1", "c2:pen/Bob", 4)]
    # the old customer's changes no longer reach o1 (it unsubscribed)
    assert inner.customer("c1", "Ann B", 5) == []
    # a foreign key with no row: the previous result goes
    assert inner.order("o1", "c9:pen", 6) == [("o1", None, 6)]
    assert inner.customer("c9", "Cy", 7) == [("o1", "c9:pen/Cy", 7)]
    # the right row deleted: the result goes
    assert inner.customer("c9", None, 8) == [("o1", None, 8)]
    assert inner.customer("c9", "Cy", 9) == [("o1", "c9:pen/Cy", 9)]
    # a null foreign key: the result goes, the record is counted as dropped
    assert inner.order("o1", ":pen", 10) == [("o1", None, 10)]
    assert inner.driver.dropped_records_total() == 1
    assert inner.order("o1", "c2:pen", 11) == [("o1", "c2:pen/Bob", 11)]
    # the left row deleted
    assert inner.order("o1", None, 12) == [("o1", None, 12)]
    assert inner.customer("c2", "Bob B", 13) == []
    assert inner.joined() == {}


def test_inner_join_new_row_without_match_emits_nothing(inner: Harness) -> None:
    assert inner.order("o1", "c1:pen", 1) == []
    assert inner.order("o1", "c1:ink", 2) == []  # same foreign key: nothing to delete
    # the delete answer reaches the result store, which never held o1: its cache forwards nothing
    assert inner.order("o1", None, 3) == []


def test_left_join_every_row_has_a_result(left: Harness) -> None:
    assert left.order("o1", "c1:pen", 1) == [("o1", "c1:pen/null", 1)]
    assert left.customer("c1", "Ann", 2) == [("o1", "c1:pen/Ann", 2)]
    assert left.order("o1", ":pen", 3) == [("o1", ":pen/null", 3)]  # null foreign key: still a row
    assert left.customer("c1", "Ann B", 4) == []  # o1 left c1
    assert left.order("o1", "c1:pen", 5) == [("o1", "c1:pen/Ann B", 5)]
    assert left.customer("c1", None, 6) == [("o1", "c1:pen/null", 6)]
    assert left.order("o1", None, 7) == [("o1", None, 7)]
    assert left.order("o2", None, 8) == []  # deleting a row never seen: nothing
    assert left.joined() == {}


def test_foreign_keys_sharing_a_prefix_stay_apart(inner: Harness) -> None:
    """The subscription store's keys put the foreign key's length first: c1's subscribers are
    not c10's."""
    inner.customer("c1", "Ann", 1)
    inner.customer("c10", "Ten", 2)
    inner.order("o1", "c1:pen", 3)
    inner.order("o10", "c10:pen", 4)
    assert inner.customer("c1", "Ann B", 5) == [("o1", "c1:pen/Ann B", 5)]
    assert inner.customer("c10", "Ten B", 6) == [("o10", "c10:pen/Ten B", 6)]


def test_a_stale_response_is_dropped(inner: Harness) -> None:
    """An answer for an older version of the left row (its hash differs from the current value's)
    joins nothing: a row whose foreign key changed quickly never shows the old customer. (The
    answers are piped in by hand, as the response topic's values are written: with a trailer,
    here without origin, instance/state/origins.py.)"""
    inner.customer("c1", "Ann", 1)
    inner.order("o1", "c1:pen", 2)
    inner.read()
    topic = next(t for t in inner.driver._by_topic if t.endswith("SUBSCRIPTION-RESPONSE-0000000012-topic"))
    old = W.value_hash(S.serialize("c1:old"))
    stale = origins.seal(W.ResponseSerde(S).serialize(W.Response(old, "Eve", 0)), None)
    inner.driver.pipe_raw(topic, S.serialize("o1"), stale, 3)
    assert inner.read() == []
    current = W.value_hash(S.serialize("c1:pen"))
    fresh = origins.seal(W.ResponseSerde(S).serialize(W.Response(current, "Eve", 0)), None)
    inner.driver.pipe_raw(topic, S.serialize("o1"), fresh, 4)
    assert inner.read() == [("o1", "c1:pen/Eve", 4)]


def test_key_value_extractor() -> None:
    h = Harness(left=False, extractor=lambda key, value: f"c{key[-1]}")
    try:
        h.customer("c1", "Ann", 1)
        assert h.order("o1", "anything", 2) == [("o1", "anything/Ann", 2)]
    finally:
        h.driver.close()


def test_internal_topics_and_store_are_planned_like_kafka_streams() -> None:
    b, _ = _topology(left=False)
    topology = b.build()
    sub = "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000004-topic"
    resp = "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000012-topic"
    store = "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000008"
    assert set(topology.internal_topics) == {sub, resp}
    assert store in topology.stores
    layout, to_create = plan(topology, "app", {"orders": 3, "customers": 2})
    # the subscription topic is co-partitioned with the right table, the response with the left
    assert layout.partitions[f"app-{sub}"] == 2
    assert layout.partitions[f"app-{resp}"] == 3
    assert layout.changelogs[store] == f"app-{store}-changelog"
    assert layout.partitions[f"app-{store}-changelog"] == 2
    created = {t.topic: t.num_partitions for t in to_create}
    assert created[f"app-{sub}"] == 2 and created[f"app-{resp}"] == 3
    assert created["app-joined-changelog"] == 3


def test_named_join_names_its_nodes_store_and_topics() -> None:
    b, _ = _topology(left=True, table_joined=TableJoined.as_("enrich"))
    topology = b.build()
    assert set(topology.internal_topics) == {"enrich-subscription-registration-topic",
                                             "enrich-subscription-response-topic"}
    assert "enrich-subscription-store" in topology.stores
    assert {"enrich-subscription-receive", "enrich-subscription-response-resolver",
            "enrich-result"} <= set(topology.nodes)


def test_unmaterialized_result_forwards_every_result() -> None:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    orders, customers = b.table("orders"), b.table("customers")
    orders.join(customers, customer_of, joiner).to_stream().to("out")
    with TopologyTestDriver(b.build()) as d:
        o, c = d.create_input_topic("orders", S, S), d.create_input_topic("customers", S, S)
        out = d.create_output_topic("out", S, S)
        c.pipe_input("c1", "Ann", 1)
        o.pipe_input("o1", "c1:pen", 2)
        o.pipe_input("o1", "c1:pen", 3)  # the same row again: joined again (no cache)
        assert out.read_key_values_to_list() == [("o1", "c1:pen/Ann"), ("o1", "c1:pen/Ann")]


def test_bad_arguments_are_clear_errors() -> None:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    orders, customers = b.table("orders"), b.table("customers")
    with pytest.raises(TopologyException, match="TableJoined and Materialized"):
        orders.join(customers, customer_of, joiner, 42)
    with pytest.raises(TopologyException, match="unexpected arguments"):
        orders.join(customers, customer_of, joiner, grace=5)
    with pytest.raises(TopologyException, match="needs a KTable"):
        orders.join(b.stream("x"), customer_of, joiner)  # type: ignore[arg-type]
    other = StreamsBuilder().table("elsewhere")
    with pytest.raises(TopologyException, match="same StreamsBuilder"):
        orders.left_join(other, customer_of, joiner)


def test_wire_formats_round_trip() -> None:
    ck = W.CombinedKeySerde(S, S)
    assert ck.deserialize(ck.serialize(W.CombinedKey("c1", "o1"))) == ("c1", "o1")
    assert ck.serialize(W.CombinedKey("c1", None)) == ck.prefix("c1")
    subs = W.SubscriptionSerde(S)
    for h in (None, W.value_hash(b"x")):
        s = W.Subscription(h, W.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, "o1", 7)
        assert subs.deserialize(subs.serialize(s)) == s
        r = W.Response(h, None, 2)
        assert W.ResponseSerde(S).deserialize(W.ResponseSerde(S).serialize(r)) == r
    assert W.ResponseSerde(S).deserialize(W.ResponseSerde(S).serialize(W.Response(None, "", 1))).foreign_value == ""


def test_result_regrouped_downstream_gets_old_values() -> None:
    """A regrouping of the join result subtracts the old result: the result table sends old
    values when asked (orders per customer name)."""
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    orders, customers = b.table("orders", "orders-store"), b.table("customers", "customers-store")
    joined = orders.join(customers, customer_of, lambda o, c: c)
    joined.group_by(lambda order, name: (name, order)).count(Materialized.as_("per-name"))
    with TopologyTestDriver(b.build()) as d:
        o, c = d.create_input_topic("orders", S, S), d.create_input_topic("customers", S, S)
        c.pipe_input("c1", "Ann", 1)
        c.pipe_input("c2", "Bob", 2)
        for i in range(3):
            o.pipe_input(f"o{i}", "c1:x", 3 + i)
        o.pipe_input("o0", "c2:x", 10)   # moves to Bob
        c.pipe_input("c1", "Ann B", 11)  # renames: o1, o2 move from Ann to Ann B
        store = d.get_key_value_store("per-name")
        assert {k: store.get(k) for k in ("Ann", "Ann B", "Bob")} == {"Ann": 0, "Ann B": 2, "Bob": 1}


def test_self_join_employee_to_manager() -> None:
    """Both sides may be one table (an employee's manager is another employee)."""
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    staff = b.table("staff", "staff-store")
    staff.left_join(staff, lambda v: v.split(">")[1] or None, lambda e, m: f"{e} reports to {m}",
                    Materialized.as_("chain"))
    with TopologyTestDriver(b.build()) as d:
        t = d.create_input_topic("staff", S, S)
        t.pipe_input("ann", "Ann>", 1)
        t.pipe_input("bob", "Bob>ann", 2)
        chain = d.get_key_value_store("chain")
        assert chain.get("bob") == "Bob>ann reports to Ann>"
        assert chain.get("ann") == "Ann> reports to None"
        t.pipe_input("ann", "Ann B>", 3)
        assert chain.get("bob") == "Bob>ann reports to Ann B>"


def test_keyword_form() -> None:
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    orders, customers = b.table("orders"), b.table("customers")
    orders.join(customers, foreign_key_extractor=customer_of, joiner=joiner,
                materialized=Materialized.as_("kw"), table_joined=TableJoined.as_("kwj"))
    with TopologyTestDriver(b.build()) as d:
        d.create_input_topic("customers", S, S).pipe_input("c1", "Ann", 1)
        d.create_input_topic("orders", S, S).pipe_input("o1", "c1:pen", 2)
        assert d.get_key_value_store("kw").get("o1") == "c1:pen/Ann"


def test_prefix_end_of_the_subscription_scan() -> None:
    from instance.topology.fk_processors import _after_prefix
    assert _after_prefix(b"\x00\x00\x00\x02ab") == b"\x00\x00\x00\x02ac"
    assert _after_prefix(b"\x00\x00\x00\x02a\xff") == b"\x00\x00\x00\x02b"
    assert _after_prefix(b"\xff\xff") is None


def test_unmaterialized_sides() -> None:
    """Either side may be computed (a filter, a map_values): its getter reads the stores above."""
    b = StreamsBuilder(default_key_serde=S, default_value_serde=S)
    orders = b.table("orders").filter(lambda k, v: not v.endswith(":skip"))
    customers = b.table("customers").map_values(str.upper)
    orders.join(customers, customer_of, joiner, Materialized.as_("j"))
    with TopologyTestDriver(b.build()) as d:
        o, c = d.create_input_topic("orders", S, S), d.create_input_topic("customers", S, S)
        c.pipe_input("c1", "ann", 1)
        o.pipe_input("o1", "c1:pen", 2)
        o.pipe_input("o2", "c1:skip", 3)
        store = d.get_key_value_store("j")
        assert (store.get("o1"), store.get("o2")) == ("c1:pen/ANN", None)
        c.pipe_input("c1", "bo", 4)
        assert store.get("o1") == "c1:pen/BO"
        o.pipe_input("o1", "c1:skip", 5)  # filtered out now: the result goes
        assert store.get("o1") is None
