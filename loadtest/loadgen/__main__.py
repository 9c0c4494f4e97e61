"""``python -m loadtest.loadgen --grpc HOST:PORT --rate 200 --duration 30 --out DIR``: queries a
store under load and writes DIR/result.json (HDR percentiles, errors by status, staleness, one
row per second) and DIR/plot.png. ``--duration 0`` runs until SIGTERM or SIGINT (how
loadtest.scenarios runs it beside its actions); ``--events FILE`` (JSON lines with ``wall``,
``event``, ``pod``) marks those events on the plot."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

from loadtest.loadgen.drive import LoadSpec, LoadSpecError, run_load
from loadtest.loadgen.keys import KeyChooser, KeyError_
from loadtest.loadgen.plot import plot
from loadtest.loadgen.recorder import Recorder
from loadtest.loadgen.targets import GrpcTarget, RestTarget, Target


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest.loadgen", description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--grpc", metavar="SEEDS", help="HOST:PORT,... of instances: gRPC through the routing client")
    where.add_argument("--rest", metavar="URL", help="the REST gateway's base URL (http://host:port)")
    p.add_argument("--store", default="counts", help="store to query (default: %(default)s)")
    p.add_argument("--token", default="", help="bearer token the instances or the gateway require")
    p.add_argument("--keys", help="comma-separated keys (default: the word-count demo's words)")
    p.add_argument("--zipf", type=float, default=0.0, help="Zipf exponent of the key choice; 0: uniform (default)")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--rate", type=float, help="open-loop: requests per second, latency from the intended start")
    how.add_argument("--workers", type=int, help="closed-loop: this many concurrent requesters")
    p.add_argument("--duration", type=float, default=10.0, help="seconds; 0: until SIGTERM/SIGINT (default: 10)")
    p.add_argument("--strict", action="store_true", help="active replicas only (default: allow_stale)")
    p.add_argument("--timeout", type=float, default=10.0, help="deadline of one query, retries included")
    p.add_argument("--max-in-flight", type=int, default=256, help="open-loop: outstanding requests at most")
    p.add_argument("--not-monotonic", action="store_true",
                   help="values may decrease (default: counts, so a fresh answer below an earlier one is stale)")
    p.add_argument("--events", help="JSON lines of events ({wall, event, pod}) to mark on the plot")
    p.add_argument("--out", required=True, help="directory for result.json and plot.png")
    p.add_argument("--title", default="", help="the plot's title")
    return p.parse_args(argv)


def make_target(args: argparse.Namespace) -> Target:
    if args.grpc:
        return GrpcTarget(args.grpc, args.store, args.token, not args.strict, args.timeout)
    return RestTarget(args.rest, args.store, args.token, not args.strict, args.timeout)


def words() -> list[str]:
    from instance.local.cluster import WORDS

    return list(WORDS)


def read_events(path: str | None, started_wall: float) -> list[dict[str, Any]]:
    if not path:
        return []
    out = []
    for line in Path(path).read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            out.append({**e, "t": round(e["wall"] - started_wall, 2)})
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    spec = LoadSpec("closed" if args.workers else "open", rate=args.rate or 100.0, workers=args.workers or 8,
                    duration_s=args.duration or None, max_in_flight=args.max_in_flight)
    keys = KeyChooser(args.keys.split(",") if args.keys else words(), args.zipf)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    target = make_target(args)
    rec = Recorder(monotonic_values=not args.not_monotonic)
    try:
        await run_load(target, spec, keys, rec, stop)
    finally:
        await target.close()
    return {"target": args.grpc or args.rest, "protocol": "grpc" if args.grpc else "rest", "store": args.store,
            "mode": spec.mode, "rate": spec.rate if spec.mode == "open" else None,
            "workers": spec.workers if spec.mode == "closed" else None, "zipf": args.zipf,
            "allow_stale": not args.strict, **rec.summary(), "timeline": rec.timeline()}


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    try:
        result = asyncio.run(main_async(args))
    except (LoadSpecError, KeyError_, ValueError) as e:
        print(f"loadgen: error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "result.json").write_text(json.dumps(result, indent=1))
    plot(result["timeline"], read_events(args.events, result["started_wall"]), out / "plot.png",
         args.title or f"{result['protocol']} {result['mode']}-loop", result)
    print(json.dumps({k: v for k, v in result.items() if k != "timeline"}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
