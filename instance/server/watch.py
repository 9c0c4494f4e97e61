"""The Watch RPC: a store's committed changes, streamed from its changelog topic.

Every committed change of a store is a changelog record, and its offset is the store position the
read metadata and position tokens speak of. So the instance asked serves a watch itself, whoever
owns the partitions: a consumer outside any group is assigned the changelog partitions concerned
(the key's, or all of them for a prefix or every key), from the resume token's offsets or the
current end, reads them in batches (read_committed under exactly-once), and sends the matching
records, each with a token that resumes right after it. A rebalance moves tasks, not the log, so
the stream goes on through it; it reports each change of a watched partition's active owner (from
the routing table this instance already has) so subscribers know.

Caught up, the consumer lets its partitions go for a short while between reads (kernel/idle_fetch.py:
the dev broker answers idle fetches in a tight loop), by unassigning and assigning them again
at its positions: measured there, pause()/resume() left a resumed partition unfetched for 1-10 s,
while unassign()/assign() fetched again at once (0.1 s latency), at 2% of a broker core per idle
watch instead of 17% without a pause. When the call ends (deadline, cancellation,
client gone) the consumer is closed at once (the servicer's ``finally``) if the stream is not
reading at that moment, else right after the read in progress.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from instance.config import StreamsConfig
from instance.errors import BadRequest, StoreNotLoggedException, TooManyWatchesException, caller_input
from instance.runtime.kafka_streams import KafkaStreams
from instance.runtime.query.request import StorePlacement
from instance.state.origins import RESERVED_KEY
from kernel.idle_fetch import FOLLOWER_PAUSE_S, CallbackSwitch, IdleFetch
from kernel.metadata import ClusterView
from kernel.query_keys import check_query_key
from kernel.rpc import iqmesh_pb2 as pb
from kernel.serdes import Serde, value_to_json
from kernel.task_id import TaskId
from kernel.watch_token import encode_offsets, resume_offsets, watch_fingerprint

#: records per read, and the longest a read waits for them
BATCH = 1000
READ_TIMEOUT_S = 0.1
#: caught up: partitions let go this long before the next read (the latency of a quiet watch)
IDLE_S = FOLLOWER_PAUSE_S
#: open watches per instance at most: each reads on a thread of its own while it lasts
MAX_WATCHES = 8
#: how often the owners of the watched partitions are compared with the routing table
ROUTING_CHECK_S = 0.25
#: a progress token at most this often while records are read but none matches
PROGRESS_S = 2.0


def watch_consumer_config(config: StreamsConfig) -> dict[str, Any]:
    """The one configuration of a watch's consumer: no group membership, no commits, committed
    records only under exactly-once, a small fetch queue (one consumer per open watch). It reads
    changelogs as the restore consumer does, so it takes the ``restore.consumer.`` settings."""
    return config.client_config("restore.consumer", **{
        "group.id": f"{config.application_id}-watch",  # never joined: partitions are assigned
        "client.id": f"{config.instance_id}-watch",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "enable.partition.eof": False,
        "isolation.level": "read_committed" if config.eos else "read_uncommitted",
        "queued.max.messages.kbytes": 4096,
    })


@dataclass(frozen=True)
class WatchPlan:
    """A validated watch: what it matches and where each partition starts."""

    store: str
    topic: str
    sub: int
    fingerprint: str
    kind: str              # KEY | PREFIX | ALL
    key: bytes             # the key or prefix
    start: dict[int, int]  # partition -> first offset to read (-1: not resolved yet)
    key_serde: Serde
    value_serde: Serde
    with_json: bool

    def matches(self, kb: bytes | None) -> bool:
        if kb is None:
            return False
        if self.kind == "KEY":
            return kb == self.key
        return kb.startswith(self.key)  # ALL has the empty prefix


def plan_watch(streams: KafkaStreams, request: pb.WatchRequest) -> tuple[WatchPlan, dict[int, int] | None]:
    """Check ``request``: the plan (without start offsets yet) and the offsets its token resumes
    from (None: no token). Raises BadRequest (bad request or token), UnknownStateStoreException,
    StoreNotLoggedException."""
    if not request.store:
        raise BadRequest("store must be given")
    store = request.store
    if streams.is_global_store(store):
        raise StoreNotLoggedException(f"store {store!r} is a global store: it has no changelog of its own, so its "
                                      f"changes cannot be watched (read its source topic instead)")
    placement = streams.store_placement(store)  # raises for an unknown store / not started
    sub, n, spec = placement.subtopology, placement.partitions, placement.spec
    assert streams.layout is not None  # store_placement checked
    topic = streams.layout.changelogs.get(store)
    if not topic or not spec.logging_enabled:
        raise StoreNotLoggedException(f"store {store!r} has no changelog (logging disabled), so its changes "
                                      f"cannot be watched")
    target = request.WhichOneof("target")
    if target == "key" or target == "prefix":
        with caller_input():
            kb = _key_bytes(placement, getattr(request, target), target)
        kind = "KEY" if target == "key" else "PREFIX"
        partitions = [placement.partition_of(kb)] if kind == "KEY" else list(range(n))
    elif target == "all" and request.all:
        kind, kb, partitions = "ALL", b"", list(range(n))
    else:
        raise BadRequest("a watch needs a key, a prefix, or all=true")
    fingerprint = watch_fingerprint(store, kind, kb)
    with caller_input():
        resumed = resume_offsets(request.resume_token, fingerprint, partitions)
    plan = WatchPlan(store, topic, sub, fingerprint, kind, kb, dict.fromkeys(partitions, -1), spec.key_serde,
                     spec.value_serde, request.with_json)
    return plan, resumed


def _key_bytes(placement: StorePlacement, k: pb.Key, what: str) -> bytes:
    which = k.WhichOneof("kind")
    if which == "raw":
        check_query_key(k.raw, what)
        if what == "key":
            placement.key_of(raw=k.raw)  # a raw key must be a key of the store's serde
        return k.raw
    if which == "text":
        check_query_key(k.text, what)
        return placement.key_of(k.text)[1]
    raise BadRequest(f"{what}: a key needs text or raw bytes")


def start_offsets(plan: WatchPlan, resumed: dict[int, int] | None, from_beginning: bool,
                  watermarks: Callable[[str, int], tuple[int, int]]) -> dict[int, int]:
    """Where each partition starts: the token's offsets (checked against the log), else the log's
    end (or start, ``from_beginning``)."""
    start: dict[int, int] = {}
    for p in plan.start:
        low, high = watermarks(plan.topic, p)
        if resumed is None:
            start[p] = low if from_beginning else high
            continue
        at = resumed[p]
        if at > high:
            raise BadRequest(f"watch token is ahead of the changelog: partition {p} at {at}, its end is {high}")
        if at < low:
            raise BadRequest(f"watch token is too old: partition {p} at {at}, the changelog now starts at {low} "
                             f"(the changes in between were deleted)")
        start[p] = at
    return start


def owners(view: ClusterView, sub: int, partitions: list[int]) -> dict[int, tuple[str, str]]:
    """Partition -> (instance id, endpoint) of its active owner (("", "") when none is live)."""
    out: dict[int, tuple[str, str]] = {}
    for p in partitions:
        info = view.owner(TaskId(sub, p))
        out[p] = (info.instance_id, info.endpoint) if info is not None else ("", "")
    return out


class WatchStream:
    """One open watch: its consumer and the reply stream. :meth:`close` may be called from any
    thread at any time (when the call ends); reading stops and the consumer is closed."""

    def __init__(self, streams: KafkaStreams, plan: WatchPlan, consumer: Consumer,
                 on_close: Callable[[], None] = lambda: None) -> None:
        self.streams = streams
        self._on_close = on_close
        self.plan = plan
        self._consumer = consumer
        self._lock = threading.Lock()  # held while the consumer is used
        self._closed = False
        self._offsets = dict(plan.start)  # next offset to read, per partition
        self._idle = IdleFetch(CallbackSwitch(self._let_go, self._take_back), IDLE_S)
        consumer.assign(self._assigned())

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._consumer.close()
                self._on_close()

    def _token(self) -> str:
        return encode_offsets(self.plan.fingerprint, self._offsets)

    def replies(self) -> Iterator[pb.WatchReply]:
        """Header, then changes, routing events and progress until :meth:`close`."""
        try:
            yield from self._replies()
        finally:
            self.close()

    def _replies(self) -> Iterator[pb.WatchReply]:
        plan, streams = self.plan, self.streams
        partitions = sorted(plan.start)
        yield pb.WatchReply(header=pb.WatchHeader(
            store=plan.store, key_serde=plan.key_serde.name, value_serde=plan.value_serde.name,
            partitions=partitions, resume_token=self._token(), served_by=streams.instance_id))
        known = owners(streams.view, plan.sub, partitions)
        next_check = time.monotonic() + ROUTING_CHECK_S
        last_sent = time.monotonic()
        moved = False  # offsets advanced since the last token sent
        while True:
            msgs = self._read()
            if msgs is None:
                return
            changes = self._changes(msgs) if msgs else []
            if msgs:
                moved = True
            if changes:
                moved = False
                last_sent = time.monotonic()
                yield pb.WatchReply(changes=pb.WatchChanges(changes=changes))
            now = time.monotonic()
            if now >= next_check:
                next_check = now + ROUTING_CHECK_S
                current = owners(streams.view, plan.sub, partitions)
                for p in partitions:
                    if current[p][0] != known[p][0]:
                        yield pb.WatchReply(routing=pb.RoutingEvent(
                            partition=p, previous_owner=known[p][0], owner=current[p][0], endpoint=current[p][1]))
                known = current
            if moved and now - last_sent >= PROGRESS_S:
                moved = False
                last_sent = now
                yield pb.WatchReply(progress=pb.WatchProgress(resume_token=self._token()))

    def _read(self) -> list[Any] | None:
        """One batch (empty: caught up, after an idle pause); None once closed."""
        with self._lock:
            if self._closed:
                return None
            msgs = self._consumer.consume(num_messages=BATCH, timeout=READ_TIMEOUT_S)
            if msgs:
                return msgs
        self._idle.hold(time.sleep)
        return None if self._closed else []

    def _let_go(self) -> None:
        """Caught up: unassign (transaction markers leave gaps, so keep the consumer's own positions)."""
        with self._lock:
            if self._closed:
                return
            consumer = self._consumer
            for tp in consumer.position(self._assigned()):
                if tp.offset >= 0 and tp.offset > self._offsets[tp.partition]:
                    self._offsets[tp.partition] = tp.offset
            consumer.unassign()

    def _take_back(self) -> None:
        with self._lock:
            if not self._closed:
                self._consumer.assign(self._assigned())

    def _assigned(self) -> list[TopicPartition]:
        return [TopicPartition(self.plan.topic, p, o) for p, o in sorted(self._offsets.items())]

    def _changes(self, msgs: list[Any]) -> list[pb.WatchChange]:
        plan = self.plan
        out: list[pb.WatchChange] = []
        offsets = self._offsets
        for m in msgs:
            if m.error() is not None:
                continue  # transient (the consumer retries); partition EOF is off
            p, off = m.partition(), m.offset()
            offsets[p] = off + 1
            kb = m.key()
            if kb == RESERVED_KEY or not plan.matches(kb):  # a task's origin high-water: no store's key
                continue
            value = m.value()
            c = pb.WatchChange(key=kb, partition=p, offset=off, timestamp_ms=m.timestamp()[1],
                               deleted=value is None, resume_token=self._token())
            if value is not None:
                c.value = value
            if plan.with_json:
                c.key_json = value_to_json(plan.key_serde.deserialize(kb))
                c.value_json = "null" if value is None else value_to_json(plan.value_serde.deserialize(value))
            out.append(c)
        return out


class WatchService:
    """Opens watches over ``streams``: every check is done before the stream starts, so a bad
    request is a status code, never a stream that stops short."""

    def __init__(self, streams: KafkaStreams) -> None:
        self.streams = streams
        self._lock = threading.Lock()
        self._open = 0

    def open(self, request: pb.WatchRequest) -> WatchStream:
        plan, resumed = plan_watch(self.streams, request)
        with self._lock:
            if self._open >= MAX_WATCHES:
                raise TooManyWatchesException(
                    f"{self.streams.instance_id} serves {self._open} watches already (at most {MAX_WATCHES}); "
                    f"ask another instance")
            self._open += 1
        consumer = None
        try:
            consumer = Consumer(watch_consumer_config(self.streams.config))

            def watermarks(topic: str, partition: int) -> tuple[int, int]:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
                return int(low), int(high)
            plan = replace(plan, start=start_offsets(plan, resumed, request.from_beginning, watermarks))
            return WatchStream(self.streams, plan, consumer, self._closed)
        except BaseException:
            if consumer is not None:
                consumer.close()
            self._closed()
            raise

    def _closed(self) -> None:
        with self._lock:
            self._open -= 1

    @property
    def open_watches(self) -> int:
        return self._open
