"""In-process cost of the windowed operations (no broker): records/s of one task processing
batches, with a commit (cache flush) every ``--commit-every`` records.

    python -m loadtest.windowed_inproc [--records 200000] [--keys 10000]

Workloads: a tumbling-window count (1-minute windows, caching on, as Kafka Streams' default), a
sliding-window count, a session count, and a stream-stream inner join. A figure for comparing
changes to these paths, not an end-to-end throughput (that is ``loadtest.throughput``).
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from instance.serde import StringSerde
from instance.testing import TopologyTestDriver
from instance.testing.driver import _Msg
from instance.topology import Materialized, StreamsBuilder, Topology
from instance.topology.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows

S = StringSerde()


def _windowed(windows: object) -> Topology:
    b = StreamsBuilder(S, S)
    b.stream("in").group_by_key().windowed_by(windows).count(Materialized.as_("counts")).to_stream().to("out")
    return b.build()


def _join() -> Topology:
    b = StreamsBuilder(S, S)
    b.stream("in").join(b.stream("in2"), lambda a, c: a + c, JoinWindows.of_time_difference_without_grace(5_000)
                        ).to("out")
    return b.build()


def run(name: str, topology: Topology, topics: list[str], n: int, keys: int, commit_every: int) -> None:
    rnd = random.Random(7)
    driver = TopologyTestDriver(topology)
    msgs = {t: [] for t in topics}  # type: dict[str, list[_Msg]]
    for i in range(n):
        t = topics[i % len(topics)]
        key = f"user-{rnd.randrange(keys)}".encode()
        msgs[t].append(_Msg(t, 0, i, i * 10, key, b"x"))  # 10 ms apart: 6,000 records per minute
    task = driver.tasks[0]
    start = time.perf_counter()
    done = 0
    while done < n:
        for t in topics:
            per_topic = commit_every // len(topics)
            first = done // len(topics)
            task.add_records(t, msgs[t][first:first + per_topic])
        task.process()
        task.flush()
        driver._outputs.clear()
        done += commit_every
    el = time.perf_counter() - start
    print(f"{name:28s} records={n} keys={keys} seconds={el:.2f} records_per_s={n / el:,.0f}")
    driver.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--keys", type=int, default=10_000)
    ap.add_argument("--commit-every", type=int, default=10_000)
    a = ap.parse_args()
    cases: list[tuple[str, Callable[[], Topology], list[str]]] = [
        ("tumbling-count-1min", lambda: _windowed(TimeWindows.of_size_with_no_grace(60_000)), ["in"]),
        ("sliding-count-10s", lambda: _windowed(SlidingWindows.of_time_difference_and_grace(10_000, 0)), ["in"]),
        ("session-count-gap-30s", lambda: _windowed(SessionWindows.of_inactivity_gap_with_no_grace(30_000)),
         ["in"]),
        ("stream-stream-join-5s", _join, ["in", "in2"]),
    ]
    for name, make, topics in cases:
        run(name, make(), topics, a.records, a.keys, a.commit_every)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
