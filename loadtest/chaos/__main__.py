"""``python -m loadtest.chaos SCENARIO... --runs N``: repeat membership scenarios, print a table.

    python -m loadtest.chaos crash --runs 5 --guarantee at_least_once exactly_once_v2
    python -m loadtest.chaos all --runs 1 --seed 42 --keep-logs /tmp/chaos

Without ``--bootstrap`` a dev broker is started for the invocation (and stopped). Run ``i`` of a
scenario uses seed ``--seed + i``. Prints a Markdown table, then the failing runs with short log
excerpts (or where their logs are, with ``--keep-logs``). Exit status 1 when a run failed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

from loadtest.chaos.report import describe, log_excerpt, table
from loadtest.chaos.result import RunResult
from loadtest.chaos.scenarios import GUARANTEES, SCENARIOS, run_scenario


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m loadtest.chaos", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenarios", nargs="+", choices=[*SCENARIOS, "all"], metavar="SCENARIO",
                    help=f"one or more of {', '.join(SCENARIOS)}, or all")
    ap.add_argument("--runs", type=int, default=1, help="runs of each scenario and guarantee")
    ap.add_argument("--seed", type=int, default=None, help="base seed (default: from the clock; printed)")
    ap.add_argument("--guarantee", nargs="+", choices=GUARANTEES, default=["at_least_once"],
                    help="processing.guarantee (several: each scenario runs under each)")
    ap.add_argument("--bootstrap", help="an existing Kafka-protocol broker (default: start one of --engine)")
    ap.add_argument("--engine", choices=("dev", "kafka"), default="dev",
                    help="the broker to start: dev (noida-db) or kafka (Apache Kafka, resolved with Maven)")
    ap.add_argument("--keep-logs", type=Path, metavar="DIR", help="keep every run's instance logs here")
    ap.add_argument("--lines-per-s", type=float, default=1000.0)
    ap.add_argument("--seconds", type=float, default=16.0, help="how long the input flows")
    ap.add_argument("--settle-timeout", type=float, default=90.0,
                    help="seconds after the input ends to wait for convergence")
    ap.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                    help="extra setting for every instance (repeatable)")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    names = list(SCENARIOS) if "all" in args.scenarios else list(dict.fromkeys(args.scenarios))
    seed = args.seed if args.seed is not None else int(time.time()) % 100_000
    print(f"seed {seed}", flush=True)
    work = args.keep_logs.resolve() if args.keep_logs else Path(tempfile.mkdtemp(prefix="iqmesh-chaos-"))
    work.mkdir(parents=True, exist_ok=True)
    broker_dir = None
    results: list[RunResult] = []
    try:
        bootstrap = args.bootstrap
        if not bootstrap:
            from instance.local import engines

            broker_dir = Path(tempfile.mkdtemp(prefix="iqmesh-chaos-broker-"))
            bootstrap = engines.start(args.engine, broker_dir).bootstrap
            print(f"{args.engine} broker at {bootstrap}", flush=True)
        for name in names:
            for guarantee in args.guarantee:
                for i in range(args.runs):
                    run_dir = work / f"{name}-{guarantee}-{seed + i}"
                    r = run_scenario(name, bootstrap, run_dir, seed + i, guarantee,
                                     lines_per_s=args.lines_per_s, seconds=args.seconds,
                                     settle_timeout=args.settle_timeout, extra_config=tuple(args.config))
                    results.append(r)
                    print(("ok   " if not r.violations() else "FAIL ") + describe(r), flush=True)
    except KeyboardInterrupt:
        print("interrupted; the table covers the finished runs", flush=True)
    finally:
        if broker_dir is not None:
            from instance.local import engines

            engines.stop(broker_dir)
            shutil.rmtree(broker_dir, ignore_errors=True)
    print("\n" + table(results) + "\n", flush=True)
    failed = [r for r in results if r.violations()]
    for r in failed:
        print(f"FAIL {r.scenario} / {r.guarantee} seed {r.seed}: " + "; ".join(r.violations()))
        print(f"  logs: {r.logs_dir}" if args.keep_logs else log_excerpt(r.logs_dir))
        print()
    if not args.keep_logs:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
