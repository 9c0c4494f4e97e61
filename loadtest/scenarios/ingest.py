"""Input at a steady rate until stopped; the truth is the word count of the lines the broker
acknowledged (a line that failed is not in it, so "lost" means lost by the application)."""

from __future__ import annotations

import collections
import random
import threading
import time

from confluent_kafka import KafkaError, Message, Producer

from examples.wordcount import split_words
from instance.local.cluster import WORDS


class Ingest(threading.Thread):
    def __init__(self, bootstrap: str, topic: str, rate: float, seed: int = 11) -> None:
        super().__init__(name="ingest", daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.rnd = random.Random(seed)
        self.truth: collections.Counter[str] = collections.Counter()
        self.acked = self.failed = 0
        self.error: str | None = None
        self._halt = threading.Event()

    def _line(self) -> str:
        return " ".join(self.rnd.choice(WORDS) for _ in range(self.rnd.randint(3, 8)))

    def run(self) -> None:
        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "acks": "all",
                      "partitioner": "murmur2_random"})

        def delivered(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                self.acked += 1
                self.truth.update(split_words((msg.value() or b"").decode()))
            else:
                self.failed += 1

        t0 = time.monotonic()
        sent = 0
        try:
            while not self._halt.is_set():
                due = int((time.monotonic() - t0) * self.rate) + 1
                while sent < due:
                    try:
                        p.produce(self.topic, self._line().encode(), None, on_delivery=delivered)
                        sent += 1
                    except BufferError:
                        p.poll(0.05)
                p.poll(0)
                self._halt.wait(0.02)
            if p.flush(60) > 0:
                self.error = "not every line was acknowledged within 60 s"
        except Exception as e:  # reported with the run, never swallowed
            self.error = f"{type(e).__name__}: {e}"

    def stop(self) -> collections.Counter[str]:
        """Stop, wait for every acknowledgement; the truth."""
        self._halt.set()
        self.join(90)
        return self.truth
