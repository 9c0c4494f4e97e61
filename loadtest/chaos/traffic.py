"""Traffic during a chaos run: input lines at a steady rate, and queries through live instances."""

from __future__ import annotations

import collections
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import grpc
from confluent_kafka import KafkaError, Message, Producer

from examples.wordcount import STORE, split_words
from kernel.status_details import status_label
from router.client.sync_client import QueryClient, QueryResult


class LiveTargets:
    """The instances queries may go to (instance id -> host:port); the scenario's actions change it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._targets: dict[str, str] = {}

    def add(self, instance_id: str, target: str) -> None:
        with self._lock:
            self._targets[instance_id] = target

    def remove(self, instance_id: str) -> None:
        with self._lock:
            self._targets.pop(instance_id, None)

    def snapshot(self) -> dict[str, str]:
        with self._lock:
            return dict(self._targets)

    def __contains__(self, instance_id: object) -> bool:
        with self._lock:
            return instance_id in self._targets


class Clients:
    """One QueryClient per target, reused across calls (thread-safe; gRPC channels are)."""

    def __init__(self, timeout: float = 3.0) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        self._clients: dict[str, QueryClient] = {}

    def __call__(self, target: str) -> QueryClient:
        with self._lock:
            c = self._clients.get(target)
            if c is None:
                c = self._clients[target] = QueryClient(target, timeout=self.timeout)
            return c

    def close(self) -> None:
        with self._lock:
            for c in self._clients.values():
                c.close()
            self._clients.clear()


class LineProducer(threading.Thread):
    """Writes ``lines`` to ``topic`` (null keys) at ``rate`` lines/s, then flushes.

    ``truth()`` is the word count of the lines the broker acknowledged.
    """

    def __init__(self, bootstrap: str, topic: str, lines: list[str], rate: float) -> None:
        super().__init__(name="chaos-producer", daemon=True)
        self.bootstrap, self.topic, self.lines, self.rate = bootstrap, topic, lines, rate
        self.started_at = 0.0
        self.finished_at = 0.0
        self.failed: list[str] = []
        self.error: str | None = None
        self._halt = threading.Event()
        self._began = threading.Event()

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "partitioner": "murmur2_random"})

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is not None:
                self.failed.append((msg.value() or b"").decode())

        self.started_at = time.monotonic()
        self._began.set()
        try:
            sent = 0
            while sent < len(self.lines) and not self._halt.is_set():
                due = min(len(self.lines), int((time.monotonic() - self.started_at) * self.rate) + 1)
                for line in self.lines[sent:due]:  # what is due now, then sleep ~20 ms
                    while True:
                        try:
                            p.produce(self.topic, line.encode(), None, on_delivery=delivered)
                            break
                        except BufferError:
                            p.poll(0.05)
                sent = max(sent, due)
                p.poll(0)
                self._halt.wait(0.02)
            if p.flush(60) > 0:
                self.error = "not every line was acknowledged within 60 s"
        except Exception as e:  # reported with the run, never swallowed
            self.error = f"{type(e).__name__}: {e}"
        finally:
            self.finished_at = time.monotonic()

    def wait_started(self, timeout: float = 10.0) -> float:
        if not self._began.wait(timeout):
            raise TimeoutError("the producer thread did not start")
        return self.started_at

    def stop(self) -> None:
        self._halt.set()

    def truth(self) -> collections.Counter[str]:
        counts = collections.Counter(w for line in self.lines for w in split_words(line))
        counts.subtract(w for line in self.failed for w in split_words(line))
        return +counts


@dataclass
class QueryStats:
    asked: int = 0
    failed: int = 0
    #: queries that failed because the instance asked was being stopped (not counted as failed)
    discarded: int = 0
    flagged_stale: int = 0
    unflagged_stale: int = 0
    failure_reasons: collections.Counter[str] = field(default_factory=collections.Counter)
    unflagged_examples: list[str] = field(default_factory=list)


class QueryProber(threading.Thread):
    """Asks random words through random live instances (``allow_stale=True``) until stopped.

    A reply flagged ``stale`` is counted; an unflagged reply whose count is below a count an earlier
    unflagged reply gave for the same word is an *unflagged stale* answer (reads went back in time
    without saying so). A missing key reads as 0.
    """

    def __init__(self, live: LiveTargets, words: list[str], seed: int, clients: Clients,
                 interval: float = 0.02) -> None:
        super().__init__(name="chaos-queries", daemon=True)
        self.live, self.words, self.clients, self.interval = live, words, clients, interval
        self.rnd = random.Random(seed)
        self.stats = QueryStats()
        self._best: dict[str, tuple[int, str]] = {}
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        while not self._halt.wait(self.interval):
            targets = self.live.snapshot()
            if not targets:
                continue
            instance_id, target = self.rnd.choice(sorted(targets.items()))
            word = self.rnd.choice(self.words)
            try:
                reply = self.clients(target).get(STORE, word, allow_stale=True)
            except grpc.RpcError as e:
                if instance_id not in self.live:
                    self.stats.discarded += 1
                    continue
                self.stats.asked += 1
                self.stats.failed += 1
                self.stats.failure_reasons[status_label(e)] += 1
                continue
            self.stats.asked += 1
            self._record(instance_id, word, reply)

    def _record(self, asked: str, word: str, reply: QueryResult) -> None:
        md = reply.metadata
        if md["stale"]:
            self.stats.flagged_stale += 1
            return
        value = int(reply.value) if reply.found else 0
        best = self._best.get(word)
        if best is not None and value < best[0]:
            self.stats.unflagged_stale += 1
            if len(self.stats.unflagged_examples) < 5:
                self.stats.unflagged_examples.append(
                    f"{wall_clock()} {word!r}={value} after {best[0]} "
                    f"(earlier from {best[1]}; now asked {asked}, served by {md['served_by']} "
                    f"{md['role']} {md['instance_state']} partition {md['partition']} position {md['position']})")
        elif best is None or value > best[0]:
            self._best[word] = (value, md["served_by"])


class PauseProbe(threading.Thread):
    """The longest time an instance processed nothing while input flowed, per instance.

    Asks each live instance for its own ``records_processed`` counter every ``interval``, each on a
    worker of its own (an instance that was just killed may hold a call for seconds; that must not
    delay the others). A pause is a run of consecutive answers with the same count; an answer that
    comes more than ``max_gap`` after the previous one starts over, since nothing is known of the
    time between. With input flowing the whole time, the longest pause of an instance that kept
    running through a membership change is what the change cost the members it did not move.
    """

    def __init__(self, live: LiveTargets, clients: Clients, interval: float = 0.1, max_gap: float = 1.0) -> None:
        super().__init__(name="chaos-pauses", daemon=True)
        self.live, self.clients, self.interval, self.max_gap = live, clients, interval, max_gap
        self.longest: dict[str, float] = {}
        self._last: dict[str, tuple[int, float, float]] = {}  # instance -> (count, unchanged since, last answer)
        self._asking: set[str] = set()
        self._lock = threading.Lock()
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    def run(self) -> None:
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="chaos-pause") as pool:
            while not self._halt.wait(self.interval):
                for instance_id, target in self.live.snapshot().items():
                    with self._lock:
                        if instance_id in self._asking:
                            continue
                        self._asking.add(instance_id)
                    pool.submit(self._ask, instance_id, target)

    def _ask(self, instance_id: str, target: str) -> None:
        try:
            md = self.clients(target).metadata()
            own = next((i for i in md.instances if i.instance_id == md.asked), None)
            if own is not None:
                self._seen(instance_id, own.counters.records_processed, time.monotonic())
        except grpc.RpcError:
            pass  # no answer: the gap check below discounts the time
        finally:
            with self._lock:
                self._asking.discard(instance_id)

    def _seen(self, instance_id: str, count: int, now: float) -> None:
        with self._lock:
            last = self._last.get(instance_id)
            if last is None or count != last[0] or now - last[2] > self.max_gap:
                self._last[instance_id] = (count, now, now)
                return
            self.longest[instance_id] = max(self.longest.get(instance_id, 0.0), now - last[1])
            self._last[instance_id] = (count, last[1], now)


def wall_clock() -> str:
    """Local time as the instance logs print it (HH:MM:SS,mmm), to line events up with the logs."""
    now = time.time()
    return time.strftime("%H:%M:%S", time.localtime(now)) + f",{int(now % 1 * 1000):03d}"


