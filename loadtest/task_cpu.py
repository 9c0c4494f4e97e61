"""CPU cost of one task's hot path, in-process (no broker): records per CPU-second.

    python -m loadtest.task_cpu [-n 200000] [--reps 5]

Runs the throughput benchmark's workloads (loadtest/workloads.py) through one StreamTask of the
TopologyTestDriver and times ``task.process()`` over a batch with ``time.process_time`` (CPU time,
so other load on the machine matters less than with wall time); prints the best of ``--reps``.
Useful to compare two checkouts of a change to the per-record path (run it with each PYTHONPATH).
On a busy machine CPU time still varies by 10-20 %; for a deterministic figure count instructions:
``valgrind --tool=cachegrind --cache-sim=no python -m loadtest.task_cpu --reps 1 -n N`` for two
values of N, and divide the difference of the ``I refs`` by the difference of N.
"""

from __future__ import annotations

import argparse
import time

from instance.testing.driver import TopologyTestDriver, _Msg
from loadtest import workloads

VALUE = b'{"ms": 300, "page": "p", "amount": 1}'


def measure(mode: str, n: int, reps: int) -> float:
    topology = workloads.stateful("in", "out", True) if mode == "stateful" else workloads.stateless("in", "out")
    driver = TopologyTestDriver(topology)
    task = driver.tasks[0]
    msgs = [_Msg("in", 0, i, 1000 + i, b"user-%d" % (i % 10000), VALUE) for i in range(n)]
    best = float("inf")
    for _ in range(reps):
        driver._outputs.clear()
        task.add_records("in", msgs)
        t = time.process_time()
        task.process()
        best = min(best, time.process_time() - t)
    driver.close()
    return n / best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=200_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    for mode in ("stateless", "stateful"):
        print(f"{mode}: {measure(mode, args.n, args.reps):,.0f} records per CPU-second "
              f"(one task, best of {args.reps})")


if __name__ == "__main__":
    main()
