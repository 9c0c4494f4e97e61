"""Watch on three word-count instances (num.standby.replicas=1), at-least-once and exactly-once.

Truth is the store's changelog read independently from its start: a watch must deliver exactly
its records for the watched keys from where the watch started, in order, none twice. A key watch
sees each change; prefix and all watches, from now or from the beginning, see theirs; bad requests
get their status; a watch's consumer is gone promptly after cancellation or its deadline. Last
(it changes the cluster): while input keeps coming, the owner of the watched key stops (a routing
event arrives), the watch is resumed on another instance with its token, the stopped instance
comes back, and the instance serving the watch stops, so the client goes on elsewhere by itself.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import Consumer, TopicPartition

from instance.local.cluster import LocalCluster, produce
from instance.state.origins import RESERVED_KEY
from kernel.watch_token import WatchToken
from router.client.async_client import AsyncQueryClient
from router.client.sync_client import QueryClient
from router.client.watch_client import OWNER_CHANGED, RECONNECTED, Change, RoutingChange, Watch
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

STORE = "counts"
#: deadlines of waits on conditions (generous: each is only the upper bound of a wait)
START_S, CHANGE_S = 60.0, 60.0
#: the deadline of the watch that must end by it (long enough for it to start first on a busy machine)
EXPIRING_S = 10.0
Record = tuple[int, int, str, int | None]  # partition, offset, key, value (None: deleted)


@dataclass
class WatchCluster:
    cluster: LocalCluster
    topic: str
    bootstrap: str

    @property
    def changelog(self) -> str:
        return f"{self.cluster.application_id}-{STORE}-changelog"

    def lines(self, *lines: str) -> None:
        produce(self.bootstrap, self.topic, ((None, t.encode()) for t in lines))

    def client(self, i: int, timeout: float = 10) -> QueryClient:
        return QueryClient(self.cluster.instances[i].target, timeout=timeout)

    def records(self, match: Callable[[str], bool], start: dict[int, int] | None = None) -> list[Record]:
        """The changelog's records whose key matches, from ``start`` (partition -> offset; None:
        every partition from its beginning), in offset order per partition, partitions in order."""
        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "watch-test", "enable.auto.commit": False,
                      "isolation.level": "read_committed"})
        try:
            parts = range(6) if start is None else sorted(start)
            ends = {p: c.get_watermark_offsets(TopicPartition(self.changelog, p), timeout=10)[1] for p in parts}
            todo = {p: (0 if start is None else start[p]) for p in parts}
            todo = {p: o for p, o in todo.items() if o < ends[p]}
            c.assign([TopicPartition(self.changelog, p, o) for p, o in todo.items()])
            out: list[Record] = []
            deadline = time.monotonic() + 30
            while todo and time.monotonic() < deadline:
                msgs = c.consume(1000, 0.5)
                for m in msgs:
                    p = m.partition()
                    if m.error() is not None or m.key() == RESERVED_KEY:  # a task's origin high-water
                        continue
                    if p in todo and m.offset() < ends[p] and match(key := m.key().decode()):
                        v = m.value()
                        out.append((p, m.offset(), key, None if v is None else int.from_bytes(v, "big", signed=True)))
                if not msgs:  # transaction markers have offsets too: the consumer's position says where it is
                    for tp in c.position([TopicPartition(self.changelog, p) for p in todo]):
                        if tp.offset >= ends[tp.partition]:
                            del todo[tp.partition]
            assert not todo, f"changelog not read to its end: {todo}"
            return sorted(out)
        finally:
            c.close()


@dataclass
class Collector:
    """Iterates a watch on a thread, keeping what it yields."""

    watch: Watch
    items: list[Any] = field(default_factory=list)
    error: BaseException | None = None

    def __post_init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for item in self.watch:
                self.items.append(item)
        except BaseException as e:
            self.error = e

    @property
    def changes(self) -> list[Change]:
        return [i for i in self.items if isinstance(i, Change)]

    @property
    def routing(self) -> list[RoutingChange]:
        return [i for i in self.items if isinstance(i, RoutingChange)]

    def records(self) -> list[Record]:
        return [(c.partition, c.offset, c.key, c.value) for c in self.changes]

    def watch_state(self) -> str:
        """For a failure message: how the watch ended, or whom it tried last."""
        w = self.watch
        return (f"error: {self.error!r}; served by {w.served_by!r}; last items {self.items[-3:]}; "
                f"failures {w._watch._failures}; last error {w._watch._last_error!r}")

    def started(self) -> dict[int, int]:
        wait_until(lambda: self.watch.start_token or self.error, START_S, "the watch to start")
        assert self.error is None, self.error
        return WatchToken.decode(self.watch.start_token).offsets

    def stop(self) -> None:
        self.watch.close()
        self._thread.join(10)
        assert not self._thread.is_alive(), "the watch did not end after close()"
        assert self.error is None, self.error


@pytest.fixture(scope="module", params=["at_least_once", "exactly_once_v2"])
def wc(bootstrap: str, tmp_path_factory: pytest.TempPathFactory,
       request: pytest.FixtureRequest) -> Iterator[WatchCluster]:
    """Every test runs on an at-least-once and an exactly-once cluster (read_committed watches)."""
    unique = uuid.uuid4().hex[:10]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path_factory.mktemp("watch"), unique, 3,
                                       "num.standby.replicas=1", "commit.interval.ms=200",
                                       f"processing.guarantee={request.param}")
    cluster.start()
    try:
        cluster.wait_running(90)
        yield WatchCluster(cluster, topic, bootstrap)
    finally:
        cluster.stop()


def _per_partition_in_order(records: list[Record]) -> list[Record]:
    return sorted(records)  # stable across partitions; offsets increase within one


@pytest.mark.timeout(120)
def test_a_key_watch_delivers_every_committed_change_in_order(wc: WatchCluster) -> None:
    with wc.client(0) as q:
        col = Collector(q.watch(STORE, "watched", with_json=True))
        start = col.started()
        for i in range(1, 7):
            wc.lines("watched and other words")
            wait_until(lambda i=i: [c.value for c in col.changes][-1:] == [i], CHANGE_S,
                       f"the watch to see count {i}", wc.cluster.logs)
        col.stop()
    assert [c.value for c in col.changes] == [1, 2, 3, 4, 5, 6]
    assert [(c.key_json, c.value_json, c.deleted) for c in col.changes] == [('"watched"', str(i), False)
                                                                            for i in range(1, 7)]
    assert col.records() == wc.records(lambda k: k == "watched", start)
    assert len(start) == 1 and not col.routing

    # the CLI: from the beginning, then from the third change's token, each until --limit
    target = wc.cluster.instances[1].target
    lines = _cli("watch", "--target", target, "--store", STORE, "--key", "watched", "--from-beginning",
                 "--limit", "6")
    assert [(d["key"], d["value"], d["offset"]) for d in lines[:-1]] == [("watched", c.value, c.offset)
                                                                        for c in col.changes]
    assert lines[-1]["end"]["changes"] == 6 and lines[-1]["end"]["resume_token"] == lines[-2]["resume_token"]
    lines = _cli("watch", "--target", target, "--store", STORE, "--key", "watched", "--resume",
                 lines[2]["resume_token"], "--limit", "3")
    assert [d["value"] for d in lines[:-1]] == [4, 5, 6]


def test_the_async_client_watches_a_key_until_closed(wc: WatchCluster) -> None:
    """``AsyncQueryClient.watch``: the same changes, with ``async for``; ``close()`` ends it."""
    async def run() -> list[Any]:
        async with AsyncQueryClient(wc.cluster.instances[2].target) as q:
            watch = q.watch(STORE, "asyncwatched")
            got: list[Any] = []

            async def consume() -> None:
                async for item in watch:
                    if isinstance(item, Change):
                        got.append(item.value)
            task = asyncio.create_task(consume())

            async def until(cond: Callable[[], Any], what: str) -> None:
                deadline = time.monotonic() + CHANGE_S
                while not cond():
                    assert time.monotonic() < deadline, f"timed out waiting for {what}\n{wc.cluster.logs()}"
                    await asyncio.sleep(0.05)
            await until(lambda: watch.start_token, "the async watch to start")
            for i in range(1, 4):
                wc.lines("asyncwatched")
                await until(lambda i=i: got[-1:] == [i], f"the async watch to see count {i}")
            watch.close()
            await asyncio.wait_for(task, 10)
            return got
    assert asyncio.run(run()) == [1, 2, 3]


@pytest.mark.timeout(300)
def test_prefix_and_all_watches_from_now_and_from_the_beginning(wc: WatchCluster) -> None:
    def pfx(k: str) -> bool:
        return k.startswith("pfx")
    with wc.client(1) as q:
        wc.lines("pfxold")
        wait_until(lambda: wc.records(lambda k: k == "pfxold"), CHANGE_S, "pfxold in the changelog")
        prefix = Collector(q.watch(STORE, prefix="pfx"))
        everything = Collector(q.watch(STORE, all_keys=True))
        p_start, a_start = prefix.started(), everything.started()
        assert sorted(p_start) == sorted(a_start) == list(range(6))
        wc.lines("pfxa pfxb zzq", "pfxa zzr", "pfxc pfxa")
        wait_until(lambda: {(c.key, c.value) for c in prefix.changes} >= {("pfxa", 3), ("pfxb", 1), ("pfxc", 1)},
                   CHANGE_S, "the prefix watch to see the last counts", wc.cluster.logs)
        # every key's last count: each partition's changes reach a watch on their own (a CI run stopped
        # this watch after pfxa's last count, before pfxc's, which is on another partition)
        last = {("pfxa", 3), ("pfxb", 1), ("pfxc", 1), ("zzq", 1), ("zzr", 1)}
        wait_until(lambda: {(c.key, c.value) for c in everything.changes} >= last,
                   CHANGE_S, "the all watch to see the last counts", wc.cluster.logs)
        prefix.stop()
        everything.stop()
        assert _per_partition_in_order(prefix.records()) == wc.records(pfx, p_start)
        assert not any(k == "pfxold" for _, _, k, _ in prefix.records())
        assert _per_partition_in_order(everything.records()) == wc.records(lambda k: True, a_start)

        # from the beginning: everything the changelog holds, then live. Followed until it has
        # both (no deadline of its own, which a busy machine could reach before the replay ends);
        # that a deadline ends a watch is test_cancelled_and_expired_watches_close_their_consumer's
        replay = Collector(q.watch(STORE, prefix="pfx", from_beginning=True))
        replay.started()
        history = wc.records(pfx)
        wait_until(lambda: _per_partition_in_order(replay.records()) == history, CHANGE_S,
                   "the replay of every pfx change the changelog held", wc.cluster.logs)
        assert ("pfxold", 1) in {(k, v) for _, _, k, v in history}
        wc.lines("pfxlive")
        wait_until(lambda: ("pfxlive", 1) in {(c.key, c.value) for c in replay.changes}, CHANGE_S,
                   "the replay to go on live", wc.cluster.logs)
        replay.stop()
        assert _per_partition_in_order(replay.records()) == wc.records(pfx)


def test_bad_watches_get_their_status(wc: WatchCluster) -> None:
    def code(fn: Callable[[], Any]) -> grpc.StatusCode:
        with pytest.raises(grpc.RpcError) as e:
            fn()
        return e.value.code()  # type: ignore[no-any-return]

    with wc.client(0) as q:
        assert code(lambda: list(q.watch("nope", all_keys=True))) is grpc.StatusCode.NOT_FOUND
        invalid = grpc.StatusCode.INVALID_ARGUMENT
        assert code(lambda: list(q.watch(STORE, all_keys=True, resume_token="garbage"))) is invalid
        started = Collector(q.watch(STORE, "some-key"))  # no deadline: it must start to give a token
        started.started()
        started.stop()
        other = started.watch.resume_token
        assert other
        assert code(lambda: list(q.watch(STORE, "another-key", resume_token=other))) is invalid
        assert code(lambda: list(q.watch(STORE, b"\xff\xfe"))) is invalid  # not a string key
        stub = q._pool.stub(wc.cluster.instances[0].target)
        assert code(lambda: list(stub.Watch(_request(STORE), timeout=5))) is invalid  # nothing to watch
        # a token of this watch, but ahead of the log
        ahead = WatchToken(WatchToken.decode(other).watch,
                           {p: o + 10**6 for p, o in WatchToken.decode(other).offsets.items()}).encode()
        assert code(lambda: list(q.watch(STORE, "some-key", resume_token=ahead))) is invalid


def _cli(*args: str) -> list[dict[str, Any]]:
    """``iqmesh ARGS``: its JSON lines."""
    out = subprocess.run([sys.executable, "-m", "iqmesh", *args], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def _request(store: str) -> Any:
    from kernel.rpc import iqmesh_pb2 as pb
    return pb.WatchRequest(store=store)


def _kafka_threads(pid: int) -> int:
    """librdkafka's threads in process ``pid`` (each client has a few, named rdk:...)."""
    n = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            n += (task / "comm").read_text().startswith("rdk:")
        except OSError:
            pass  # the thread ended meanwhile
    return n


@pytest.mark.timeout(240)
def test_cancelled_and_expired_watches_close_their_consumer(wc: WatchCluster) -> None:
    proc = wc.cluster.instances[2].proc
    assert proc is not None
    with wc.client(2) as q:
        # the baseline once no watch holds a consumer here: one that ended (a watch of an earlier
        # test, or this short one) closes its consumer from the call's done callback, so the count
        # goes back to at most what it was before this watch
        before = _kafka_threads(proc.pid)
        list(q.watch(STORE, "x", timeout=0.5))
        wait_until(lambda: _kafka_threads(proc.pid) <= before, 30,
                   f"the short watch's consumer to close ({before} librdkafka threads before it)")
        base = _kafka_threads(proc.pid)
        # held open until this test closes them
        cancelled = [Collector(q.watch(STORE, all_keys=True)) for _ in range(2)]
        for c in cancelled:
            c.started()
        ended: dict[str, Any] = {}

        def follow(watch: Watch) -> None:
            try:
                list(watch)
            except BaseException as e:
                ended["error"] = e
            finally:
                ended["after"] = time.monotonic() - t0
        t0 = time.monotonic()  # before the watch: its deadline counts from its creation
        expiring = q.watch(STORE, prefix="a", timeout=EXPIRING_S)
        done = threading.Thread(target=follow, args=(expiring,), daemon=True)
        done.start()
        wait_until(lambda: expiring.start_token or ended, EXPIRING_S, "the expiring watch to start")
        assert expiring.start_token, f"the expiring watch ended before it started: {ended}"
        opened = _kafka_threads(proc.pid)
        assert opened >= base + 3, (base, opened)  # the two cancelled watches' consumers at least
        for c in cancelled:
            c.stop()
        done.join(EXPIRING_S + 60)
        assert not done.is_alive(), "the deadline did not end the watch"
        # nothing else ends a watch without an error (a server ending its call is reconnected),
        # and it did not end before its deadline
        assert "error" not in ended, ended["error"]
        assert ended["after"] >= EXPIRING_S - 0.05, ended
        wait_until(lambda: _kafka_threads(proc.pid) <= base, 30,
                   f"the watches' consumers to close ({base} librdkafka threads before, {opened} open)")


@pytest.mark.timeout(420)
def test_a_watch_goes_on_through_rebalances_and_resumes_without_gaps(wc: WatchCluster) -> None:
    cluster = wc.cluster
    ids = [i.instance_id for i in cluster.instances]
    key = "moving"
    with wc.client(0) as q0:
        owner = q0.get(STORE, key).metadata["served_by"]
    o = ids.index(owner)
    a, b = [i for i in range(3) if i != o]

    produced = 0
    stop_producing = threading.Event()

    def producer() -> None:
        nonlocal produced
        while not stop_producing.is_set():
            wc.lines(f"{key} filler")
            produced += 1
            time.sleep(0.05)
    feeder = threading.Thread(target=producer, daemon=True)

    with wc.client(a) as qa, wc.client(b) as qb:
        first = Collector(qa.watch(STORE, key))
        start = first.started()
        (partition,) = start
        feeder.start()
        try:
            wait_until(lambda: len(first.changes) >= 5, 30, "changes before the rebalance", cluster.logs)
            # 1. the owner of the watched key leaves: the stream goes on and says so
            cluster.signal(o, signal.SIGTERM)
            cluster.wait_exit(o, 60)
            wait_until(lambda: any(r.reason == OWNER_CHANGED and r.partition == partition
                                   and r.previous_owner == owner for r in first.routing),
                       60, "a routing event for the watched partition", cluster.logs)
            cluster.wait_running(90, expected=2)
            seen = len(first.changes)
            wait_until(lambda: len(first.changes) > seen + 3, 30, "changes after the rebalance", cluster.logs)
            # 2. the subscriber stops and resumes on another instance with its token
            first.stop()
            second = Collector(qb.watch(STORE, key, resume_token=first.watch.resume_token))
            # 3. the instance comes back (another rebalance)
            cluster.start([o])
            cluster.wait_running(90, expected=3)
            seen = len(second.changes)
            wait_until(lambda: len(second.changes) > seen + 3, 30, "changes after the instance returned",
                       cluster.logs)
            # 4. the instance serving the watch stops: the client goes on through another one
            served = second.watch.served_by
            assert served == ids[b]
            cluster.signal(b, signal.SIGTERM)
            cluster.wait_exit(b, 60)
            wait_until(lambda: second.error is not None or any(r.reason == RECONNECTED for r in second.routing), 60,
                       "the client to go on through another instance",
                       lambda: f"{second.watch_state()}\n{cluster.logs()}")
            assert second.error is None, second.watch_state()
            assert second.watch.served_by != served
            seen = len(second.changes)
            wait_until(lambda: len(second.changes) > seen + 3, 30, "changes after reconnecting", cluster.logs)
        finally:
            stop_producing.set()
            feeder.join(30)

        with wc.client(a) as qa2:
            def caught_up() -> bool:
                try:
                    current = qa2.get(STORE, key).value
                except grpc.RpcError:
                    return False  # mid-rebalance
                truth = wc.records(lambda k: k == key, start)
                # every line counted (the store may run ahead of the last commit until then)
                return (current is not None and current >= produced and bool(truth)
                        and truth[-1][3] == current and second.records()[-1:] == truth[-1:])
            wait_until(caught_up, 90, "every line counted and the watch to see the last committed change",
                       cluster.logs)
        second.stop()

    truth = wc.records(lambda k: k == key, start)
    got = first.records() + second.records()
    assert got == truth, "changes missed or repeated"
    values = [v for _, _, _, v in got]
    assert values[-1] is not None and values[-1] >= produced  # never fewer (at-least-once: maybe more)
    print(f"\nwatched {len(got)} changes of {produced} input lines; routing: {first.routing + second.routing}")
