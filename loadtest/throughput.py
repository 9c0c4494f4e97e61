"""Throughput benchmark: iqmesh against its peers, same broker, same input, one run.

    python -m loadtest.throughput [--bootstrap HOST:PORT | --engine dev|kafka] [-n 1000000]
        [--reps 3] [--peer quix kstreams] [--peer-dir DIR] [--wc-lines L]

Without --bootstrap a broker is started for the run (``--engine``: the dev broker or Apache Kafka).
Peers (``--peer``, default ``quix``; ``--no-peer`` for none):
- ``quix``: ``<peer-dir>/run_peer.sh`` (default ../shared/bench next to the repository) produces
  the input topic ``pb-in-N`` (4 partitions, keys user-0..9999) and runs Quix Streams on it;
- ``kstreams``: Kafka Streams on the JVM (``loadtest/peers/kstreams``, built once with Maven),
  every variant, including the word count on ``pb-lines-L`` (L lines of 3-12 words, 4 partitions).
Each variant runs Kafka Streams then iqmesh, rep after rep, on the same topics. Prints the median
records/s of each side (first record processed to the last), the ratios, and per process the CPU
seconds per million input records and the peak RSS (the kernel's figures, ``loadtest.proc_usage``):
whole-run figures, with start-up (and the JVM's JIT compilation) inside. Then the steady state:
records/s and process CPU per input record over the second half of each run, as each process
measures it from its own progress counter (iqmesh and Kafka Streams; the Quix peer prints no such
figure); the ratios there are iqmesh ÷ Kafka Streams for the rate and Kafka Streams ÷ iqmesh for
the CPU, so above 1 is iqmesh ahead on both.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from instance.local import engines

REPO = Path(__file__).resolve().parent.parent
PEERS = ("quix", "kstreams")
LIBS = {"iqmesh": "iqmesh", "kstreams": "kafka-streams", "quix": "quixstreams"}


@dataclass(frozen=True)
class Variant:
    mode: str
    guarantee: str
    cache: bool
    quix: bool  # the Quix peer (../shared/bench) runs it too

    @property
    def label(self) -> str:
        return f"{self.mode} {self.guarantee}" + (" (record cache on)" if self.cache else "")


VARIANTS = [Variant("stateful", "at-least-once", False, True), Variant("stateless", "at-least-once", False, True),
            Variant("stateful", "exactly-once", False, True), Variant("stateful", "at-least-once", True, False),
            Variant("wordcount", "at-least-once", True, False)]


def _results(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("RESULT ")]


def run_quix(peer_dir: Path, bootstrap: str, n: int, reps: int) -> list[dict[str, object]]:
    p = subprocess.run(["bash", str(peer_dir / "run_peer.sh"), bootstrap, str(n), str(reps)],
                       capture_output=True, text=True, timeout=7200)
    if p.returncode != 0:
        raise RuntimeError(f"peer benchmark failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    # bench.py appends one JSON line per run to results.jsonl (with /usr/bin/time -v's figures)
    lines = (peer_dir / "results.jsonl").read_text().splitlines()[-3 * reps:]
    rows = [json.loads(x) for x in lines]
    for r in rows:
        r["lib"] = "quixstreams"
        if r.get("proc_user_s") is not None and r.get("proc_sys_s") is not None:
            r["cpu_s"] = float(r["proc_user_s"]) + float(r["proc_sys_s"])
        r["maxrss_mib"] = r.get("proc_maxrss_mib")
    return rows


def _topic_size(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"tp-size-{uuid.uuid4().hex[:6]}"})
    try:
        md = c.list_topics(topic, timeout=10).topics.get(topic)
        if md is None or md.error is not None:
            return 0
        return sum(hi - lo for lo, hi in (c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                                          for p in md.partitions))
    finally:
        c.close()


def ensure_events(bootstrap: str, topic: str, n: int, peer_dir: Path) -> None:
    """The user-event input, made by the Quix peer's own producer when no Quix run made it."""
    if _topic_size(bootstrap, topic) >= n:
        return
    subprocess.run([sys.executable, str(peer_dir / "produce.py"), "--bootstrap", bootstrap, "--topic", topic,
                    "-n", str(n)], check=True, capture_output=True, timeout=1800)


def ensure_lines(bootstrap: str, topic: str, lines: int) -> int:
    """The word count's input (null keys, 4 partitions); returns its number of words."""
    from examples.wordcount import split_words
    from instance.local.cluster import sample_lines
    from loadtest.partitions import produce_input

    text = sample_lines(lines)
    if _topic_size(bootstrap, topic) < lines:
        produce_input(bootstrap, topic, 4, text)
    return sum(len(split_words(line)) for line in text)


def _measured(bootstrap: str, cmd: list[str], what: str) -> dict[str, object]:
    """One run under ``proc_usage``; ``out_records``: what its output topic holds afterwards (with
    transaction markers under exactly-once), so a fast run that wrote too little shows."""
    from loadtest.proc_usage import run_measured

    u = run_measured(cmd, cwd=REPO, timeout=1800)
    res = _results(u.stdout)
    if not res or not res[0].get("ok"):
        raise RuntimeError(f"{what} failed ({u.returncode}):\n{u.stdout[-2000:]}\n{u.stderr[-3000:]}")
    row = {**res[0], "cpu_s": u.cpu_s, "maxrss_mib": u.maxrss_mib, "wall_s": u.wall_s,
           "out_records": _topic_size(bootstrap, str(res[0]["out_topic"]))}
    print(f"  {row['lib']:14} {what}: {row['rate_first_to_last']} records/s, cpu {u.cpu_s:.1f} s, "
          f"peak RSS {u.maxrss_mib:.0f} MiB, output {row['out_records']} records", flush=True)
    return row


def run_variant(bootstrap: str, v: Variant, topic: str, n: int, target: int, rep: int,
                kstreams: bool) -> list[dict[str, object]]:
    """One rep of one variant: Kafka Streams (when asked) then iqmesh, on the same input."""
    from instance.local.cluster import ensure_topic
    from loadtest.peers import kstreams as ks

    rows = []
    what = f"{v.label} rep{rep}"
    if kstreams:
        out = f"ks-out-{v.mode}-{uuid.uuid4().hex[:8]}"
        ensure_topic(bootstrap, out, 4)
        java = ks.command(bootstrap, topic, n, v.mode, out, v.guarantee, v.cache,
                          target=target - n if v.mode == "wordcount" else None, tag=f"rep{rep}")
        rows.append(_measured(bootstrap, java, what))
    cmd = [sys.executable, "-m", "loadtest.worker", "--bootstrap", bootstrap, "--topic", topic, "-n", str(n),
           "--mode", v.mode, "--guarantee", v.guarantee, "--tag", f"rep{rep}", "--target", str(target)]
    if v.cache and v.mode != "wordcount":
        cmd.append("--cache")
    row = _measured(bootstrap, cmd, what)
    rows.append({**row, "cache": v.cache})
    return rows


def _median(rows: list[dict[str, object]], lib: str, v: Variant, field: str) -> float:
    vals = [float(r[field]) for r in rows  # type: ignore[arg-type]
            if r.get("lib") == lib and r.get("mode") == v.mode and r.get("guarantee") == v.guarantee
            and bool(r.get("cache", False)) == v.cache and r.get(field) is not None]
    return statistics.median(vals) if vals else float("nan")


def _per_million(rows: list[dict[str, object]], lib: str, v: Variant) -> float:
    cpu = _median(rows, lib, v, "cpu_s")
    n = _median(rows, lib, v, "n")
    return cpu / n * 1e6


def report(rows: list[dict[str, object]], libs: list[str]) -> None:
    names = [LIBS[x] for x in libs]
    print("\nmedian records/s (first to last record processed; word count: input lines/s)")
    head = f"{'variant':40}" + "".join(f" {x:>14}" for x in names)
    ratios = [f"iqmesh/{x}" for x in names[1:]]
    print(head + "".join(f" {x:>20}" for x in ratios))
    for v in VARIANTS:
        rates = [_median(rows, lib, v, "rate_first_to_last") for lib in names]
        line = f"{v.label:40}" + "".join(f" {r:>14.0f}" for r in rates)
        print(line + "".join(f" {rates[0] / r:>20.2f}" for r in rates[1:]))
    steady = [x for x in names if any(r.get("lib") == x and r.get("steady_rate") for r in rows)]
    if steady:
        print("\nsteady state (medians; the second half of each run, from the process's own progress "
              "counter and CPU clock):\nrecords/s and CPU µs per input record")
        print(f"{'variant':40}" + "".join(f" {x:>24}" for x in steady)
              + "".join(f" {'iqmesh/' + x + ' rate, cpu':>28}" for x in steady[1:]))
        for v in VARIANTS:
            rate = {x: _median(rows, x, v, "steady_rate") for x in steady}
            cpu = {x: _median(rows, x, v, "steady_cpu_us") for x in steady}
            row = "".join(f" {rate[x]:>12.0f} / {cpu[x]:>6.2f} µs" for x in steady)
            # CPU ratio as peer ÷ iqmesh: above 1, iqmesh spends less per record
            row += "".join(f" {rate['iqmesh'] / rate[x]:>14.2f}, {cpu[x] / cpu['iqmesh']:>11.2f}"
                           for x in steady[1:])
            print(f"{v.label:40}{row}")
    print("\nper process (medians): CPU seconds per million input records / peak RSS MiB")
    print(f"{'variant':40}" + "".join(f" {x:>22}" for x in names))
    for v in VARIANTS:
        cells = [f"{_per_million(rows, lib, v):.1f} s / {_median(rows, lib, v, 'maxrss_mib'):.0f} MiB"
                 for lib in names]
        print(f"{v.label:40}" + "".join(f" {c:>22}" for c in cells))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap")
    ap.add_argument("--engine", choices=("dev", "kafka"), default="dev",
                    help="the broker to start without --bootstrap: dev (noida-db) or kafka (Apache Kafka)")
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--peer", nargs="*", choices=PEERS, default=["quix"],
                    help="the peers to run beside iqmesh (default: quix)")
    ap.add_argument("--peer-dir", default=str(REPO.parent / "shared" / "bench"))
    ap.add_argument("--no-peer", action="store_true", help="only iqmesh (same as --peer with none)")
    ap.add_argument("--wc-lines", type=int, help="the word count's input lines (default n / 10)")
    ap.add_argument("--json", help="append every run's result as one JSON line to this file")
    args = ap.parse_args()
    peers = [] if args.no_peer else list(dict.fromkeys(args.peer))
    peer_dir = Path(args.peer_dir)
    lines = args.wc_lines or max(1, args.n // 10)

    tmp = None
    bootstrap = args.bootstrap
    if not bootstrap:
        tmp = Path(tempfile.mkdtemp(prefix="iqmesh-bench-broker-"))
        bootstrap = engines.start(args.engine, tmp).bootstrap
    try:
        if "kstreams" in peers:
            from loadtest.peers import kstreams as ks

            ks.build()  # before any timing, so a first build is not inside a run
        topic = f"pb-in-{args.n}"
        rows: list[dict[str, object]] = []
        if "quix" in peers:
            print(f"peer (Quix Streams) on {bootstrap}, n={args.n}, reps={args.reps} ...", flush=True)
            rows += run_quix(peer_dir, bootstrap, args.n, args.reps)
        ensure_events(bootstrap, topic, args.n, peer_dir)
        lines_topic = f"pb-lines-{lines}"
        words = ensure_lines(bootstrap, lines_topic, lines)
        who = " and Kafka Streams" if "kstreams" in peers else ""
        print(f"iqmesh{who} on {bootstrap}, n={args.n}, word count {lines} lines ({words} words), "
              f"reps={args.reps} ...", flush=True)
        for rep in range(1, args.reps + 1):
            for v in VARIANTS:
                if v.mode == "wordcount":
                    rows += run_variant(bootstrap, v, lines_topic, lines, lines + words, rep, "kstreams" in peers)
                else:
                    rows += run_variant(bootstrap, v, topic, args.n, args.n, rep, "kstreams" in peers)
        if args.json:
            with open(args.json, "a") as f:
                for r in rows:
                    f.write(json.dumps({**r, "engine": args.engine if tmp else "external"}) + "\n")
        libs = ["iqmesh", *[p for p in ("kstreams", "quix") if p in peers]]
        report(rows, libs)
        v_alo, v_eos = VARIANTS[0], VARIANTS[2]
        alo = _median(rows, "iqmesh", v_alo, "rate_first_to_last")
        eos = _median(rows, "iqmesh", v_eos, "rate_first_to_last")
        print(f"\niqmesh exactly-once / at-least-once (stateful): {eos / alo:.2f}")
        return 0
    finally:
        if tmp is not None:
            engines.stop(tmp)
            shutil.rmtree(tmp, ignore_errors=True)  # the broker's data: GBs after a 1M-record run


if __name__ == "__main__":
    sys.exit(main())
