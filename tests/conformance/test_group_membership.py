"""Broker conformance: what the broker does when a group member or a transactional producer dies.

Members that die really die: each runs in a child process (``python -c``) and is killed with
SIGKILL; survivors run in this process. On the dev broker (noida-db) the tests pin its behaviour;
on Apache Kafka (``IQMESH_BROKER=kafka``, or ``IQMESH_BOOTSTRAP``) they assert Kafka's. Every wait is
a poll loop with a deadline, and the seconds measured are printed (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from instance.runtime.group_admin import GroupMember, describe_group_members, fence_transactional_id, remove_members
from tests.conformance.test_broker import (
    ON_DEV_BROKER,
    consumers,
    covers_exactly_once,
    create_topics,
    parts,
    wait_until,
)

pytestmark = pytest.mark.integration

SESSION_MS = 6000  # the dev broker rejects anything lower (Kafka's group.min.session.timeout.ms)
SESSION_S = SESSION_MS / 1000
#: a deadline for what follows an event at once (a rebalance, a read): generous, only an upper bound
SETTLE_S = 60.0
#: session and rebalance timeout of a member a test keeps in the group, dead or unpolled, while it
#: looks (Apache Kafka would otherwise drop it after SESSION_S, whatever the test was doing by then)
HELD_MS = 300_000

# A group member in a child process: prints one JSON line per rebalance callback, polls until killed
# (or until its parent is gone).
CONSUMER_SCRIPT = """
import json, os, sys
from confluent_kafka import Consumer
parent = os.getppid()
c = Consumer(json.loads(sys.argv[1]))
def out(event, ps):
    print(json.dumps({"event": event, "member": c.memberid(),
                      "parts": sorted([tp.topic, tp.partition] for tp in ps)}), flush=True)
c.subscribe(json.loads(sys.argv[2]), on_assign=lambda _c, ps: out("assign", ps),
            on_revoke=lambda _c, ps: out("revoke", ps), on_lost=lambda _c, ps: out("lost", ps))
while os.getppid() == parent:
    c.poll(0.1)
"""

# A transactional producer in a child process: begins a transaction, writes, flushes, reports, and
# blocks (the transaction stays open) until it is killed or its parent goes away.
TXN_PRODUCER_SCRIPT = """
import json, sys
from confluent_kafka import Producer
conf, topic, partition, n = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
p = Producer(conf)
p.init_transactions(30)
p.begin_transaction()
for i in range(n):
    p.produce(topic, value=f"open-{i}".encode(), partition=partition)
assert p.flush(30) == 0
print(json.dumps({"event": "produced"}), flush=True)
sys.stdin.read()
"""


# --------------------------------------------------------------------------------------------- helpers


class Child:
    """A child process whose stdout is a stream of JSON events."""

    def __init__(self, script: str, *args: str) -> None:
        self.proc = subprocess.Popen([sys.executable, "-c", script, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.events: list[dict[str, Any]] = []
        self.stderr: list[str] = []
        self._readers = [threading.Thread(target=self._read_events, daemon=True),
                         threading.Thread(target=self._read_stderr, daemon=True)]
        for t in self._readers:
            t.start()

    def _read_events(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.append(json.loads(line))

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip())

    def wait_event(self, pred: Callable[[dict[str, Any]], bool], what: str, timeout: float = SETTLE_S,
                   poll: Iterable[Consumer] = ()) -> dict[str, Any]:
        def seen() -> bool:
            if self.proc.poll() is not None and not any(pred(e) for e in self.events):
                pytest.fail(f"child exited ({self.proc.returncode}) before {what}:\n" + "\n".join(self.stderr[-20:]))
            return any(pred(e) for e in self.events)

        wait_until(seen, what, timeout, poll)
        return next(e for e in reversed(self.events) if pred(e))

    def kill(self) -> None:
        """SIGKILL: no LeaveGroup, no abort, nothing flushed."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def close(self) -> None:
        self.kill()
        for t in self._readers:
            t.join(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@contextmanager
def children() -> Iterator[list[Child]]:
    made: list[Child] = []
    try:
        yield made
    finally:
        for child in made:
            child.close()


def member_conf(bootstrap: str, group: str, instance: str | None = None, session_ms: int = SESSION_MS,
                max_poll_ms: int = 20000) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "partition.assignment.strategy": "range",
        "session.timeout.ms": session_ms,
        "heartbeat.interval.ms": 500,
        "max.poll.interval.ms": max_poll_ms,  # also the rebalance timeout
    }
    if instance is not None:
        conf["group.instance.id"] = instance
        conf["client.id"] = instance
    return conf


def spawn_member(made: list[Child], bootstrap: str, group: str, topic: str,
                 instance: str | None = None, held: bool = False) -> Child:
    """A member in a child process; ``held``: its session and rebalance timeouts are HELD_MS, so
    once killed it stays in the group until the test removes it."""
    conf = member_conf(bootstrap, group, instance, *((HELD_MS, HELD_MS) if held else ()))
    child = Child(CONSUMER_SCRIPT, json.dumps(conf), json.dumps([topic]))
    made.append(child)
    return child


def assigned(child: Child) -> set[tuple[str, int]]:
    """The child's partitions according to its last rebalance callback."""
    last = next((e for e in reversed(child.events) if e["event"] in ("assign", "revoke", "lost")), None)
    return {(t, p) for t, p in last["parts"]} if last and last["event"] == "assign" else set()


def track(consumer: Consumer, topic: str, log: list[str]) -> None:
    consumer.subscribe([topic], on_assign=lambda _c, _p: log.append("assign"),
                       on_revoke=lambda _c, _p: log.append("revoke"), on_lost=lambda _c, _p: log.append("lost"))


def poll_for(seconds: float, polled: Iterable[Consumer], stop: Callable[[], bool] = lambda: False) -> float:
    """Poll ``polled`` for ``seconds`` or until ``stop()``; return the seconds elapsed."""
    members = list(polled)
    start = time.monotonic()
    while time.monotonic() - start < seconds and not stop():
        for c in members:
            c.poll(0.05)
    return time.monotonic() - start


def group_state(admin: AdminClient, group: str) -> ConsumerGroupState:
    return admin.describe_consumer_groups([group])[group].result(timeout=10).state


# --------------------------------------------------------------------------------------------- groups


def test_killed_member_is_not_evicted_and_starts_no_rebalance(bootstrap: str, admin: AdminClient,
                                                              unique: str) -> None:
    topic, group = f"kill-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 4})
    everything = {(topic, p) for p in range(4)}
    log: list[str] = []
    with consumers(member_conf(bootstrap, group)) as (survivor,), children() as made:
        track(survivor, topic, log)
        wait_until(lambda: parts(survivor) == everything, "the first member to get everything", poll=[survivor])
        dying = spawn_member(made, bootstrap, group, topic)
        wait_until(lambda: len(parts(survivor)) == 2 and parts(survivor) | assigned(dying) == everything,
                   "the child member to get its half", poll=[survivor])
        dead_id = dying.events[-1]["member"]
        kept = parts(survivor)
        log.clear()
        dying.kill()
        if ON_DEV_BROKER:
            waited = poll_for(SESSION_S + 4, [survivor])
            listed = {m.member_id for m in describe_group_members(bootstrap, group)}
            assert dead_id in listed, f"the dead member was evicted: {listed}"
            assert log == [] and parts(survivor) == kept, f"a kill started a rebalance: {log}"
            print(f"\nkill -9: dead dynamic member still listed {waited:.1f}s after the kill "
                  f"(session {SESSION_S:.0f}s); survivor kept {sorted(kept)} with no revoke")
        else:
            took = wait_until(lambda: parts(survivor) == everything, "the survivor to take over",
                              SESSION_S + SETTLE_S, poll=[survivor])
            assert dead_id not in {m.member_id for m in describe_group_members(bootstrap, group)}
            assert log[:2] == ["revoke", "assign"]
            print(f"\nkill -9: dead member evicted, survivor owns everything {took:.1f}s after the kill")
        # removing a member that is not in the group names the error, it does not raise
        ghost = GroupMember("no-such-member", "ghost", None, "/127.0.0.1")
        assert remove_members(bootstrap, group, [ghost]) == {"no-such-member": "UNKNOWN_MEMBER_ID"}


def test_dead_leader_blocks_every_later_join(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic, group = f"leader-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 4})
    everything = {(topic, p) for p in range(4)}
    with children() as made, consumers(member_conf(bootstrap, group), member_conf(bootstrap, group)) as (
            follower, newcomer):
        leader = spawn_member(made, bootstrap, group, topic)  # first to join: leads the group
        leader.wait_event(lambda e: e["event"] == "assign" and len(e["parts"]) == 4, "the leader to get everything")
        follower.subscribe([topic])
        wait_until(lambda: len(parts(follower)) == 2 and parts(follower) | assigned(leader) == everything,
                   "the follower to get its half", poll=[follower])
        dead_id = leader.events[-1]["member"]
        leader.kill()
        newcomer.subscribe([topic])
        if ON_DEV_BROKER:
            waited = poll_for(15, [follower, newcomer], stop=lambda: bool(parts(newcomer)))
            assert not parts(newcomer), f"the newcomer got {sorted(parts(newcomer))} with the leader dead"
            # the join started a rebalance: the follower gives its partitions up and gets none back
            # (the rebalance cannot complete: the newcomer has nothing all along)
            wait_until(lambda: not parts(follower), "the follower to give its partitions up", SETTLE_S,
                       poll=[follower, newcomer])
            assert not parts(newcomer), f"the newcomer got {sorted(parts(newcomer))} with the leader dead"
            print(f"\ndead leader: a new member's join did not complete in {waited:.1f}s; "
                  "the follower's partitions were revoked and not given back")
            dead = [m for m in describe_group_members(bootstrap, group) if m.member_id == dead_id]
            assert remove_members(bootstrap, group, dead) == {dead_id: "NONE"}
            took = wait_until(lambda: covers_exactly_once([follower, newcomer], everything),
                              "the group to recover once the dead leader is removed", SETTLE_S,
                              poll=[follower, newcomer])
            print(f"...removing the dead leader after that recovered the group in {took:.2f}s")
        else:
            took = wait_until(lambda: covers_exactly_once([follower, newcomer], everything),
                              "the group to rebalance without the dead leader", SESSION_S + SETTLE_S,
                              poll=[follower, newcomer])
            print(f"\ndead leader: evicted, new member assigned {took:.1f}s after the kill")


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("dead_leads", [True, False], ids=["dead-leader", "dead-follower"])
def test_remove_members_recovers_the_group(bootstrap: str, admin: AdminClient, unique: str,
                                           dead_leads: bool, static: bool) -> None:
    topic, group = f"remove-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 4})
    everything = {(topic, p) for p in range(4)}
    names = iter(["inst-a", "inst-b", "inst-c"] if static else [None, None, None])
    with children() as made:
        dying_name, live_name, new_name = next(names), next(names), next(names)
        with consumers(member_conf(bootstrap, group, live_name), member_conf(bootstrap, group, new_name)) as (
                live, newcomer):
            # the dying member's session and rebalance timeouts are HELD_MS: dead, it stays in the
            # group until the test removes it, on Apache Kafka too, however long the test takes
            if dead_leads:
                dying = spawn_member(made, bootstrap, group, topic, dying_name, held=True)
                dying.wait_event(lambda e: e["event"] == "assign" and len(e["parts"]) == 4, "the leader's assignment")
                live.subscribe([topic])
            else:
                live.subscribe([topic])
                wait_until(lambda: parts(live) == everything, "the leader's assignment", poll=[live])
                dying = spawn_member(made, bootstrap, group, topic, dying_name, held=True)
            wait_until(lambda: len(parts(live)) == 2 and parts(live) | assigned(dying) == everything,
                       "two members to share the topic", poll=[live])
            dead_id = dying.events[-1]["member"]
            dying.kill()
            survivors = [live]
            if dead_leads:  # a join that cannot complete while the dead leader is in the group
                newcomer.subscribe([topic])
                survivors.append(newcomer)
                poll_for(1.0, survivors)
            assert not covers_exactly_once(survivors, everything)  # the dead member's partitions wait
            dead = [m for m in describe_group_members(bootstrap, group) if m.member_id == dead_id]
            assert len(dead) == 1 and dead[0].group_instance_id == dying_name
            start = time.monotonic()
            result = remove_members(bootstrap, group, dead)
            sent = time.monotonic() - start
            assert result == {dead_id: "NONE"}
            took = wait_until(lambda: covers_exactly_once(survivors, everything),
                              "the survivors to own every partition", SETTLE_S, poll=survivors)
            assert dead_id not in {m.member_id for m in describe_group_members(bootstrap, group)}
            print(f"\nremove_members ({'static' if static else 'dynamic'} "
                  f"{'leader' if dead_leads else 'follower'}): answered in {sent:.2f}s, "
                  f"survivors own every partition {took:.2f}s later")


def txn_commit(producer: Producer, offsets: list[TopicPartition], metadata: Any) -> KafkaError | None:
    """One transaction carrying ``offsets`` for the group in ``metadata``; the error if it failed."""
    producer.begin_transaction()
    try:
        producer.send_offsets_to_transaction(offsets, metadata, 10)
        producer.commit_transaction(10)
        return None
    except KafkaException as e:
        producer.abort_transaction(10)
        return e.args[0]


def test_offset_commit_once_a_rebalance_started(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic, group = f"commit-{unique}", f"g-{unique}"
    create_topics(admin, {topic: 2})
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"commit-{unique}"})
    producer.init_transactions(30)
    # the member is not polled while the test looks at the rebalance it holds open: its rebalance
    # timeout (max.poll.interval.ms) is HELD_MS, so neither it nor the broker gives the round up first
    conf = member_conf(bootstrap, group, max_poll_ms=HELD_MS)
    with consumers(conf, conf) as (member, joiner):
        member.subscribe([topic])
        wait_until(lambda: len(parts(member)) == 2, "the first member's assignment", poll=[member])
        member.commit(offsets=[TopicPartition(topic, 0, 0)], asynchronous=False)  # stable group: accepted
        joiner.subscribe([topic])
        # only the joiner is polled: the member keeps its generation and does not rejoin yet
        wait_until(lambda: group_state(admin, group) == ConsumerGroupState.PREPARING_REBALANCING,
                   "the joiner to start a rebalance", poll=[joiner])
        error: KafkaError | None = None
        try:
            member.commit(offsets=[TopicPartition(topic, 1, 0)], asynchronous=False)
        except KafkaException as e:
            error = e.args[0]
        # the same offsets in a transaction (TxnOffsetCommit, how exactly_once_v2 commits)
        stale = member.consumer_group_metadata()
        txn_error = txn_commit(producer, [TopicPartition(topic, 1, 0)], stale)
        assert txn_error is None, f"transactional offset commit refused while preparing a rebalance: {txn_error}"
        if ON_DEV_BROKER:
            assert error is not None and error.code() == KafkaError.ILLEGAL_GENERATION, error
            print(f"\ncommit from the current generation while preparing a rebalance: refused, "
                  f"{error.name()} ({error.code()}); the same offsets in a transaction: accepted")
        else:
            assert error is None, f"Apache Kafka accepts current-generation commits while preparing: {error}"
        wait_until(lambda: covers_exactly_once([member, joiner], {(topic, 0), (topic, 1)}),
                   "the rebalance to complete", poll=[member, joiner])
        # a zombie's transactional commit from the previous generation (KIP-447 fences it on Kafka)
        stale_error = txn_commit(producer, [TopicPartition(topic, 1, 0)], stale)
        if ON_DEV_BROKER:
            assert stale_error is None, stale_error
            print("transactional offset commit from the previous generation after the rebalance: accepted "
                  "(no generation fencing)")
        else:
            assert stale_error is not None and stale_error.code() == KafkaError.ILLEGAL_GENERATION, stale_error


# --------------------------------------------------------------------------------------------- transactions


def test_zombie_transaction_pins_the_last_stable_offset(bootstrap: str, admin: AdminClient, unique: str) -> None:
    """Three producers die with a transaction open: partition 0's and 1's with a transaction
    timeout far beyond the test (HELD_MS: open for as long as the test looks at them, whatever the
    machine's speed), partition 1's then fenced by a new producer with its transactional.id, and
    partition 2's (transaction.timeout.ms=10000) left to time out."""
    topic = f"zombie-{unique}"
    create_topics(admin, {topic: 3})
    plain = Producer({"bootstrap.servers": bootstrap})
    for p in (0, 1, 2):
        for i in range(3):
            plain.produce(topic, value=f"before-{i}".encode(), partition=p)
    assert plain.flush(30) == 0
    timeouts = {0: HELD_MS, 1: HELD_MS, 2: 10_000}
    txn_ids = {p: f"zombie-{unique}-{p}" for p in (0, 1, 2)}
    with children() as made:
        for p in (0, 1, 2):
            conf = {"bootstrap.servers": bootstrap, "transactional.id": txn_ids[p],
                    "transaction.timeout.ms": timeouts[p]}
            made.append(Child(TXN_PRODUCER_SCRIPT, json.dumps(conf), topic, str(p), "5"))
        for child in made:
            child.wait_event(lambda e: e["event"] == "produced", "the transactional producer to write")
        opened = time.monotonic()
        for child in made:
            child.kill()
    for p in (0, 1, 2):
        for i in range(2):
            plain.produce(topic, value=f"after-{i}".encode(), partition=p)
    assert plain.flush(30) == 0
    # offsets: 0-2 committed, 3-7 the open transaction, 8-9 committed after it

    def reader_conf(level: str) -> dict[str, Any]:
        return {"bootstrap.servers": bootstrap, "group.id": f"r-{unique}", "isolation.level": level,
                "enable.auto.commit": False, "enable.partition.eof": False}

    with consumers(reader_conf("read_committed"), reader_conf("read_uncommitted")) as (committed, uncommitted):
        tp0 = TopicPartition(topic, 0)
        high_uncommitted = uncommitted.get_watermark_offsets(tp0, timeout=10)[1]
        high_committed = committed.get_watermark_offsets(tp0, timeout=10)[1]
        assert high_uncommitted == 10
        print(f"\nopen transaction at offsets 3-7 of 10: get_watermark_offsets() high = {high_committed} "
              f"(read_committed), {high_uncommitted} (read_uncommitted)")
        # a read_committed consumer's end offset is the last stable offset (ListOffsets with
        # isolation level READ_COMMITTED), on the dev broker as on Apache Kafka
        assert high_committed == 3

        committed.assign([TopicPartition(topic, p, 0) for p in (0, 1, 2)])
        fence_at = time.monotonic()
        fence_transactional_id(bootstrap, txn_ids[1])
        fenced_in = time.monotonic() - fence_at

        by_part: dict[int, list[bytes]] = {0: [], 1: [], 2: []}

        def read_until(seconds: float, done: Callable[[], bool]) -> float:
            start = time.monotonic()
            while time.monotonic() - start < seconds and not done():
                for msg in committed.consume(100, 0.05):
                    if msg.error():
                        raise KafkaException(msg.error())
                    by_part[msg.partition() or 0].append(msg.value() or b"")
            return time.monotonic() - start

        expected = [b"before-0", b"before-1", b"before-2", b"after-0", b"after-1"]
        took = read_until(SETTLE_S, lambda: by_part[1] == expected)
        assert by_part[1] == expected, f"fencing did not unblock the partition: {by_part[1]}"
        print(f"fence_transactional_id took {fenced_in:.2f}s; the fenced partition was readable past the "
              f"aborted transaction {took + fenced_in:.2f}s after fencing started")
        cached = committed.get_watermark_offsets(tp0, cached=True)[1]
        position = committed.position([tp0])[0].offset
        assert (by_part[0], position) == (expected[:3], 3)  # stuck at the last stable offset
        print(f"read_committed consumer on the open transaction's partition: position {position}, "
              f"get_watermark_offsets(cached=True) high = {cached}")
        if ON_DEV_BROKER:
            # the cached value comes from fetch responses: the high watermark, not the last stable offset
            assert cached == 10

        # transaction.timeout.ms=10s: Apache Kafka aborts it within timeout + its 10 s abort-check
        # interval (a deadline for the reader on top); the dev broker is watched for 8 s past it
        limit = timeouts[2] / 1000 + (8 if ON_DEV_BROKER else 10 + SETTLE_S)
        read_until(max(0.0, limit - (time.monotonic() - opened)), lambda: by_part[2] == expected)
        waited = time.monotonic() - opened
        if ON_DEV_BROKER:
            assert by_part[2] == expected[:3], f"the dev broker aborted the timed-out transaction: {by_part[2]}"
            print(f"the dev broker did not abort a transaction past transaction.timeout.ms: read_committed "
                  f"still stuck at offset 3 after {waited:.1f}s")
            fence_transactional_id(bootstrap, txn_ids[2])
            took = read_until(SETTLE_S, lambda: by_part[2] == expected)
            assert by_part[2] == expected
            print(f"...and fencing its transactional.id unblocked it in {took:.2f}s")
        else:
            assert by_part[2] == expected, f"timed-out transaction not aborted after {waited:.1f}s: {by_part[2]}"
            print(f"the timed-out transaction was aborted; readable after {waited:.1f}s")
        # partition 0's transaction was only held open for the test: ended, not left to its timeout
        fence_transactional_id(bootstrap, txn_ids[0])
