"""Throughput benchmark: iqmesh against the Quix Streams peer, same broker, same input, one run.

    python -m loadtest.throughput [--bootstrap HOST:PORT] [-n 1000000] [--reps 3] [--peer-dir DIR]

Without --bootstrap a dev broker is started for the run. The peer side is
``<peer-dir>/run_peer.sh`` (default ../shared/bench next to the repository): it produces the input
topic ``pb-in-N`` (4 partitions, keys user-0..9999) and runs Quix Streams on it; iqmesh then reads
the first N records of the same topic. Prints the median of each variant and the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from devtools import engines

REPO = Path(__file__).resolve().parent.parent
VARIANTS = [("stateful", "at-least-once", False), ("stateless", "at-least-once", False),
            ("stateful", "exactly-once", False), ("stateful", "at-least-once", True)]


def _results(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("RESULT ")]


def run_peer(peer_dir: Path, bootstrap: str, n: int, reps: int) -> list[dict[str, object]]:
    p = subprocess.run(["bash", str(peer_dir / "run_peer.sh"), bootstrap, str(n), str(reps)],
                       capture_output=True, text=True, timeout=7200)
    if p.returncode != 0:
        raise RuntimeError(f"peer benchmark failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    # bench.py appends one JSON line per run to results.jsonl; take this run's lines
    lines = (peer_dir / "results.jsonl").read_text().splitlines()[-3 * reps:]
    return [json.loads(x) for x in lines]


def run_ours(bootstrap: str, topic: str, n: int, reps: int) -> list[dict[str, object]]:
    out = []
    for rep in range(reps):
        for mode, guarantee, cache in VARIANTS:
            cmd = [sys.executable, "-m", "loadtest.worker", "--bootstrap", bootstrap, "--topic", topic,
                   "-n", str(n), "--mode", mode, "--guarantee", guarantee, "--tag", f"rep{rep + 1}"]
            if cache:
                cmd.append("--cache")
            p = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, timeout=1800)
            res = _results(p.stdout)
            if not res:
                raise RuntimeError(f"iqmesh run failed:\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
            print(f"  iqmesh {mode} {guarantee}{' cache' if cache else ''}: "
                  f"{res[0]['rate_first_to_last']} records/s", flush=True)
            out.extend(res)
    return out


def _median(rows: list[dict[str, object]], lib: str, mode: str, guarantee: str, cache: bool = False) -> float:
    vals = [float(r["rate_first_to_last"]) for r in rows  # type: ignore[arg-type]
            if r.get("lib") == lib and r.get("mode") == mode and r.get("guarantee") == guarantee
            and bool(r.get("cache", False)) == cache and r.get("rate_first_to_last")]
    return statistics.median(vals) if vals else float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap")
    ap.add_argument("--engine", choices=("dev", "kafka"), default="dev",
                    help="the broker to start without --bootstrap: dev (noida-db) or kafka (Apache Kafka)")
    ap.add_argument("-n", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--peer-dir", default=str(REPO.parent / "shared" / "bench"))
    ap.add_argument("--no-peer", action="store_true", help="only iqmesh (input must exist: pb-in-N)")
    args = ap.parse_args()

    tmp = None
    bootstrap = args.bootstrap
    if not bootstrap:
        tmp = Path(tempfile.mkdtemp(prefix="iqmesh-bench-broker-"))
        bootstrap = engines.start(args.engine, tmp).bootstrap
    try:
        topic = f"pb-in-{args.n}"
        rows: list[dict[str, object]] = []
        if not args.no_peer:
            print(f"peer (Quix Streams) on {bootstrap}, n={args.n}, reps={args.reps} ...", flush=True)
            rows += [{**r, "lib": "quixstreams"} for r in run_peer(Path(args.peer_dir), bootstrap, args.n,
                                                                  args.reps)]
        print(f"iqmesh on {bootstrap}, n={args.n}, reps={args.reps} ...", flush=True)
        rows += run_ours(bootstrap, topic, args.n, args.reps)
        print("\nmedian records/s (first to last record processed)")
        print(f"{'variant':40} {'iqmesh':>10} {'quix':>10} {'ratio':>7}")
        for mode, guarantee, cache in VARIANTS:
            ours = _median(rows, "iqmesh", mode, guarantee, cache)
            peer = _median(rows, "quixstreams", mode, guarantee)
            label = f"{mode} {guarantee}" + (" (record cache on)" if cache else "")
            print(f"{label:40} {ours:>10.0f} {peer:>10.0f} {ours / peer:>7.2f}")
        alo = _median(rows, "iqmesh", "stateful", "at-least-once")
        eos = _median(rows, "iqmesh", "stateful", "exactly-once")
        print(f"\niqmesh exactly-once / at-least-once (stateful): {eos / alo:.2f}")
        return 0
    finally:
        if tmp is not None:
            engines.stop(tmp)


if __name__ == "__main__":
    sys.exit(main())
