"""Broker conformance: the Kafka behaviours the iqmesh streams runtime relies on.

Runs against the broker the suite starts (``IQMESH_BROKER``: the noida-db dev broker by default,
``kafka`` for Apache Kafka) or any other with ``IQMESH_BOOTSTRAP=host:port pytest tests/conformance``.
Where the dev broker departs from Apache Kafka a test pins its behaviour there (``ON_DEV_BROKER``)
and asserts Kafka's everywhere else, so each assumption of the runtime is checked on both. Real broker
only: every wait is a poll loop on a condition with a deadline.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from devtools.suite_broker import suite_engine, suite_kafka_release
from instance.runtime.broker_kind import describes_itself_as_kafka, membership_assist
from kernel.partitioner import default_partition

pytestmark = pytest.mark.integration


def _on_dev_broker() -> bool:
    """The suite's own broker is known by its engine; an external one is asked, as the runtime asks."""
    external = os.environ.get("IQMESH_BOOTSTRAP")
    if not external:
        return suite_engine() == "dev"
    return not describes_itself_as_kafka(AdminClient({"bootstrap.servers": external}))


ON_DEV_BROKER = _on_dev_broker()


def _without_consumer_protocol() -> str:
    """Why this Apache Kafka cannot run the consumer rebalance protocol (KIP-848: generally
    available from 4.0; before, a preview off by default), or "" (also on the dev broker, whose
    answer to the protocol its own tests pin). The suite's own broker is known by its release; an
    external one is asked for ``group.coordinator.rebalance.protocols``."""
    if ON_DEV_BROKER:
        return ""
    external = os.environ.get("IQMESH_BOOTSTRAP")
    if not external:
        release = suite_kafka_release()
        if release is not None and release < (4, 0):
            return ("the consumer rebalance protocol (KIP-848) needs Apache Kafka 4.0 or later; this run's "
                    f"broker is {'.'.join(map(str, release))} (IQMESH_KAFKA_VERSION)")
        return ""
    admin = AdminClient({"bootstrap.servers": external})
    try:
        node = admin.describe_cluster(request_timeout=10).result().nodes[0]
        resource = ConfigResource(ConfigResource.Type.BROKER, str(node.id))
        configs = next(iter(admin.describe_configs([resource], request_timeout=10).values())).result()
    except (KafkaException, IndexError):
        return ""  # not told: taken for a broker that has it
    entry = configs.get("group.coordinator.rebalance.protocols")
    if entry is None or "consumer" not in str(entry.value):
        return ("the consumer rebalance protocol (KIP-848) needs Apache Kafka 4.0 or later (or the "
                "protocol enabled in group.coordinator.rebalance.protocols) on the external broker")
    return ""


#: why the consumer protocol's tests skip on this broker ("" when they run)
NO_CONSUMER_PROTOCOL = _without_consumer_protocol()


def _without_streams_protocol() -> str:
    """Why this broker does not offer the streams rebalance protocol (KIP-1071: StreamsGroupHeartbeat
    from Apache Kafka 4.2), or "". An external Apache Kafka is taken for one that offers it."""
    if ON_DEV_BROKER:
        return "the dev broker does not offer the streams group protocol"
    release = suite_kafka_release()
    if release is not None and release < (4, 2):
        return ("the streams rebalance protocol (KIP-1071) needs Apache Kafka 4.2 or later; this run's broker is "
                f"{'.'.join(map(str, release))} (IQMESH_KAFKA_VERSION)")
    return ""


#: why the streams protocol's tests skip on this broker ("" when they run)
NO_STREAMS_PROTOCOL = _without_streams_protocol()
TIMEOUT = 30.0


# --------------------------------------------------------------------------------------------- helpers


def java_partition(key: bytes, num_partitions: int) -> int:
    """Java's default partition (kernel.partitioner is checked against Kafka's vectors in unit tests)."""
    return default_partition(key, num_partitions)


def create_topics(admin: AdminClient, topics: dict[str, int], config: dict[str, str] | None = None) -> None:
    futures = admin.create_topics(
        [NewTopic(name, n, 1, config=config or {}) for name, n in topics.items()], operation_timeout=10
    )
    for future in futures.values():
        future.result(timeout=TIMEOUT)

    def visible() -> bool:
        metadata = admin.list_topics(timeout=5).topics
        return all(name in metadata and len(metadata[name].partitions) == n for name, n in topics.items())

    wait_until(visible, "created topics to appear in metadata")


def wait_until(cond: Callable[[], bool], what: str, timeout: float = TIMEOUT,
               poll: Iterable[Consumer] = ()) -> float:
    """Poll ``consumers`` (drives their rebalance callbacks) until ``cond()``; return the seconds taken."""
    consumers = list(poll)
    start = time.monotonic()
    deadline = start + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}")
        if consumers:
            for c in consumers:
                c.poll(0.02)
        else:
            time.sleep(0.02)
    return time.monotonic() - start


@contextmanager
def consumers(*confs: dict[str, Any]) -> Iterator[list[Consumer]]:
    """Consumers closed promptly on exit (the dev broker answers idle fetches in a busy loop)."""
    made: list[Consumer] = []
    try:
        for conf in confs:
            made.append(Consumer(conf))
        yield made
    finally:
        for c in made:
            try:
                c.close()
            except RuntimeError:  # already closed by the test
                pass


def consumer_conf(bootstrap: str, group: str, **extra: Any) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "heartbeat.interval.ms": 500,
    }
    conf.update({k.replace("_", "."): v for k, v in extra.items()})
    return conf


def static_conf(bootstrap: str, group: str, instance: str, session_ms: int = 10000) -> dict[str, Any]:
    return consumer_conf(
        bootstrap, group,
        group_instance_id=instance,
        client_id=instance,
        partition_assignment_strategy="range",
        session_timeout_ms=session_ms,
    )


def parts(consumer: Consumer) -> set[tuple[str, int]]:
    return {(tp.topic, tp.partition) for tp in consumer.assignment()}


def covers_exactly_once(group: list[Consumer], expected: set[tuple[str, int]]) -> bool:
    assigned = [parts(c) for c in group]
    return all(assigned) and sum(map(len, assigned)) == len(expected) and set().union(*assigned) == expected


def drain(consumer: Consumer, tp: TopicPartition, end: int) -> list[bytes]:
    """Read ``tp`` from the assigned start until the consumer's position reaches ``end``."""
    values: list[bytes] = []

    def caught_up() -> bool:
        msg = consumer.poll(0.05)
        if msg is not None:
            if msg.error():
                raise KafkaException(msg.error())
            values.append(msg.value() or b"")
        return consumer.position([TopicPartition(tp.topic, tp.partition)])[0].offset >= end

    wait_until(caught_up, f"{tp.topic}[{tp.partition}] to be read up to offset {end}")
    return values


# --------------------------------------------------------------------------------------------- topics


def test_membership_assist_auto_is_on_for_the_dev_broker_only(admin: AdminClient) -> None:
    """``iqmesh.membership.assist=auto`` runs the dev broker's workarounds there and nowhere else."""
    assert membership_assist("auto", admin) is ON_DEV_BROKER
    assert membership_assist("true", admin) is True
    assert membership_assist("false", admin) is False


def test_create_compacted_topic_with_partitions(admin: AdminClient, unique: str) -> None:
    topic = f"compact-{unique}"
    create_topics(admin, {topic: 3}, {"cleanup.policy": "compact"})
    assert sorted(admin.list_topics(topic, timeout=5).topics[topic].partitions) == [0, 1, 2]

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    try:
        configs = admin.describe_configs([resource])[resource].result(timeout=TIMEOUT)
    except KafkaException as exc:
        if exc.args[0].code() in (KafkaError._UNSUPPORTED_FEATURE, KafkaError.UNSUPPORTED_VERSION):
            pytest.skip(f"broker does not support DescribeConfigs: {exc}")
        raise
    assert configs["cleanup.policy"].value == "compact"


# --------------------------------------------------------------------------------------------- partitioner


def test_murmur2_random_partitioner_matches_java(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic, n = f"murmur-{unique}", 7
    create_topics(admin, {topic: n})
    keys = [f"key-{i}".encode() for i in range(300)] + [b"21", b"foobar", b"abc", "ключ-ü".encode()]
    expected = {key: java_partition(key, n) for key in keys}
    assert len(set(expected.values())) == n  # the keys exercise every partition

    delivered: dict[bytes, int] = {}

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        assert err is None, err
        delivered[msg.key()] = msg.partition()

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    for key in keys:
        producer.produce(topic, value=b"v", key=key, on_delivery=on_delivery)
    assert producer.flush(TIMEOUT) == 0
    assert delivered == expected

    # ...and the broker stored each record in that partition.
    stored: dict[bytes, int] = {}
    with consumers(consumer_conf(bootstrap, f"g-{unique}")) as (consumer,):
        consumer.assign([TopicPartition(topic, p, 0) for p in range(n)])

        def read_all() -> bool:
            for msg in consumer.consume(500, 0.05):
                if msg.error():
                    raise KafkaException(msg.error())
                stored[msg.key() or b""] = msg.partition() or 0
            return len(stored) == len(keys)

        wait_until(read_all, "all keyed records to be read back")
    assert stored == expected


# --------------------------------------------------------------------------------------------- groups


def test_range_assignment_copartitions_static_members(
    bootstrap: str, admin: AdminClient, unique: str
) -> None:
    left, right, group = f"left-{unique}", f"right-{unique}", f"g-{unique}"
    create_topics(admin, {left: 6, right: 6})
    everything = {(t, p) for t in (left, right) for p in range(6)}
    confs = [static_conf(bootstrap, group, f"inst-{i}") for i in range(3)]
    with consumers(*confs) as group_members:
        for c in group_members:
            c.subscribe([left, right])
        took = wait_until(lambda: covers_exactly_once(group_members, everything),
                          "3 static members to share both topics", poll=group_members)
        per_member = []
        for c in group_members:
            assigned = parts(c)
            left_parts = {p for t, p in assigned if t == left}
            right_parts = {p for t, p in assigned if t == right}
            assert left_parts == right_parts, f"{c.memberid()} is not co-partitioned: {sorted(assigned)}"
            per_member.append(left_parts)
        assert sorted(len(p) for p in per_member) == [2, 2, 2]
        assert set().union(*per_member) == set(range(6))
        print(f"3-member static group with range assignment stable after {took:.2f}s")


@pytest.mark.skipif(bool(NO_CONSUMER_PROTOCOL), reason=NO_CONSUMER_PROTOCOL)
def test_consumer_protocol_moves_only_what_changes_owner(bootstrap: str, admin: AdminClient, unique: str) -> None:
    """KIP-848 (``group.protocol=consumer``, the broker's ``range`` assignor): on Apache Kafka a
    second member takes half the partitions, co-partitioned, and the first member is revoked only
    those (runtime/rebalance_protocol.py relies on both). The dev broker accepts the protocol's
    heartbeats and never assigns anything: iqmesh refuses the setting there at start-up."""
    left, right, group = f"left-{unique}", f"right-{unique}", f"g-{unique}"
    create_topics(admin, {left: 4, right: 4})
    everything = {(t, p) for t in (left, right) for p in range(4)}
    conf = {"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "consumer",
            "group.remote.assignor": "range", "enable.auto.commit": False}
    revoked: list[set[tuple[str, int]]] = []

    def on_revoke(c: Consumer, ps: list[TopicPartition]) -> None:
        revoked.append({(p.topic, p.partition) for p in ps})

    with consumers(conf, conf) as (first, second):
        first.subscribe([left, right], on_revoke=on_revoke)
        if ON_DEV_BROKER:
            deadline = time.monotonic() + 8
            while time.monotonic() < deadline:
                first.poll(0.1)
                assert not parts(first), "the dev broker now assigns under the consumer protocol"
            return
        wait_until(lambda: parts(first) == everything, "the only member to get every partition", poll=[first])
        second.subscribe([left, right])
        wait_until(lambda: covers_exactly_once([first, second], everything),
                   "two members to share both topics", poll=[first, second])
        for c in (first, second):
            assert {p for t, p in parts(c) if t == left} == {p for t, p in parts(c) if t == right}, \
                f"not co-partitioned: {sorted(parts(c))}"
        moved = [r for r in revoked if r]
        assert moved == [parts(second)], f"the first member was revoked {moved}, not just what moved"


def test_static_member_restart_keeps_partitions(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic, group = f"static-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 6})
    everything = {(topic, p) for p in range(6)}
    rebalances: list[tuple[str, str]] = []

    def subscribe(c: Consumer, name: str) -> None:
        c.subscribe([topic],
                    on_assign=lambda _c, _p: rebalances.append((name, "assign")),
                    on_revoke=lambda _c, _p: rebalances.append((name, "revoke")))

    names = ["inst-0", "inst-1", "inst-2"]
    # the closed member stays in the group until its session times out: a session far beyond the
    # test keeps it there while the test restarts it, however long that takes
    session_ms = 300_000
    with consumers(*(static_conf(bootstrap, group, n, session_ms) for n in names)) as members:
        for c, name in zip(members, names, strict=True):
            subscribe(c, name)
        wait_until(lambda: covers_exactly_once(members, everything), "static group to form", poll=members)
        before = {name: parts(c) for name, c in zip(names, members, strict=True)}
        settled = len(rebalances)

        # librdkafka does not send LeaveGroup when a static member closes: the member stays in the
        # group (until its session times out) and nobody else is rebalanced.
        members[2].close()
        described = admin.describe_consumer_groups([group])[group].result(timeout=TIMEOUT)
        assert sorted(m.group_instance_id for m in described.members) == names

        with consumers(static_conf(bootstrap, group, "inst-2", session_ms)) as (restarted,):
            subscribe(restarted, "inst-2")
            took = wait_until(lambda: bool(parts(restarted)), "restarted static member to get partitions",
                              poll=[*members[:2], restarted])
            assert parts(restarted) == before["inst-2"]
            assert {n: parts(c) for n, c in zip(names[:2], members[:2], strict=True)} == {
                n: before[n] for n in names[:2]
            }
            # Only the closing member's own revoke and the restarted member's assign happened.
            assert rebalances[settled:] == [("inst-2", "revoke"), ("inst-2", "assign")]
            print(f"static member rejoined with its partitions after {took:.2f}s")


@pytest.mark.xfail(
    ON_DEV_BROKER, strict=True,
    reason="noida-db 0.2.3 never expires group members whose session timed out (static or dynamic): "
    "the runtime removes such members itself (instance/runtime/membership.py; pinned in "
    "test_group_membership.py). Strict, so the marker must go if the broker starts expiring them",
)
def test_static_member_expires_after_session_timeout(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic, group = f"expire-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 4})
    everything = {(topic, p) for p in range(4)}
    session_ms = 6000  # Kafka's default group.min.session.timeout.ms
    confs = [static_conf(bootstrap, group, f"inst-{i}", session_ms) for i in range(2)]
    with consumers(*confs) as members:
        for c in members:
            c.subscribe([topic])
        wait_until(lambda: covers_exactly_once(members, everything), "static group to form", poll=members)
        members[1].close()  # no LeaveGroup: looks like a crash to the coordinator
        survivor = members[:1]
        # the session, then the rebalance (a generous deadline on Apache Kafka; on the dev broker,
        # which never expires a member, only how long the test looks for the expiry it pins as missing)
        wait_until(lambda: parts(survivor[0]) == everything,
                   "the survivor to take over the silent member's partitions",
                   timeout=session_ms / 1000 + (6 if ON_DEV_BROKER else 60), poll=survivor)


def test_offsets_commit_and_read_back(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic, group = f"offsets-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 2})
    offsets = [TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)]
    with consumers(consumer_conf(bootstrap, group, partition_assignment_strategy="range")) as (member,):
        member.subscribe([topic])
        wait_until(lambda: len(member.assignment()) == 2, "the member to be assigned", poll=[member])
        member.commit(offsets=offsets, asynchronous=False)
    with consumers(consumer_conf(bootstrap, group)) as (reader,):
        committed = reader.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=TIMEOUT)
    assert [(tp.partition, tp.offset, tp.error) for tp in committed] == [(0, 5, None), (1, 7, None)]


def test_describe_groups_returns_member_assignments(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic, group = f"describe-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 4})
    everything = {(topic, p) for p in range(4)}
    with consumers(*(static_conf(bootstrap, group, f"inst-{i}") for i in range(2))) as members:
        for c in members:
            c.subscribe([topic])
        wait_until(lambda: covers_exactly_once(members, everything), "group to form", poll=members)
        described = admin.describe_consumer_groups([group])[group].result(timeout=TIMEOUT)
        reported = {
            m.group_instance_id: {(tp.topic, tp.partition) for tp in m.assignment.topic_partitions}
            for m in described.members
        }
        assert reported == {f"inst-{i}": parts(c) for i, c in enumerate(members)}
        assert {m.member_id for m in described.members} == {c.memberid() for c in members}
        assert described.partition_assignor == "range"


# --------------------------------------------------------------------------------------------- transactions


def test_transactions_commit_abort_and_send_offsets(bootstrap: str, admin: AdminClient, unique: str) -> None:
    source, sink, group = f"tx-in-{unique}", f"tx-out-{unique}", f"g-{unique}"
    create_topics(admin, {source: 1, sink: 1})
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(3):
        plain.produce(source, key=b"k", value=f"in-{i}".encode())
    assert plain.flush(TIMEOUT) == 0

    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{unique}"})
    producer.init_transactions(TIMEOUT)

    producer.begin_transaction()
    for v in (b"c1", b"c2"):
        producer.produce(sink, key=b"k", value=v)
    producer.commit_transaction(TIMEOUT)

    producer.begin_transaction()
    producer.produce(sink, key=b"k", value=b"aborted")
    assert producer.flush(TIMEOUT) == 0  # really written to the log before the abort
    producer.abort_transaction(TIMEOUT)

    with consumers(consumer_conf(bootstrap, group, partition_assignment_strategy="range",
                                 isolation_level="read_committed")) as (member,):
        member.subscribe([source])
        seen = drain_subscribed(member, 3)
        assert seen == [b"in-0", b"in-1", b"in-2"]
        producer.begin_transaction()
        producer.produce(sink, key=b"k", value=b"c3")
        producer.send_offsets_to_transaction(
            member.position(member.assignment()), member.consumer_group_metadata(), TIMEOUT
        )
        producer.commit_transaction(TIMEOUT)

    out = TopicPartition(sink, 0, 0)
    with consumers(consumer_conf(bootstrap, f"r-{unique}", isolation_level="read_committed"),
                   consumer_conf(bootstrap, f"u-{unique}", isolation_level="read_uncommitted"),
                   consumer_conf(bootstrap, group)) as (committed_reader, dirty_reader, offsets_reader):
        _, end = committed_reader.get_watermark_offsets(out, timeout=TIMEOUT)
        committed_reader.assign([out])
        assert drain(committed_reader, out, end) == [b"c1", b"c2", b"c3"]
        dirty_reader.assign([out])
        assert drain(dirty_reader, out, end) == [b"c1", b"c2", b"aborted", b"c3"]
        [tp] = offsets_reader.committed([TopicPartition(source, 0)], timeout=TIMEOUT)
        assert (tp.offset, tp.error) == (3, None)


def drain_subscribed(consumer: Consumer, count: int) -> list[bytes]:
    values: list[bytes] = []

    def enough() -> bool:
        for msg in consumer.consume(count, 0.05):
            if msg.error():
                raise KafkaException(msg.error())
            values.append(msg.value() or b"")
        return len(values) >= count

    wait_until(enough, f"{count} records from the subscription")
    return values


def _commit_abort_then_read_past(bootstrap: str, admin: AdminClient, unique: str,
                                 new_producer_after_abort: bool) -> list[bytes]:
    """A producer commits, aborts, then (itself or a new producer) commits again, while a
    read_committed consumer has already read past the abort marker: what that consumer sees."""
    topic = f"tx-skip-{unique}"
    create_topics(admin, {topic: 1})
    tp = TopicPartition(topic, 0, 0)

    def producer(tid: str) -> Producer:
        p = Producer({"bootstrap.servers": bootstrap, "transactional.id": tid})
        p.init_transactions(TIMEOUT)
        return p

    def transaction(p: Producer, values: list[bytes], commit: bool) -> None:
        p.begin_transaction()
        for v in values:
            p.produce(topic, value=v, partition=0)
        assert p.flush(TIMEOUT) == 0
        (p.commit_transaction if commit else p.abort_transaction)(TIMEOUT)

    first = producer(f"tx-skip-{unique}")
    transaction(first, [b"c1", b"c2"], commit=True)
    transaction(first, [b"a1", b"a2"], commit=False)
    with consumers(consumer_conf(bootstrap, f"r-{unique}", isolation_level="read_committed")) as (reader,):
        reader.assign([tp])
        _, end = reader.get_watermark_offsets(tp, timeout=TIMEOUT)
        seen = drain(reader, tp, end)  # now positioned past the abort marker
        second = producer(f"tx-skip-{unique}-2") if new_producer_after_abort else first
        transaction(second, [b"c3", b"c4"], commit=True)
        _, end = reader.get_watermark_offsets(tp, timeout=TIMEOUT)
        return seen + drain(reader, tp, end)


@pytest.mark.xfail(
    ON_DEV_BROKER, strict=True,
    reason="noida-db 0.2.3 lists a producer's aborted transaction in every later fetch response, so "
    "librdkafka skips that producer's later batches (committed too) whenever the abort marker is not "
    "in the same response: records silently lost to read_committed readers. The runtime never lets a "
    "producer write after an abort (instance/runtime/membership.py). Strict, so the marker must go "
    "when the broker is fixed",
)
def test_read_committed_sees_commits_after_an_abort_by_the_same_producer(
        bootstrap: str, admin: AdminClient, unique: str) -> None:
    assert _commit_abort_then_read_past(bootstrap, admin, unique, new_producer_after_abort=False) \
        == [b"c1", b"c2", b"c3", b"c4"]


def test_read_committed_sees_commits_of_a_new_producer_after_an_abort(
        bootstrap: str, admin: AdminClient, unique: str) -> None:
    """What the runtime does instead: a new transactional id after every abort."""
    assert _commit_abort_then_read_past(bootstrap, admin, unique, new_producer_after_abort=True) \
        == [b"c1", b"c2", b"c3", b"c4"]


def test_list_and_fence_open_transactions_by_owner(bootstrap: str, admin: AdminClient, unique: str) -> None:
    """ListTransactions finds a dead producer's open transaction; fencing it aborts it, so the
    last stable offset moves on and read_committed readers get past it."""
    from instance.runtime.group_admin import fence_transactions, list_transactions

    topic = f"tx-fence-{unique}"
    create_topics(admin, {topic: 1})
    tp = TopicPartition(topic, 0, 0)
    dead = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"app-{unique}-inst-1-1-00c0ffee"})
    dead.init_transactions(TIMEOUT)
    dead.begin_transaction()
    dead.produce(topic, value=b"never committed", partition=0)
    assert dead.flush(TIMEOUT) == 0  # and no commit or abort: the producer "dies" here
    other = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"app-{unique}-inst-10-1-00c0ffee"})
    other.init_transactions(TIMEOUT)
    other.begin_transaction()
    other.produce(topic, value=b"other", partition=0)
    assert other.flush(TIMEOUT) == 0

    ongoing = {tid for tid, _pid, state in list_transactions(bootstrap) if unique in tid}
    assert ongoing == {f"app-{unique}-inst-1-1-00c0ffee", f"app-{unique}-inst-10-1-00c0ffee"}
    fenced = fence_transactions(bootstrap, lambda tid: tid.startswith(f"app-{unique}-inst-1-1-"))
    assert fenced == [f"app-{unique}-inst-1-1-00c0ffee"]
    assert {tid for tid, _pid, _state in list_transactions(bootstrap) if unique in tid} \
        == {f"app-{unique}-inst-10-1-00c0ffee"}
    other.commit_transaction(TIMEOUT)
    with consumers(consumer_conf(bootstrap, f"r-{unique}", isolation_level="read_committed")) as (reader,):
        reader.assign([tp])
        _, end = reader.get_watermark_offsets(tp, timeout=TIMEOUT)
        assert drain(reader, tp, end) == [b"other"]
