"""One busy partition against four: the word count (examples/wordcount.py) on the same input
written to a 1-partition and to a 4-partition topic, one instance, one stream thread.

    python -m loadtest.partitions -n 300000 [--partitions 1,4] [--reps 1] [--bootstrap HOST:PORT]
        [--input demo|keys] [--config NAME=VALUE ...] [--py-spy DIR]

Without --bootstrap a dev broker is started for the run (and stopped at the end). Every variant
gets a fresh input topic, application id (so fresh repartition and changelog topics) and state
directory, and runs in its own process: an in-process ``KafkaStreams`` with exactly what
``iqmesh run examples/wordcount.py`` builds (same topology, same settings, plus ``--config``).

Input (``--input``): ``demo`` = the demo's lines (3-12 words of a 37-word vocabulary, 7.5 words a
line on average); ``keys`` = ``k<i> common``, the shape of the stale-read integration test (two
words a line, one distinct key per line). Lines have null keys; in the 4-partition topic line i
goes to partition i % 4.

Measured per variant (sampled every 5 ms from the tasks' record offsets, nothing on the hot
path): ``startup_s`` (start() to the first line processed), ``lines_s`` (first to last line
through sub-topology 0), ``process_s`` (first line to the last word counted by sub-topology 1)
and ``total_s`` (start() to the last word counted). Rates are input lines and words per second,
end to end (``total_s``, what a test waiting for the counts sees) and processing only
(``process_s``); the ratios are 1 partition / 4 partitions. ``CPU s`` is the instance process's
CPU time until the last word was counted (less sensitive to other load than the rates). Variants
alternate within a repetition; use --reps and compare ratios from one run only (the machine is
shared); ``-v`` prints each variant's state changes and progress every second.

What it showed (2 cores, shared): processing runs at the same rate and CPU cost with 1 or 4
partitions; the difference is start-up. With one partition the first record could take from
1 s to over 4 minutes to arrive (4 partitions: 0.5-17 s): the stream thread's idle pause
(StreamThread._idle) makes the fetch in flight outdated, and the dev broker answers a fetch with
the whole partition (16 MB for 300k lines, whatever ``max.partition.fetch.bytes`` says), which
takes longer than the poll.ms + idle backoff cycle, so every answer is thrown away until one is
fast enough. ``--config iqmesh.idle.backoff.ms=0`` shows the start-up without it.

``--py-spy DIR`` runs each worker under ``py-spy record`` (speedscope JSON in DIR, install
py-spy first); ``--worker`` is the per-variant process (internal).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from instance.local import broker as devbroker
from instance.local import cluster

REPO = Path(__file__).resolve().parent.parent


def input_lines(kind: str, n: int) -> list[str]:
    if kind == "keys":
        return [f"k{i} common" for i in range(n)]
    return cluster.sample_lines(n)


def produce_input(bootstrap: str, topic: str, partitions: int, lines: list[str]) -> None:
    from confluent_kafka import Producer

    cluster.ensure_topic(bootstrap, topic, partitions)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 10000,
                  "queue.buffering.max.messages": 1_000_000})
    base_ms = int(time.time() * 1000)
    for i, line in enumerate(lines):
        while True:
            try:
                p.produce(topic, line.encode(), None, i % partitions, timestamp=base_ms + i // 100)
                break
            except BufferError:
                p.poll(0.05)
    if p.flush(120):
        raise RuntimeError(f"{topic}: not every input record was acknowledged")


# -- the per-variant process -----------------------------------------------------------------------
def _tasks(thread: Any) -> list[Any]:
    """The active tasks of a stream thread (its task manager's, once it has one)."""
    manager = getattr(thread, "tasks", None)
    tasks = manager if isinstance(manager, dict) else getattr(manager, "tasks", None)
    return [] if tasks is None else list(tasks.values())


def _progress(streams: Any, input_topic: str) -> tuple[int, int]:
    """(input lines, repartitioned words) processed so far: the last offset each task reached.
    Read from another thread without locks: a torn read only shows an older value."""
    lines = words = 0
    for thread in list(streams.threads):
        try:
            tasks = _tasks(thread)
        except RuntimeError:  # the dict changed size during a rebalance; next sample
            continue
        for task in tasks:
            rc = task.record
            if rc.topic == input_topic:
                lines += rc.offset + 1
            elif rc.topic is not None:
                words += rc.offset + 1
    return lines, words


def worker(args: argparse.Namespace) -> int:
    from instance.config import StreamsConfig
    from instance.runtime.kafka_streams import KafkaStreams
    from instance.runtime.query import KeyQuery, StateQueryRequest

    os.environ["WORDCOUNT_INPUT_TOPIC"] = args.topic
    os.environ["WORDCOUNT_OUTPUT_TOPIC"] = f"{args.topic}-counts"
    wordcount = importlib.import_module("examples.wordcount")
    # as `iqmesh run` configures it (application.server is only published here, nobody queries)
    props: dict[str, Any] = {"application.id": args.app_id, "bootstrap.servers": args.bootstrap,
                             "state.dir": args.state_dir, "client.id": args.app_id,
                             "application.server": "127.0.0.1:1"}
    for item in args.config:
        k, _, v = item.partition("=")
        props[k.strip()] = v.strip()
    checks: dict[str, int] = json.loads(args.checks)
    streams = KafkaStreams(wordcount.build(), StreamsConfig.from_properties(props))
    states: list[tuple[float, str]] = []
    streams.set_state_listener(lambda new, _old: states.append((time.perf_counter(), new.name)))
    t_start, cpu_start = time.perf_counter(), time.process_time()
    streams.start()
    timeline: list[tuple[float, int, int]] = []
    next_sample = 0.0
    t_first = t_lines = t_words = cpu = 0.0
    lines = words = 0
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and streams.last_error is None:
        lines, words = _progress(streams, args.topic)
        now = time.perf_counter()
        if lines and not t_first:
            t_first = now
        if now >= next_sample:
            timeline.append((round(now - t_start, 2), lines, words))
            next_sample = now + args.sample_s
        if lines >= args.lines and not t_lines:
            t_lines = now
        if words >= args.words and lines >= args.lines:
            t_words, cpu = now, time.process_time() - cpu_start
            break
        time.sleep(0.005)
    wrong = {}
    if t_words:
        for word, want in checks.items():
            got = streams.query(StateQueryRequest(wordcount.STORE, KeyQuery(word))).only_partition_result().result
            if got != want:
                wrong[word] = (got, want)
    error = streams.last_error
    streams.close()
    ok = bool(t_words) and not wrong and error is None
    process, total = t_words - t_first, t_words - t_start
    res = {
        "partitions": args.partitions, "ok": ok, "lines": args.lines, "words": args.words,
        "startup_s": round(t_first - t_start, 3) if t_first else None,
        "lines_s": round(t_lines - t_first, 3) if t_lines else None,
        "process_s": round(process, 3) if t_words else None,
        "total_s": round(total, 3) if t_words else None,
        "lines_per_s": round(args.lines / total) if t_words else None,
        "words_per_s": round(args.words / total) if t_words else None,
        "process_lines_per_s": round(args.lines / process) if t_words and process > 0 else None,
        "process_words_per_s": round(args.words / process) if t_words and process > 0 else None,
        "cpu_s": round(cpu, 2) if t_words else None,
        "progress": [lines, words], "wrong_counts": wrong or None,
        "states": [(round(t - t_start, 3), name) for t, name in states],
        "timeline": timeline,
        "error": repr(error) if error is not None else None,
    }
    print("RESULT " + json.dumps(res), flush=True)
    return 0 if ok else 2


# -- the driver --------------------------------------------------------------------------------------
def _results(stdout: str) -> Iterator[dict[str, Any]]:
    for line in stdout.splitlines():
        if line.startswith("RESULT "):
            yield json.loads(line[7:])


def run_variant(bootstrap: str, lines: list[str], counts: Counter[str], partitions: int,
                configs: list[str], timeout: float, py_spy: Path | None, tag: str) -> dict[str, Any]:
    run = uuid.uuid4().hex[:8]
    topic = f"pt-lines-{partitions}p-{run}"
    produce_input(bootstrap, topic, partitions, lines)
    state_dir = tempfile.mkdtemp(prefix="iqmesh-partitions-")
    checks = dict(counts.most_common(3) + [min(counts.items(), key=lambda kv: kv[1])])
    cmd = [sys.executable, "-m", "loadtest.partitions", "--worker", "--bootstrap", bootstrap,
           "--topic", topic, "--app-id", f"pt-{partitions}p-{run}", "--state-dir", state_dir,
           "-n", str(len(lines)), "--words", str(sum(counts.values())), "--partitions", str(partitions),
           "--checks", json.dumps(checks), "--timeout", str(timeout)]
    for c in configs:
        cmd += ["--config", c]
    if py_spy is not None:
        py_spy.mkdir(parents=True, exist_ok=True)
        out = py_spy / f"{tag}-{partitions}p.speedscope.json"
        cmd = [str(Path(sys.executable).parent / "py-spy"), "record", "--format", "speedscope", "--rate", "200",
               "--idle", "--subprocesses", "-o", str(out), "--", *cmd]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=timeout + 120)
    finally:
        shutil.rmtree(state_dir, ignore_errors=True)
    res = next(_results(p.stdout), None)
    if res is None:
        raise RuntimeError(f"{partitions}-partition run failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="use this broker instead of starting a dev broker")
    ap.add_argument("-n", type=int, default=300_000, help="input lines")
    ap.add_argument("--partitions", default="1,4", help="partition counts to compare (first / last = ratio)")
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--input", choices=["demo", "keys"], default="demo")
    ap.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                    help="a setting for the instance, as `iqmesh run --config` (repeatable)")
    ap.add_argument("--py-spy", type=Path, help="profile each worker with py-spy record into this directory")
    ap.add_argument("--timeout", type=float, default=900.0, help="per variant, seconds")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print each variant's state changes and progress (lines, words) every second")
    # the per-variant process
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    ap.add_argument("--app-id", help=argparse.SUPPRESS)
    ap.add_argument("--state-dir", help=argparse.SUPPRESS)
    ap.add_argument("--words", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--checks", default="{}", help=argparse.SUPPRESS)
    ap.add_argument("--sample-s", type=float, default=1.0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        args.lines = args.n
        args.partitions = int(args.partitions)
        return worker(args)

    counts_wanted = [int(x) for x in args.partitions.split(",")]
    lines = input_lines(args.input, args.n)
    counts = Counter(w for line in lines for w in _split(line))
    n_words = sum(counts.values())
    tmp: Path | None = None
    bootstrap = args.bootstrap
    if not bootstrap:
        tmp = Path(tempfile.mkdtemp(prefix="iqmesh-partitions-broker-"))
        bootstrap = devbroker.start_broker(tmp).bootstrap
    print(f"word count, {args.n} lines ({args.input}, {n_words} words), partitions {counts_wanted}, "
          f"reps {args.reps}, config {args.config or '-'}, broker {bootstrap}", flush=True)
    rows: list[dict[str, Any]] = []
    try:
        for rep in range(args.reps):
            order = counts_wanted if rep % 2 == 0 else counts_wanted[::-1]
            for parts in order:
                r = run_variant(bootstrap, lines, counts, parts, args.config, args.timeout, args.py_spy,
                                f"rep{rep + 1}")
                rows.append(r)
                print(f"  rep {rep + 1} {parts} partition(s): "
                      + (f"{r['lines_per_s']} lines/s, {r['words_per_s']} words/s end to end "
                         f"({r['total_s']} s: first line after {r['startup_s']} s, "
                         f"sub-topology 0 done {r['lines_s']} s later, all counted {r['process_s']} s "
                         f"after the first line: {r['process_lines_per_s']} lines/s, "
                         f"{r['process_words_per_s']} words/s; {r['cpu_s']} CPU s)" if r["ok"]
                         else f"FAILED {r}"), flush=True)
                if args.verbose:
                    print(f"    states {r['states']}\n    timeline (s, lines, words) {r['timeline']}", flush=True)
    finally:
        if tmp is not None:
            devbroker.stop_broker(tmp)
            shutil.rmtree(tmp, ignore_errors=True)

    def med(parts: int, key: str) -> float:
        vals = [float(r[key]) for r in rows if r["partitions"] == parts and r["ok"] and r[key]]
        return statistics.median(vals) if vals else float("nan")

    first, last = counts_wanted[0], counts_wanted[-1]
    print(f"\nmedians of {args.reps} rep(s); records/s = input lines (words) per second")
    print(f"{'partitions':>10} {'end to end':>22} {'total s':>8} {'start-up s':>10} {'processing only':>22}"
          f" {'CPU s':>6}")
    for parts in counts_wanted:
        e2e = f"{med(parts, 'lines_per_s'):.0f} ({med(parts, 'words_per_s'):.0f})"
        proc = f"{med(parts, 'process_lines_per_s'):.0f} ({med(parts, 'process_words_per_s'):.0f})"
        print(f"{parts:>10} {e2e:>22} {med(parts, 'total_s'):>8.2f} {med(parts, 'startup_s'):>10.2f} {proc:>22}"
              f" {med(parts, 'cpu_s'):>6.1f}")
    for label, key in (("end to end", "lines_per_s"), ("processing only", "process_lines_per_s")):
        print(f"ratio {first} / {last} partitions, {label}: {med(first, key) / med(last, key):.2f}")
    return 0 if all(r["ok"] for r in rows) else 1


def _split(line: str) -> list[str]:
    from examples.wordcount import split_words

    return split_words(line)


if __name__ == "__main__":
    sys.exit(main())
