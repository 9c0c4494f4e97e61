"""One benchmark run in its own process; prints ``RESULT {json}`` like the peer's script.

rate_first_to_last = n / (time the last record was processed - time the first was processed), where
the last is the n-th (n + the table's rows for a stream-table join: the task processes them too),
read from the stream thread's batch counter (no per-record hook on the hot path). The steady state
is the second half of that: ``steady_rate`` and ``steady_cpu_us`` (process CPU per input record).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

from instance.runtime.kafka_streams import KafkaStreams
from loadtest import workloads
from loadtest.proc_usage import thread_cpu


def steady_state(n: int, t_half: float, t_last: float, cpu_half: float, cpu_last: float) -> dict[str, object]:
    """The second half of the run, where start-up, first polls and (on the JVM) JIT compilation
    are behind: its rate and the process's CPU per input record (every thread's: the
    Kafka clients' too). The same fields as the Java peer prints."""
    if not t_half or t_last <= t_half:
        return {"steady_rate": None, "steady_cpu_us": None}
    second = n - (n + 1) // 2
    return {"steady_rate": round(second / (t_last - t_half)),
            "steady_cpu_us": round((cpu_last - cpu_half) / second * 1e6, 3)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--mode", default="stateful",
                    choices=["stateful", "stateless", "window-count", "join", "join-global", "wordcount"])
    ap.add_argument("--guarantee", choices=["at-least-once", "exactly-once"], default="at-least-once")
    ap.add_argument("--cache", action="store_true", help="stateful: Kafka Streams' record cache on")
    ap.add_argument("--table-topic", help="join: the table's topic")
    ap.add_argument("--table-rows", type=int, default=0,
                    help="join: rows in the table topic (processed by the task too, so waited for)")
    ap.add_argument("--target", type=int,
                    help="records the stream thread processes in all (default: n, + the table's rows "
                         "for a join); wordcount: lines + words, as both sub-topologies count")
    ap.add_argument("--tag", default="")
    ap.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting of the instance, over the benchmark's own (repeatable), e.g. "
                         "main.consumer.fetch.queue.backoff.ms=1000 for the librdkafka default")

    ap.add_argument("--threads", type=int, default=1, help="num.stream.threads of each instance")
    ap.add_argument("--processes", type=int, default=1,
                    help="instances of the application, one process each (what a pod with several cores "
                         "could run behind one endpoint: docs/architecture.md)")
    args = ap.parse_args()
    if args.mode.startswith("join") and not args.table_topic:
        ap.error(f"--mode {args.mode} needs --table-topic")
    if bad := [c for c in args.config if "=" not in c]:
        ap.error(f"--config takes NAME=VALUE, got {bad[0]!r}")

    run = uuid.uuid4().hex[:8]
    app_id = f"iq-bench-{args.mode}-{run}"
    out = f"iq-out-{args.mode}-{run}"
    # a global table is bootstrapped before processing starts, by the global thread: not counted
    target = args.target or args.n + (args.table_rows if args.mode == "join" else 0)
    # the output topic is created up front, with 4 partitions like the peer's
    from instance.local.cluster import ensure_topic
    ensure_topic(args.bootstrap, out, 4)
    if args.processes > 1:
        return _report(args, out, *_measure_processes(args, app_id, out, target))
    streams = _instance(args, app_id, out, f"bench-{run}")
    t_init = time.perf_counter()
    streams.start()
    progress = _Progress(target, lambda: sum(t.processed for t in streams.threads), time.process_time, thread_cpu)
    progress.follow(t_init, lambda: streams.last_error is not None)
    streams.close()
    progress.t_end = time.perf_counter()
    shutil.rmtree(streams.config.state_dir, ignore_errors=True)
    return _report(args, out, progress, repr(streams.last_error) if streams.last_error else None)


def _instance(args: argparse.Namespace, app_id: str, out: str, client_id: str) -> KafkaStreams:
    topology = {"stateful": lambda: workloads.stateful(args.topic, out, args.cache),
                "stateless": lambda: workloads.stateless(args.topic, out),
                "window-count": lambda: workloads.window_count(args.topic, out, args.cache),
                "join": lambda: workloads.stream_table_join(args.topic, str(args.table_topic), out),
                "join-global": lambda: workloads.stream_global_table_join(args.topic, str(args.table_topic), out),
                "wordcount": lambda: workloads.wordcount(args.topic, out),
                }[args.mode]()
    return KafkaStreams(topology, {
        "application.id": app_id, "bootstrap.servers": args.bootstrap,
        "state.dir": tempfile.mkdtemp(prefix="iqmesh-bench-"), "client.id": client_id,
        "num.stream.threads": args.threads,
        "processing.guarantee": "exactly_once_v2" if args.guarantee == "exactly-once" else "at_least_once",
        **dict(c.split("=", 1) for c in args.config),
    })


class _Progress:
    """When the first, the middle and the target-th record were processed, and the CPU spent by
    then (``cpu``: seconds; ``threads``: seconds per kind of thread, where they can be told)."""

    def __init__(self, target: int, done: Callable[[], int], cpu: Callable[[], float],
                 threads: Callable[[], dict[str, float]] = dict) -> None:
        self.target, self._done, self._cpu, self._threads = target, done, cpu, threads
        self.t_init = self.t_first = self.t_half = self.t_last = self.t_end = 0.0
        self.cpu_half = self.cpu_last = 0.0
        self.threads_half: dict[str, float] = {}
        self.threads_last: dict[str, float] = {}

    def follow(self, t_init: float, failed: Callable[[], bool], timeout: float = 900.0) -> None:
        self.t_init = t_init
        half = (self.target + 1) // 2
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not failed():
            done = self._done()
            now = time.perf_counter()
            if done and not self.t_first:
                self.t_first = now
            if done >= half and not self.t_half:
                self.t_half, self.cpu_half, self.threads_half = now, self._cpu(), self._threads()
            if done >= self.target:
                self.t_last, self.cpu_last, self.threads_last = now, self._cpu(), self._threads()
                return
            time.sleep(0.001)


def _child(args: argparse.Namespace, app_id: str, out: str, slot: int, counts: Any, stop: Any) -> None:
    streams = _instance(args, app_id, out, f"bench-{app_id[-8:]}-{slot}")
    streams.start()
    while not stop.is_set():
        counts[slot] = sum(t.processed for t in streams.threads)
        time.sleep(0.001)
    streams.close()
    shutil.rmtree(streams.config.state_dir, ignore_errors=True)


def _proc_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _measure_processes(args: argparse.Namespace, app_id: str, out: str,
                       target: int) -> tuple[_Progress, str | None]:
    """``--processes`` instances of one application on this machine (each its own process and
    GIL), followed from here: records processed by all, CPU of all (the kernel's figures)."""
    ctx = mp.get_context("spawn")
    counts = ctx.Array("q", args.processes, lock=False)
    stop = ctx.Event()
    procs = [ctx.Process(target=_child, args=(args, app_id, out, i, counts, stop)) for i in range(args.processes)]
    t_init = time.perf_counter()
    for p in procs:
        p.start()
    progress = _Progress(target, lambda: sum(counts), lambda: sum(_proc_cpu(p.pid or 0) for p in procs))
    progress.follow(t_init, lambda: any(p.exitcode is not None for p in procs))
    stop.set()
    for p in procs:
        p.join(60)
    progress.t_end = time.perf_counter()
    failed = [p.exitcode for p in procs if p.exitcode]
    return progress, f"instance exit codes {failed}" if failed else None


def _report(args: argparse.Namespace, out: str, p: _Progress, error: str | None) -> int:
    ok = p.t_last > 0
    el = p.t_last - p.t_first
    second = args.n - (args.n + 1) // 2
    res = {
        "tag": args.tag, "lib": "iqmesh", "mode": args.mode, "guarantee": args.guarantee,
        "cache": args.cache, "n": args.n, "ok": ok, "threads": args.threads, "processes": args.processes,
        "startup_s": round(p.t_first - p.t_init, 3) if p.t_first else None,
        "first_to_last_s": round(el, 3) if ok else None,
        "rate_first_to_last": round(args.n / el) if ok and el > 0 else None,
        "rate_incl_final_commit": round(args.n / (p.t_end - p.t_first)) if ok else None,
        **steady_state(args.n, p.t_half, p.t_last, p.cpu_half, p.cpu_last),
        # per kind of thread, CPU µs per input record over the second half (clock ticks: coarse)
        "steady_threads_us": {k: round((v - p.threads_half.get(k, 0.0)) / second * 1e6, 2)
                              for k, v in sorted(p.threads_last.items())} if p.t_half and ok else None,
        "out_topic": out,
        "error": error,
    }
    print("RESULT " + json.dumps(res), flush=True)
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
