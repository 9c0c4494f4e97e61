"""Where Kafka Streams' time goes per record, by stage: ``loadtest.where_time_goes`` for the JVM peer.

    python -m loadtest.kstreams_time_goes --bootstrap HOST:PORT --topic T -n N
        --mode stateless|stateful|wordcount [--guarantee exactly-once] [--cache] [--target R]
        [--jfr FILE] [--whole-run] [--show-other K]

Runs the Kafka Streams peer (``loadtest.peers.kstreams``) once with a JFR recording (the JDK's
``profile`` settings, with ``jdk.ThreadCPULoad`` each second instead of each 10 s), reads it back with
the JDK's ``jfr print --json`` and files every ``jdk.ExecutionSample`` (a Java stack of each thread
running Java code, each 10 ms) of the stream thread under the stage of the innermost frame that
matches one of ``STAGES`` (the same stages as where_time_goes: ``consume``, ``deserialize``,
``process``, ``cache``, ``store``, ``changelog``, ``serialize``, ``produce``, ``commit``,
``rebalance``; ``other`` when no frame matches). The other threads are reported by group (the
producer's network thread, the JIT compilers, ...).

Only the steady state is counted by default: the second half of the records, the window the peer's
own ``steady_cpu_us`` (process CPU per input record, every thread) covers, placed on the wall clock
from the moment its RESULT line arrives and the run's own timings (``--whole-run``: the whole
recording, start-up and JIT warm-up in, against the same steady CPU figure).

The µs per record are approximations. Each thread's CPU is its share of the process's CPU in the
window (``jdk.ThreadCPULoad`` against ``jdk.CPULoad``, both per second) times ``steady_cpu_us``; what
no Java thread used is GC and the VM's other native threads. Within the stream thread a stage gets
its share of the thread's execution samples times the thread's CPU: ExecutionSample sees only Java
code, so the thread's time in native code (RocksDB's JNI calls, socket reads and writes) and in the
VM is spread over the stages in proportion to their samples: ``store`` is undercounted whenever
RocksDB does real work. Two lines show how much: the stream thread's Java samples × 10 ms against its
CPU (the part the samples saw; above 100% when the thread sat in Java waiting for a CPU on a busy
machine), and its ``jdk.NativeMethodSample`` events by stage (RocksDB's JNI calls are ``store``):
JFR takes one thread in native code each 20 ms, in turn, running or blocked (a socket wait), so that
line says where native time sits, not how much CPU it is. Without CPU-load events in the window, a
stage gets its share of all the Java samples times the process's CPU (GC and JIT compilation then
spread over every stage).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: jdk.ExecutionSample's period in the JDK's ``profile`` settings
SAMPLE_PERIOD_S = 0.010
#: JFR keeps 64 frames by default and ``jfr print`` shows 5 (outermost frames are cut first)
STACK_DEPTH = 192

#: (stage, regexes on a frame "package.Class.method"), tried on each frame from the innermost
#: outwards: the first frame that matches any of them files the sample (at one frame the stages are
#: tried in this order: a serde or a cache in the state package is not the store). Library internals
#: that serve several stages (the network client, record batches, Jackson, java.*, metrics) match
#: nothing, so the frame that called them decides.
STAGES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("commit", (r"\.TaskManager\.(commit|maybeCommit)", r"\.TaskExecutor\.commit",
                r"\.StreamThread\.maybeCommit", r"\.StreamsProducer\.commitTransaction",
                r"(KafkaProducer|StreamsProducer|TransactionManager)\.(sendOffsetsToTransaction|commitTransaction"
                r"|beginTransaction|maybeBeginTransaction)",
                r"Consumer\.commit(Sync|Async)", r"ConsumerCoordinator\.commit",
                r"\.StreamTask\.(prepareCommit|postCommit|commitNeeded|committableOffsetsAndMetadata)")),
    ("rebalance", (r"\.StreamsPartitionAssignor\.", r"\.StreamsRebalanceListener\.",
                   r"ConsumerCoordinator\.(onJoin|onLeave|performAssignment)", r"\.TaskManager\.handleAssignment")),
    ("deserialize", (r"Deserializer\w*\.", r"\.deserialize(Key|Value)?$", r"\.lambda\$deserializer\$",
                     r"\.RecordDeserializer\.")),
    ("serialize", (r"Serializer\w*\.", r"\.serialize(Key|Value)?$", r"\.lambda\$serializer\$", r"\.StateSerdes\.raw")),
    ("changelog", (r"\.ChangeLogging\w*\.", r"\.logChange\b", r"\.StoreChangeLogger\.")),
    ("cache", (r"\.Caching\w*Store\.", r"\.ThreadCache\.", r"\.NamedCache\.", r"\.LRUCacheEntry\.",
               r"\.ContextualRecord\.")),
    ("store", (r"^org\.rocksdb\.", r"\.RocksDB\w*\.", r"\.Metered\w*Store\.", r"\.KeyValueStoreWrapper\.",
               r"^org\.apache\.kafka\.streams\.state\.internals\.")),
    ("produce", (r"\.RecordCollectorImpl\.(send|flush)", r"\.StreamsProducer\.(send|flush)",
                 r"\.KafkaProducer\.(send|doSend|flush|partition|waitOnMetadata)", r"\.RecordAccumulator\.",
                 r"\.BuiltInPartitioner\.", r"\.SinkNode\.")),
    ("consume", (r"Consumer\.poll", r"\.(Abstract)?Fetch(er|Collector|Buffer)\.", r"\.CompletedFetch\.",
                 r"\.StreamThread\.(pollRequests|addRecordsToTasks|pollPhase)", r"\.StreamTask\.addRecords",
                 r"\.PartitionGroup\.addRawRecords", r"\.RecordQueue\.addRawRecords")),
    ("process", (r"\.ProcessorNode\.", r"\.StreamTask\.(process|doProcess|maybeProcess|isProcessable|maybePunctuate)",
                 r"\.Task(Executor|Manager)\.(process|punctuate)", r"\.PunctuationQueue\.",
                 r"\.StreamThread\.processRecords",
                 r"\.ProcessorContextImpl\.forward", r"\.AbstractProcessorContext\.",
                 r"^org\.apache\.kafka\.streams\.kstream\.internals\.", r"\.PartitionGroup\.nextRecord",
                 r"\.RecordQueue\.poll", r"^iqmesh\.bench\.KStreamsBench")),
)
_COMPILED = tuple((stage, tuple(re.compile(p) for p in pats)) for stage, pats in STAGES)

#: the thread groups outside the stream thread: (group, regex on the thread's name), first match
THREAD_GROUPS: tuple[tuple[str, str], ...] = (
    ("producer network thread", r"kafka-producer-network-thread"),
    ("consumer heartbeat thread", r"heartbeat"),
    ("consumer background thread", r"consumer_background_thread|ConsumerNetworkThread"),
    ("state cleaner", r"CleanupThread|StateDirCleaner|cleanup"),
    ("state updater thread", r"StateUpdater"),
    ("admin client thread", r"kafka-admin-client-thread"),
    ("JIT compiler threads", r"CompilerThread"),
    ("JFR", r"^JFR "),
    ("JVM service threads", r"^(Sweeper thread|Monitor Deflation Thread|Common-Cleaner|Reference Handler|Finalizer"
                            r"|Signal Dispatcher|Service Thread|Notification Thread|process reaper)$"),
    ("main", r"^main$"),
)


def frame_text(frame: dict[str, object]) -> str:
    """``package.Class.method`` of one frame of ``jfr print --json``."""
    method = frame["method"]
    assert isinstance(method, dict)
    cls = str(method["type"]["name"]).replace("/", ".")
    return sys.intern(f"{cls}.{method['name']}")


def stage_of(frames: Sequence[str]) -> str:
    """The stage of one stack, its frames innermost first (JFR's order)."""
    for frame in frames:
        for stage, pats in _COMPILED:
            if any(p.search(frame) for p in pats):
                return stage
    return "other"


def is_stream_thread(name: str) -> bool:
    return "StreamThread" in name and "producer-network-thread" not in name


def thread_group(name: str) -> str:
    """The group of a thread that is not the stream thread: its name without ids or numbers."""
    for group, pat in THREAD_GROUPS:
        if re.search(pat, name):
            return group
    return re.sub(r"\d+", "N", re.sub(r"ks-bench-[0-9a-f]{8}-?", "", name))


def parse_time(text: str) -> float:
    """Seconds since the epoch of a JFR timestamp (``2026-01-02T03:04:05.123456789Z``)."""
    m = re.fullmatch(r"(.+T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:?\d\d)?", text)
    if m is None:
        raise ValueError(f"not a JFR timestamp: {text!r}")
    zone = "+00:00" if m.group(3) in (None, "Z") else m.group(3)
    return datetime.fromisoformat(m.group(1) + zone).timestamp() + float("0." + (m.group(2) or "0"))


def iter_events(stream: Iterator[str]) -> Iterator[dict[str, object]]:
    """The events of ``jfr print --json`` one by one, without holding the whole document (a
    recording's samples print to hundreds of MB of JSON)."""
    dec = json.JSONDecoder()
    buf, pos, started = "", 0, False
    for chunk in stream:
        buf = buf[pos:] + chunk
        pos = 0
        if not started:
            m = re.search(r'"events"\s*:\s*\[', buf)
            if m is None:
                continue
            pos, started = m.end(), True
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(buf) or buf[pos] == "]":
                break
            try:
                event, end = dec.raw_decode(buf, pos)
            except json.JSONDecodeError:
                break  # incomplete: read more
            pos = end
            yield event
    rest = buf[pos:].strip()
    if not started or not rest.startswith("]"):
        raise ValueError(f"jfr print's JSON ended early or in an unexpected shape: {rest[:200]!r}")


def jfr_tool() -> str:
    """The JDK's ``jfr``: on PATH, else beside the real path of ``java``."""
    found = shutil.which("jfr")
    if found:
        return found
    java = shutil.which("java")
    if java:
        beside = Path(os.path.realpath(java)).parent / "jfr"
        if beside.is_file():
            return str(beside)
    raise RuntimeError("the JDK's jfr tool was found neither on PATH nor beside java (a JRE lacks it: "
                       "Debian's openjdk-17-jdk-headless has it)")


@dataclass(frozen=True)
class Event:
    """What this module reads of one JFR event: its kind, time (seconds since the epoch) and thread,
    a sample's frames (``package.Class.method``, innermost first), a CPU-load event's load (user +
    system, a fraction of all the machine's CPUs)."""

    kind: str
    at: float
    thread: str
    frames: tuple[str, ...] = ()
    load: float = 0.0


def compact(ev: dict[str, Any]) -> Event:
    kind = str(ev.get("type"))
    values = ev["values"]
    thread = values.get("sampledThread") or values.get("eventThread") or {}
    name = str(thread.get("javaName") or thread.get("osName") or "?")
    frames = tuple(frame_text(f) for f in (values.get("stackTrace") or {}).get("frames", []))
    if kind == "jdk.CPULoad":
        load = float(values["jvmUser"]) + float(values["jvmSystem"])
    else:
        load = float(values.get("user", 0.0)) + float(values.get("system", 0.0))
    return Event(kind, parse_time(values["startTime"]), name, frames, load)


def events_of(stream: Iterator[str]) -> list[Event]:
    """The events of ``jfr print --json``'s text, in time order (jfr prints them chunk by chunk,
    thread buffer by thread buffer)."""
    return sorted((compact(e) for e in iter_events(stream)), key=lambda e: e.at)


@dataclass
class Breakdown:
    stream: Counter[str] = field(default_factory=Counter)  # stream-thread execution samples per stage
    others: Counter[str] = field(default_factory=Counter)  # other threads' execution samples per group
    other_frames: Counter[str] = field(default_factory=Counter)  # innermost frames of "other"
    other_stacks: Counter[tuple[str, ...]] = field(default_factory=Counter)  # their inner frames
    native: Counter[str] = field(default_factory=Counter)  # the stream thread's native samples per stage
    outside: int = 0  # execution samples outside the window
    # CPU in the window, in "load × seconds" (a fraction of all the machine's CPUs over time): per
    # thread group ("stream thread" for the stream thread) and the whole process
    thread_cpu: dict[str, float] = field(default_factory=dict)
    process_cpu: float = 0.0

    @property
    def total(self) -> int:
        return sum(self.stream.values()) + sum(self.others.values())


def group_of(name: str) -> str:
    return "stream thread" if is_stream_thread(name) else thread_group(name)


def _overlap(start: float, end: float, window: tuple[float, float] | None) -> float:
    if window is None:
        return end - start
    return max(0.0, min(end, window[1]) - max(start, window[0]))


def breakdown(events: Iterable[Event], window: tuple[float, float] | None = None,
              load_period_s: float = 1.0) -> Breakdown:
    """Files the execution samples in ``window`` (seconds since the epoch; None: all), the stream
    thread's native-method samples apart, and sums the CPU loads over the window. ``events`` in time
    order: a CPU-load event covers the time since the round before it (``load_period_s`` for the
    first; JFR stamps all the threads of one ThreadCPULoad round alike), and JFR's own figure says so
    (the load is the CPU since the thread's last event over the time since the previous round)."""
    b = Breakdown()
    rounds: dict[str, tuple[float, float]] = {}  # kind -> (start, end) of its latest round
    for ev in events:
        kind, at, name, frames = ev.kind, ev.at, ev.thread, list(ev.frames)
        if kind in ("jdk.ThreadCPULoad", "jdk.CPULoad"):
            start, end = rounds.get(kind, (at - load_period_s, at - load_period_s))
            if at > end:  # a new round
                start, end = end, at
                rounds[kind] = (start, end)
            span = _overlap(start, end, window)
            if kind == "jdk.CPULoad":
                b.process_cpu += ev.load * span
            else:
                g = group_of(name)
                b.thread_cpu[g] = b.thread_cpu.get(g, 0.0) + ev.load * span
            continue
        inside = window is None or window[0] <= at <= window[1]
        if kind == "jdk.NativeMethodSample":
            if inside and is_stream_thread(name):
                b.native[stage_of(frames)] += 1
            continue
        if kind != "jdk.ExecutionSample":
            continue
        if not inside:
            b.outside += 1
        elif not is_stream_thread(name):
            b.others[thread_group(name)] += 1
        else:
            stage = stage_of(frames)
            b.stream[stage] += 1
            if stage == "other" and frames:
                b.other_frames[frames[0]] += 1
                b.other_stacks[tuple(frames[:12])] += 1
    return b


def settings(folder: Path) -> str:
    """The JDK's ``profile`` settings with ThreadCPULoad each second (``profile`` itself when its
    file is not where the JDK keeps it)."""
    java = shutil.which("java")
    jfc = Path(os.path.realpath(java)).parent.parent / "lib" / "jfr" / "profile.jfc" if java else None
    if jfc is None or not jfc.is_file():
        return "profile"
    text, n = re.subn(r'(<event name="jdk\.ThreadCPULoad">.*?<setting name="period">)[^<]*(</setting>)',
                      r"\g<1>1 s\g<2>", jfc.read_text(), flags=re.S)
    if n != 1:
        return "profile"
    out = folder / "profile-threadcpu-1s.jfc"
    out.write_text(text)
    return str(out)


def read_recording(path: Path) -> list[Event]:
    cmd = [jfr_tool(), "print", "--json", "--stack-depth", str(STACK_DEPTH), "--events",
           "jdk.ExecutionSample,jdk.NativeMethodSample,jdk.ThreadCPULoad,jdk.CPULoad", str(path)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        out = proc.stdout
        assert out is not None
        try:
            events = events_of(iter(lambda: out.read(1 << 20), ""))
        except ValueError as exc:
            err = proc.stderr.read() if proc.stderr else ""
            raise RuntimeError(f"{' '.join(cmd)}: {exc}; {err[-2000:]}") from exc
        err = proc.stderr.read() if proc.stderr else ""
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {err[-2000:]}")
    return events


def run_peer(cmd: list[str], timeout_s: float) -> tuple[dict[str, Any] | None, float, str]:
    """Runs the peer: its RESULT, the wall-clock moment that line arrived, and its output's tail."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    err: list[str] = []
    drain = threading.Thread(target=lambda: err.extend(proc.stderr or []), daemon=True)
    drain.start()
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    result, at, out = None, 0.0, []
    try:
        for line in proc.stdout or []:
            if line.startswith("RESULT ") and result is None:
                at = time.time()
                result = json.loads(line[7:])
            out.append(line)
        proc.wait()
    finally:
        timer.cancel()
        drain.join(5)
    return result, at, "".join(out[-30:]) + "".join(err[-30:])


def steady_window(result: dict[str, Any], result_at: float) -> tuple[float, float]:
    """The wall-clock span of the second half of the records: from the peer's figures, back from
    the moment its RESULT line arrived (it prints right after closing Kafka Streams)."""
    n = int(result["n"])
    first_to_last = float(result["first_to_last_s"])
    close_s = n / float(result["rate_incl_final_commit"]) - first_to_last
    last = result_at - close_s
    second = n - (n + 1) // 2
    return last - second / float(result["steady_rate"]), last


def report(result: dict[str, Any], b: Breakdown, window: tuple[float, float] | None,
           show_other: int = 0) -> None:
    """The tables: the stream thread by stage, the other threads by group."""
    cpu_us = float(result["steady_cpu_us"])
    total = b.total or 1
    stream_n = sum(b.stream.values()) or 1
    span = f"the steady state, {window[1] - window[0]:.2f} s" if window else "the whole run"
    print(f"kafka-streams {result.get('version')} {result['mode']} {result['guarantee']}"
          f"{' cache on' if result.get('cache') else ''}: steady {result['steady_rate']} records/s, "
          f"{cpu_us} µs CPU per input record (process); {span}: {b.total} Java samples "
          f"({b.outside} outside), {sum(b.stream.values())} of them the stream thread's")
    per: dict[str, float] = {}
    if b.process_cpu > 0 and b.thread_cpu:
        per = {g: cpu_us * c / b.process_cpu for g, c in b.thread_cpu.items()}
        if window:  # the window's placement, checked: JFR's CPU in it against the peer's own figure
            n = int(result["n"])
            print(f"process CPU in the window: {b.process_cpu * (os.cpu_count() or 1):.2f} s by jdk.CPULoad "
                  f"× {os.cpu_count()} CPUs, {cpu_us * (n - (n + 1) // 2) / 1e6:.2f} s by the peer")
        stream_us = per.get("stream thread", 0.0)
        print(f"stream thread: {stream_us:.2f} µs/record (its share of the process's CPU, jdk.ThreadCPULoad), "
              "split by its Java samples")
        if stream_us > 0:
            records = int(result["n"]) - (int(result["n"]) + 1) // 2 if window else int(result["n"])
            java_us = sum(b.stream.values()) * SAMPLE_PERIOD_S * 1e6 / records
            print(f"  its Java samples × {SAMPLE_PERIOD_S * 1e3:.0f} ms = {java_us:.2f} µs/record "
                  f"({100 * java_us / stream_us:.0f}% of its CPU): the rest is native code (RocksDB's JNI calls, "
                  "sockets) or the VM (above 100%: the thread was sampled in Java while waiting for a CPU)")
    else:
        stream_us = cpu_us * stream_n / total
        print(f"stream thread: no CPU-load events in the window: its share of all the Java samples × the "
              f"process's {cpu_us} µs = {stream_us:.2f} µs/record, split by its samples")
    print(f"{'stage':12} {'samples':>7} {'share':>6} {'≈ µs/record':>12}")
    for stage, k in b.stream.most_common():
        print(f"{stage:12} {k:7} {100 * k / stream_n:5.1f}% {stream_us * k / stream_n:12.2f}")
    print(f"other threads ({'CPU from jdk.ThreadCPULoad' if per else 'share of the Java samples × process CPU'})")
    print(f"{'group':32} {'samples':>7} {'≈ µs/record':>12}")
    groups = sorted((set(b.others) | set(per)) - {"stream thread"},
                    key=lambda g: -(per.get(g, 0.0) if per else b.others[g]))
    for g in groups:
        us = per.get(g, 0.0) if per else cpu_us * b.others[g] / total
        if us < 0.005 and not b.others[g]:
            continue
        print(f"{g[:32]:32} {b.others[g]:7} {us:12.2f}")
    if per:
        print(f"{'GC, VM threads (process - Java)':32} {'-':>7} {cpu_us - sum(per.values()):12.2f}")
    if b.native:
        print("stream thread in native code (jdk.NativeMethodSample: one thread in native code each 20 ms, in "
              "turn, running or waiting, so not CPU): "
              + ", ".join(f"{stage} {k}" for stage, k in b.native.most_common()))
    if show_other and b.other_frames:
        print(f"stream thread's unclassified samples, innermost frames (top {show_other}):")
        for frame, k in b.other_frames.most_common(show_other):
            print(f"  {k:6} {frame}")
        print("  most frequent unclassified stacks (inner frames first):")
        for stack, k in b.other_stacks.most_common(min(show_other, 5)):
            print(f"  {k:6} " + " < ".join(stack))


def _words(lines: int) -> int:
    """The words of the word count's input as loadtest.throughput writes it (``ensure_lines``)."""
    from examples.wordcount import split_words
    from instance.local.cluster import sample_lines

    return sum(len(split_words(line)) for line in sample_lines(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("-n", type=int, required=True, help="input records (word count: input lines)")
    ap.add_argument("--mode", choices=("stateless", "stateful", "wordcount"), required=True)
    ap.add_argument("--guarantee", choices=("at-least-once", "exactly-once"), default="at-least-once")
    ap.add_argument("--cache", action="store_true")
    ap.add_argument("--target", type=int,
                    help="records to count before stopping, as for loadtest.worker (word count: lines + words; "
                         "default there: those of the lines loadtest.throughput writes to pb-lines-N)")
    ap.add_argument("--tag", default="")
    ap.add_argument("--timeout-s", type=int, default=900)
    ap.add_argument("--jfr", help="keep the recording in this file (default: a temporary one)")
    ap.add_argument("--whole-run", action="store_true", help="count every sample, start-up and warm-up too")
    ap.add_argument("--show-other", type=int, default=0, metavar="K",
                    help="print the K most frequent innermost frames of unclassified stream-thread samples")
    args = ap.parse_args()

    from instance.local.cluster import ensure_topic
    from loadtest.peers import kstreams as ks

    with tempfile.TemporaryDirectory(prefix="kstreams-jfr-") as tmp:
        rec = Path(args.jfr).resolve() if args.jfr else Path(tmp) / "peer.jfr"
        out = f"ks-out-{args.mode}-{uuid.uuid4().hex[:8]}"
        ensure_topic(args.bootstrap, out, 4)
        jvm = [f"-XX:StartFlightRecording=filename={rec},settings={settings(Path(tmp))}",
               f"-XX:FlightRecorderOptions=stackdepth={STACK_DEPTH}"]
        target = args.target
        if args.mode == "wordcount":  # the peer counts the words only (after its repartition topic)
            target = (target or args.n + _words(args.n)) - args.n
        cmd = ks.command(args.bootstrap, args.topic, args.n, args.mode, out, args.guarantee, args.cache,
                         target=target, tag=args.tag, timeout_s=args.timeout_s, jvm_opts=jvm)
        result, at, tail = run_peer(cmd, args.timeout_s + 120)
        if result is None or not result.get("ok") or result.get("steady_cpu_us") is None:
            print(f"the peer failed:\n{tail[-4000:]}", file=sys.stderr)
            return 1
        window = None if args.whole_run else steady_window(result, at)
        b = breakdown(read_recording(rec), window)
    report(result, b, window, args.show_other)
    return 0


if __name__ == "__main__":
    sys.exit(main())
