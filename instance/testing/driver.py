"""TopologyTestDriver: run a whole topology in-process, no broker.

Every sub-topology runs as one task on partition 0 with in-memory stores; records written to a
topic another sub-topology reads (repartition topics) are fed to it before ``pipe_input`` returns.
As in Kafka Streams' driver, each piped record is followed by a commit, so caches flush and
downstream sees every update.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from instance.config import StreamsConfig
from instance.errors import ProductionException, StreamsException
from instance.runtime.global_state import GlobalStateManager
from instance.runtime.metrics import MetricName
from instance.runtime.state_manager import ProcessorStateManager
from instance.runtime.task import StreamTask
from instance.state.change import ValueAndTimestamp
from instance.state.kv_store import KeyValueStore
from instance.state.session_store import SessionStore
from instance.state.window_store import WindowStore
from instance.topology.handlers import ErrorHandling
from instance.topology.processor import Headers
from instance.topology.timestamps import timestamp_extractor
from instance.topology.topology import Topology
from kernel.serdes import BytesSerde, Serde
from kernel.task_id import TaskId


class TimestampedKeyValueStoreView:
    """``get`` / ``all`` of a timestamped store with ``ValueAndTimestamp`` values."""

    def __init__(self, store: KeyValueStore) -> None:
        self.name = store.name
        self._store = store

    def get(self, key: Any) -> ValueAndTimestamp | None:
        return self._store.get_with_timestamp(key)

    def all(self) -> list[tuple[Any, ValueAndTimestamp]]:
        s = self._store
        return [(k, ValueAndTimestamp(v, s.timestamp_of(k))) for k, v in s.all()]

    def approximate_num_entries(self) -> int:
        return self._store.approximate_num_entries()


class _Msg:
    """Shaped like confluent_kafka.Message where the runtime reads it."""

    __slots__ = ("_t", "_p", "_o", "_ts", "_k", "_v", "_h")

    def __init__(self, topic: str, partition: int, offset: int, ts: int, key: bytes | None,
                 value: bytes | None, headers: list[tuple[str, bytes | None]] | None = None) -> None:
        self._t, self._p, self._o, self._ts, self._k, self._v = topic, partition, offset, ts, key, value
        self._h = headers

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def timestamp(self) -> tuple[int, int]:
        return (1, self._ts)

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes | None:
        return self._v

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._h


class _TestRecordFields(NamedTuple):
    key: Any
    value: Any
    timestamp: int


class TestRecord(_TestRecordFields):
    """An output record (Kafka Streams' ``TestRecord``): compares as ``(key, value, timestamp)``;
    ``headers`` rides along."""

    __test__ = False
    headers: Headers

    def __new__(cls, key: Any, value: Any, timestamp: int, headers: Headers = ()) -> TestRecord:
        self = super().__new__(cls, key, value, timestamp)
        self.headers = headers
        return self


class TopologyTestDriver:
    def __init__(self, topology: Topology, config: StreamsConfig | dict[str, Any] | None = None,
                 initial_wall_clock_ms: int = 0) -> None:
        if isinstance(config, StreamsConfig):
            cfg = config
        else:
            props = {"application.id": "test-driver", "bootstrap.servers": "dummy:1234"}
            props.update(config or {})
            cfg = StreamsConfig.from_properties(props)
        self.config = cfg
        self.topology = topology
        topology.configure_serdes(cfg.serde_properties)
        self.wall_clock_ms = initial_wall_clock_ms
        app = cfg.application_id
        internal = set(topology.internal_topics)
        self._resolve = lambda t: f"{app}-{t}" if t in internal else t
        self._outputs: dict[str, deque[_Msg]] = {}
        self._offsets: dict[str, int] = {}
        self._pending: deque[_Msg] = deque()
        self._by_topic: dict[str, StreamTask] = {}
        self.tasks: list[StreamTask] = []
        #: the exception handlers; ``errors.dropped`` counts what they skipped
        self.errors = ErrorHandling(cfg.to_properties(), send=self._send)
        #: librdkafka's ``message.max.bytes`` check, which refuses a record before sending it
        self._max_record_bytes = int(cfg.client_config("producer").get("message.max.bytes", 1_000_000))
        extractor = timestamp_extractor(cfg.default_timestamp_extractor)
        cache_entries = cfg.statestore_cache_max_bytes // 100
        # global stores: in memory, one partition per topic, fed by pipe_input on their topics
        self.global_state = GlobalStateManager(topology, {g.topic: 1 for g in topology.global_stores.values()},
                                               None, app, self.errors)
        self._global_topics = {g.topic for g in topology.global_stores.values()}
        for st in topology.subtopologies():
            tid = TaskId(st.id, 0)
            # under exactly-once as the runtime builds it: no origins (instance/state/origins.py)
            state = ProcessorStateManager(tid, None, app, eos=cfg.eos)
            task = StreamTask(tid, topology, st, app, self._resolve, self._send,
                              self._changelog_sender, state, cache_entries, True, self.errors,
                              self.global_state.stores, clock=self._clock, extractor=extractor)
            self.tasks.append(task)
            for topic in task.sources:
                self._by_topic[topic] = task

    def _clock(self) -> int:
        return self.wall_clock_ms

    def _changelog_sender(self, topic: str, partition: int, task: Any) -> Any:
        def send(batch: list[tuple[bytes, bytes | None, int]]) -> None:
            for kb, vb, ts in batch:
                self._send(topic, kb, vb, ts)
        return send

    def _send(self, topic: str, key: bytes | None, value: bytes | None, ts: int, partition: int = -1,
              headers: list[tuple[str, bytes | None]] | None = None) -> None:
        size = len(key or b"") + len(value or b"")
        if size > self._max_record_bytes:
            raise ProductionException(f"the producer refused a record for {topic}: MSG_SIZE_TOO_LARGE: "
                                      f"{size} bytes > message.max.bytes {self._max_record_bytes}")
        off = self._offsets.get(topic, 0)
        self._offsets[topic] = off + 1
        msg = _Msg(topic, 0, off, ts, key, value, headers)
        # as Kafka Streams' driver: every produced record is captured as output, and a record
        # to a topic the topology reads (repartition or user topic) is also piped back in
        self._outputs.setdefault(topic, deque()).append(msg)
        if topic in self._by_topic:
            self._pending.append(msg)

    def pipe_raw(self, topic: str, key: bytes | None, value: bytes | None,
                 timestamp: int | None = None, headers: Sequence[tuple[str, bytes | None]] = ()) -> None:
        if topic in self._global_topics:
            off = self._offsets.get(topic, 0)
            self._offsets[topic] = off + 1
            ts = self.wall_clock_ms if timestamp is None else timestamp
            self.global_state.apply((topic, 0), [_Msg(topic, 0, off, ts, key, value, list(headers) or None)],
                                    off + 1)
            return
        task = self._by_topic.get(topic)
        if task is None:
            raise StreamsException(f"unknown topic {topic!r}: the topology reads {sorted(self._by_topic)}")
        off = self._offsets.get(topic, 0)
        self._offsets[topic] = off + 1
        ts = self.wall_clock_ms if timestamp is None else timestamp
        self._run(task, _Msg(topic, 0, off, ts, key, value, list(headers) or None))

    def _run(self, task: StreamTask, msg: _Msg) -> None:
        task.add_records(msg.topic(), [msg])
        task.process()
        self._commit()
        self._drain()

    def _drain(self) -> None:
        """Feed records written to topics the topology reads back in, until none are left."""
        while self._pending:
            m = self._pending.popleft()
            t = self._by_topic[m.topic()]
            t.add_records(m.topic(), [m])
            t.process()
            self._commit()

    def _commit(self) -> None:
        for t in self.tasks:
            t.flush()

    def create_input_topic(self, topic: str, key_serde: Serde | None = None,
                           value_serde: Serde | None = None) -> TestInputTopic:
        return TestInputTopic(self, topic, key_serde or BytesSerde(), value_serde or BytesSerde())

    def create_output_topic(self, topic: str, key_serde: Serde | None = None,
                            value_serde: Serde | None = None) -> TestOutputTopic:
        return TestOutputTopic(self, topic, key_serde or BytesSerde(), value_serde or BytesSerde())

    def get_key_value_store(self, name: str) -> KeyValueStore:
        for t in self.tasks:
            if name in t.stores:
                return t.stores[name]
        if name in self.global_state.stores:
            return self.global_state.stores[name]
        raise StreamsException(f"no store {name!r} in the topology")

    def get_window_store(self, name: str) -> WindowStore:
        store = self.get_key_value_store(name)
        if not isinstance(store, WindowStore):
            raise StreamsException(f"store {name!r} is not a window store")
        return store

    def get_timestamped_key_value_store(self, name: str) -> TimestampedKeyValueStoreView:
        """A KTable's store read as Kafka Streams' ``TimestampedKeyValueStore``: values come as
        ``ValueAndTimestamp(value, timestamp)``."""
        store = self.get_key_value_store(name)
        if not getattr(store.spec, "timestamped", False) or store.spec.windowed:
            raise StreamsException(f"store {name!r} is not a timestamped key-value store")
        return TimestampedKeyValueStoreView(store)

    def get_session_store(self, name: str) -> SessionStore:
        store = self.get_key_value_store(name)
        if not isinstance(store, SessionStore):
            raise StreamsException(f"store {name!r} is not a session store")
        return store

    def dropped_records_total(self) -> int:
        """Records the processors dropped (late for their window, null key...): Kafka Streams'
        ``dropped-records-total`` task metric summed over the tasks."""
        return sum(t.dropped_records for t in self.tasks)

    def metrics(self) -> dict[MetricName, float]:
        """Kafka Streams' task metrics of the driver's tasks (``metrics()``: name, group, tags ->
        value), windows on the mocked wall clock. Store latencies (DEBUG) are not recorded here."""
        out: dict[MetricName, float] = {}
        for t in self.tasks:
            out.update(t.metrics.metrics())
        return out

    def advance_wall_clock_time(self, ms: int) -> None:
        """Move the mocked wall clock forward and fire the wall-clock punctuations now due."""
        if ms < 0:
            raise ValueError("wall-clock time only moves forward")
        self.wall_clock_ms += ms
        for t in self.tasks:
            t.punctuate_wall_clock(self.wall_clock_ms)
        self._commit()
        self._drain()

    def read_output(self, topic: str) -> _Msg | None:
        q = self._outputs.get(topic)
        return q.popleft() if q else None

    def close(self) -> None:
        for t in self.tasks:
            t.close()
        self.global_state.close(checkpoint=False)

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TestInputTopic:
    __test__ = False  # not a pytest class

    def __init__(self, driver: TopologyTestDriver, topic: str, ks: Serde, vs: Serde) -> None:
        self._d, self.topic, self._ks, self._vs = driver, topic, ks, vs

    def pipe_input(self, key: Any, value: Any, timestamp: int | None = None,
                   headers: Sequence[tuple[str, bytes | None]] = ()) -> None:
        self._d.pipe_raw(self.topic, self._ks.serialize(key), self._vs.serialize(value), timestamp, headers)

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        for v in values:
            self.pipe_input(None, v)

    def pipe_key_value_list(self, pairs: Iterable[tuple[Any, Any]]) -> None:
        for k, v in pairs:
            self.pipe_input(k, v)


class TestOutputTopic:
    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str, ks: Serde, vs: Serde) -> None:
        self._d, self.topic, self._ks, self._vs = driver, topic, ks, vs

    def is_empty(self) -> bool:
        return not self._d._outputs.get(self.topic)

    def read_record(self) -> TestRecord:
        m = self._d.read_output(self.topic)
        if m is None:
            raise StreamsException(f"output topic {self.topic} is empty")
        return TestRecord(self._ks.deserialize(m.key()), self._vs.deserialize(m.value()), m.timestamp()[1],
                          tuple(m.headers() or ()))

    def read_records_to_list(self) -> list[TestRecord]:
        out = []
        while not self.is_empty():
            out.append(self.read_record())
        return out

    def read_key_value(self) -> tuple[Any, Any]:
        k, v, _ = self.read_record()
        return k, v

    def read_value(self) -> Any:
        return self.read_key_value()[1]

    def read_key_values_to_list(self) -> list[tuple[Any, Any]]:
        out = []
        while not self.is_empty():
            out.append(self.read_key_value())
        return out

    def read_key_values_to_map(self) -> dict[Any, Any]:
        return dict(self.read_key_values_to_list())
