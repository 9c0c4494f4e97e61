"""Where a stream thread's time goes per record, by stage, for one benchmark workload.

    python -m loadtest.where_time_goes --bootstrap HOST:PORT --topic T -n N --mode stateless
        [--guarantee exactly-once] [--cache] [--target R] [--rate 500]

Runs one ``loadtest.worker`` under py-spy (native frames on) and files every sample of the stream
thread under the deepest stage its stack passes through: ``consume`` (the main consumer's poll),
``deserialize``, ``serialize``, ``process`` (the application's processors and the runtime's
record path),
``cache``, ``store`` (RocksDB), ``changelog``, ``produce`` (the producer's send and its delivery
poll), ``commit``, ``rebalance`` and ``other``. The worker's own figures come with it: the
steady-state CPU per record of the process and per kind of thread (Python vs librdkafka's own
threads, which py-spy does not sample), so the shares are read against the whole cost.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

#: (stage, what a frame's text contains), checked from the innermost frame outwards: the first
#: frame that matches files the sample
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("commit", ("task_committer.py", "commit_transaction", "send_offsets_to_transaction", "Consumer_commit")),
    ("rebalance", ("_on_assign", "_on_revoke", "_on_lost", "rebalance_cb")),
    ("changelog", ("change_logging.py",)),
    ("store", ("rocksdict", "bytes_store.py", "kv_store.py", "window_store.py", "segmented.py", "typed_store.py",
               "metered.py", "uncached.py")),
    ("cache", ("caching.py",)),
    ("produce", ("collector.py", "Producer_produce", "Producer_poll")),
    ("deserialize", (".deserialize ", "unseal")),
    ("serialize", (".serialize ",)),
    ("consume", ("Consumer_consume", "Consumer_poll", "Message_", "add_records")),
    ("process", ("processors.py", "task.py", "processor.py", "examples/", "loadtest/workloads.py")),
)


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for stage, needles in STAGES:
            if any(n in frame for n in needles):
                return stage
    return "other"


def breakdown(raw: Path, thread_frame: str = "StreamThread.run") -> Counter[str]:
    """Samples per stage of the stack samples that pass through ``thread_frame``."""
    found: Counter[str] = Counter()
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if thread_frame not in stack:
            continue
        found[stage_of(stack.split(";"))] += int(count)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second (each pauses the process)")
    args, worker_args = ap.parse_known_args()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "stacks.txt"
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        cmd = [spy, "record", "-r", str(args.rate), "-n", "-f", "raw", "-o", str(raw),
               "--", sys.executable, "-m", "loadtest.worker", *worker_args]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
        result = next((json.loads(x[7:]) for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if result is None or not result.get("ok"):
            print(f"the worker failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}", file=sys.stderr)
            return 1
        stages = breakdown(raw)
    total = sum(stages.values()) or 1
    python_us = float((result.get("steady_threads_us") or {}).get("python", 0.0))
    print(f"{result['mode']} {result['guarantee']}{' cache on' if result.get('cache') else ''}: "
          f"steady {result['steady_rate']} records/s, {result['steady_cpu_us']} µs CPU per record "
          f"(threads: {result.get('steady_threads_us')})")
    print(f"{'stage':12} {'share':>6} {'≈ µs/record':>12}   (of the Python threads' {python_us} µs)")
    for stage, n in stages.most_common():
        print(f"{stage:12} {100 * n / total:5.1f}% {python_us * n / total:12.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
