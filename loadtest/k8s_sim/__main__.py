"""``python -m loadtest.k8s_sim smoke --overlay dev``: the rendered StatefulSet of an overlay run
here as Kubernetes would run it, against a dev broker (noida-db) standing in for the overlay's
Kafka: every pod in its own network namespace with its own address, found by its headless DNS
name. Steps (``--steps``): start, rolling-update (highest ordinal first, each Ready before the
next), kill (-9; the kubelet restarts the container), scale-out, scale-in; after each, new input
and the time until every count is exact; at the end every pod is deleted (SIGTERM, SIGKILL after
the grace period). Prints the events as they happen (stderr) and one JSON summary (stdout); leaves
nothing behind unless ``--work-dir`` names where to keep its files.
Needs kubectl, unshare, nsenter and ip (util-linux, iproute2) and private user namespaces;
everything it starts ends with it (its own PID namespace)."""

from __future__ import annotations

import argparse
import json
import sys

from loadtest.k8s_sim.manifests import kubectl
from loadtest.k8s_sim.namespace import can_isolate, isolated, reexec_isolated
from loadtest.k8s_sim.smoke import DEFAULT_STEPS, STEPS, smoke


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m loadtest.k8s_sim", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("smoke", help="run steps on the overlay's StatefulSet; one JSON summary")
    s.add_argument("--overlay", default="dev", help="k8s/overlays/<name> (default: dev)")
    s.add_argument("--steps", default=",".join(DEFAULT_STEPS),
                   help=f"comma-separated, from {', '.join(STEPS)} (default: %(default)s)")
    s.add_argument("--lines", type=int, default=500, help="lines of text fed after each step (default: 500)")
    s.add_argument("--partitions", type=int, default=6, help="partitions of the input topic (default: 6)")
    s.add_argument("--timeout", type=float, default=180.0, help="seconds per wait (default: 180)")
    s.add_argument("--work-dir", help="claims, pod files and logs, kept afterwards (default: a new temporary "
                   "directory, removed at the end; the pods' last log lines go to stderr when a step fails)")
    args = p.parse_args(argv)
    steps = tuple(x.strip() for x in args.steps.split(",") if x.strip())
    if not steps or steps[0] != "start" or set(steps) - set(STEPS):
        p.error(f"--steps must start with 'start' and name only {', '.join(STEPS)}")
    if kubectl() is None:
        print("k8s_sim: error: kubectl is not installed (it renders the overlay)", file=sys.stderr)
        return 2
    if not isolated():
        why = can_isolate()
        if why is not None:
            print(f"k8s_sim: error: {why}", file=sys.stderr)
            return 2
        return reexec_isolated(argv)
    print(json.dumps(smoke(args.overlay, steps, args.lines, args.partitions, args.timeout, args.work_dir)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
