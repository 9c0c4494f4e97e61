"""``python -m loadtest.scenarios --engine dev|kafka [--scenarios steady,rolling-update,scale,kill,node-lost]
--out DIR``: each scenario on a fresh broker and a fresh StatefulSet (the dev overlay, run by
loadtest.k8s_sim in private namespaces), ingest and queries running throughout; per scenario
DIR/<engine>-<scenario>.json and .png, and DIR/<engine>-summary.md (the table). ``--smoke``:
seconds and small rates (what CI runs). Needs kubectl, unshare, nsenter, ip; ``--engine kafka``
Java 17 and Maven (instance/local/kafka_broker.py)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.manifests import kubectl
from loadtest.k8s_sim.namespace import MARKER, UNSHARE, can_isolate, isolated
from loadtest.scenarios import SCENARIOS
from loadtest.scenarios.report import table
from loadtest.scenarios.run import Settings, run_scenario

#: CI: small rates, seconds of load, and the overlay's session timeout (90 s): a killed pod or one
#: whose node was lost is back as the same static member long before it would be dropped, however
#: slowly a busy machine restarts it (a scale-in does not wait for it: a pod the StatefulSet no
#: longer counts leaves the group at close, instance/runtime/departure.py)
SMOKE = Settings(query_rate=20.0, ingest_rate=10.0, quiet_s=3.0, steady_s=5.0, timeout=150.0)


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest.scenarios", description=__doc__.split("\n\n")[0])
    p.add_argument("--engine", choices=("dev", "kafka"), default="dev", help="broker (default: dev)")
    p.add_argument("--scenarios", default=",".join(SCENARIOS), help="comma-separated (default: all)")
    p.add_argument("--protocol", choices=("grpc", "rest"), default="grpc",
                   help="queries through the routing client or the REST gateway (default: grpc)")
    p.add_argument("--smoke", action="store_true", help="seconds and small rates (CI)")
    p.add_argument("--query-rate", type=float, help=f"queries/s, open-loop (default: {Settings.query_rate:g})")
    p.add_argument("--ingest-rate", type=float, help=f"input lines/s (default: {Settings.ingest_rate:g})")
    p.add_argument("--quiet", type=float, help=f"seconds of load before and after the action "
                                               f"(default: {Settings.quiet_s:g})")
    p.add_argument("--steady", type=float, help=f"steady: seconds of nothing (default: {Settings.steady_s:g})")
    p.add_argument("--guarantee", choices=("exactly_once_v2", "at_least_once"),
                   help="processing.guarantee put in the rendered app.properties (default: exactly_once_v2)")
    p.add_argument("--group-protocol", choices=("classic", "consumer", "streams"),
                   help="group.protocol put in the rendered app.properties (default: the overlay's, classic)")
    p.add_argument("--session-timeout-ms", type=int,
                   help="session.timeout.ms put in the rendered app.properties (default: the overlay's)")
    p.add_argument("--membership", choices=("static", "dynamic"),
                   help="static (the manifests' group.instance.id = pod name, default) or dynamic")
    p.add_argument("--timeout", type=float, help=f"seconds per wait (default: {Settings.timeout:g})")
    p.add_argument("--out", required=True, help="directory for the JSON results, plots and table")
    p.add_argument("--work-dir", help="claims, logs (default: a new temporary directory)")
    p.add_argument("--one", help=argparse.SUPPRESS)  # the isolated child: run this scenario
    args = p.parse_args(argv)
    names = [x.strip() for x in args.scenarios.split(",") if x.strip()]
    unknown = sorted(set(names) - set(SCENARIOS))
    if unknown or not names:
        p.error(f"--scenarios: unknown {unknown}; choose from {', '.join(SCENARIOS)}")
    args.names = names
    return args


def settings_of(args: argparse.Namespace) -> Settings:
    s = replace(SMOKE if args.smoke else Settings(), engine=args.engine, protocol=args.protocol)
    for field, value in (("query_rate", args.query_rate), ("ingest_rate", args.ingest_rate),
                         ("quiet_s", args.quiet), ("steady_s", args.steady), ("guarantee", args.guarantee),
                         ("timeout", args.timeout), ("session_timeout_ms", args.session_timeout_ms),
                         ("membership", args.membership), ("group_protocol", args.group_protocol)):
        if value is not None:
            s = replace(s, **{field: value})
    return s


def child(args: argparse.Namespace) -> int:
    """Inside the namespaces: one scenario, its JSON result written to --out."""
    out, work = Path(args.out), Path(args.work_dir)
    result = run_scenario(args.one, settings_of(args), work / args.one, out)
    (out / f"{args.engine}-{args.one}.json").write_text(json.dumps(result, indent=1))
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.one:
        if not isolated():
            print("loadtest.scenarios: error: --one runs inside the simulator's namespaces only", file=sys.stderr)
            return 2
        return child(args)
    why = "kubectl is not installed (it renders the overlay)" if kubectl() is None else can_isolate()
    if why is not None:
        print(f"loadtest.scenarios: error: {why}", file=sys.stderr)
        return 2
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="iqmesh-scenarios-")).resolve()
    results: list[dict[str, Any]] = []
    failed = []
    for name in args.names:
        print(f"loadtest.scenarios: {name} on {args.engine} (work dir {work / name})", file=sys.stderr, flush=True)
        (out / f"{args.engine}-{name}.json").unlink(missing_ok=True)
        rc = subprocess.run([*UNSHARE, sys.executable, "-m", "loadtest.scenarios", *argv, "--one", name,
                             "--out", str(out), "--work-dir", str(work)],
                            env={**os.environ, MARKER: "1"}).returncode
        path = out / f"{args.engine}-{name}.json"
        if rc != 0 or not path.exists():
            failed.append(name)
            results.append({"scenario": name, "engine": args.engine, "error": f"exit {rc}; logs in {work / name}"})
            continue
        results.append(json.loads(path.read_text()))
    md = table(results)
    (out / f"{args.engine}-summary.md").write_text(md)
    print(md)
    print(json.dumps({"settings": asdict(settings_of(args)), "failed": failed}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
