"""Emit-on-close cost of the windowed aggregations, in-process (TopologyTestDriver, no broker)::

    python -m loadtest.emit_on_close [-n 20000] [--keys 5000]

Session, sliding and tumbling windows, each counted with ``EmitStrategy.on_window_close()`` and
with ``on_window_update()``, over the same records (one every 50 ms of event time, random keys).
Prints records/s and how many results each emitted: emit-on-close should cost about what
emit-on-update does, however large the store (it reads only the windows that close).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from typing import Any

from instance.serde import StringSerde
from instance.testing import TopologyTestDriver
from instance.testing.driver import _Msg
from instance.topology import StreamsBuilder
from instance.topology.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows

WINDOWS: dict[str, Any] = {
    "session": SessionWindows.of_inactivity_gap_and_grace(60_000, 0),
    "sliding": SlidingWindows.of_time_difference_and_grace(60_000, 0),
    "tumbling": TimeWindows.of_size_with_no_grace(60_000),
}


def run(windows: Any, strategy: EmitStrategy, keys: list[bytes]) -> tuple[float, int]:
    """(records/s, results emitted) of one count over ``keys``, one record per 50 ms."""
    s = StringSerde()
    b = StreamsBuilder(s, s)
    (b.stream("in").group_by_key().windowed_by(windows).emit_strategy(strategy).count("c")
     .to_stream().to("out"))
    with TopologyTestDriver(b.build(), {"application.id": "emit", "commit.interval.ms": 1_000_000_000}) as d:
        task = d.tasks[0]
        msgs = [_Msg("in", 0, i, i * 50, k, b"x") for i, k in enumerate(keys)]
        t0 = time.perf_counter()
        task.add_records("in", msgs)
        task.process()
        d._commit()
        elapsed = time.perf_counter() - t0
        emitted = len(d.create_output_topic("out").read_records_to_list())
    return len(keys) / elapsed, emitted


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", type=int, default=20_000, help="records")
    ap.add_argument("--keys", type=int, default=5_000)
    args = ap.parse_args()
    rnd = random.Random(1)
    keys = [f"u{rnd.randrange(args.keys)}".encode() for _ in range(args.n)]
    print(f"{'windows':10} {'on_window_close':>22} {'on_window_update':>22}")
    for name, windows in WINDOWS.items():
        close_rate, close_n = run(windows, EmitStrategy.on_window_close(), keys)
        update_rate, update_n = run(windows, EmitStrategy.on_window_update(), keys)
        print(f"{name:10} {close_rate:>12,.0f} rec/s {close_n:>6} {update_rate:>12,.0f} rec/s {update_n:>6}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
