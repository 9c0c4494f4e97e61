"""``python -m loadtest.k8s_sim smoke --overlay dev``: the rendered StatefulSet of an overlay run
here, as Kubernetes would run it, against a dev broker (noida-db) standing in for the overlay's
Kafka: every pod in its own network namespace with its own address, found by its headless DNS
name; start, counts exact, a rolling update (highest ordinal first, each Ready before the next),
a scale-out, then every pod deleted (SIGTERM, SIGKILL after the grace period). Prints the events
as they happen (stderr) and one JSON summary (stdout). Needs unshare, nsenter and ip (util-linux,
iproute2) and private user namespaces; everything it starts ends with it."""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.manifests import kubectl, render
from loadtest.k8s_sim.namespace import can_isolate, isolated, reexec_isolated
from loadtest.k8s_sim.network import NODE_IP, ClusterNetwork
from loadtest.k8s_sim.statefulset import CLUSTER_DOMAIN, Options, StatefulSetSim, local_commands

K8S = Path(__file__).resolve().parents[2] / "k8s"


class EventLog:
    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: str, pod: str, detail: str) -> None:
        e = {"t": round(time.monotonic() - self.t0, 2), "event": event, "pod": pod, "detail": detail}
        self.events.append(e)
        print(json.dumps(e), file=sys.stderr, flush=True)

    def mark(self, event: str, detail: str = "") -> float:
        self(event, "", detail)
        return time.monotonic() - self.t0


def start_broker(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    """noida-db's Kafka on the node's bridge address (it listens where the overlay's
    KAFKA_BOOTSTRAP name points)."""
    from devtools.broker import find_noida_binary, wait_for_broker

    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(data_dir / "broker.log", "ab")
    proc = subprocess.Popen([find_noida_binary(), "start", "--only", "kafka", "--host", NODE_IP,
                             "--kafka-port", str(port), "--data-dir", str(data_dir)],
                            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir)
    log.close()
    wait_for_broker(f"{NODE_IP}:{port}", timeout=60.0)
    return proc


def wait_counts(seed: str, token: str, expected: collections.Counter[str], timeout: float) -> float:
    """Seconds until every word's count read through ``seed`` is exact."""
    import grpc

    from router.client import QueryClient
    from router.security import Security

    t0 = time.monotonic()
    last: dict[str, Any] = {}
    with QueryClient(seed, timeout=5, security=Security(token=token)) as q:
        while time.monotonic() - t0 < timeout:
            try:
                last = {w: q.get("counts", w).value for w in expected}
            except grpc.RpcError as e:
                last = {"error": str(e.code())}
            if last == dict(expected):
                return time.monotonic() - t0
            time.sleep(0.5)
    wrong = {w: (last.get(w), n) for w, n in expected.items() if last.get(w) != n}
    raise TimeoutError(f"counts not exact within {timeout:.0f} s: {dict(list(wrong.items())[:5]) or last}")


def smoke(args: argparse.Namespace) -> dict[str, Any]:
    from devtools.cluster import ensure_topic, produce, sample_lines
    from examples.wordcount import INPUT_TOPIC, split_words

    rendered = render(K8S / "overlays" / args.overlay)
    root = Path(args.work_dir or tempfile.mkdtemp(prefix="k8s-sim-"))
    log = EventLog()
    net = ClusterNetwork(root / "hosts")
    net.setup()
    env_cm = next(c for c in rendered.of_kind("ConfigMap") if "KAFKA_BOOTSTRAP" in (c.get("data") or {}))
    bootstrap = env_cm["data"]["KAFKA_BOOTSTRAP"]
    hosts = [h.rsplit(":", 1)[0] for h in bootstrap.split(",")]
    port = int(bootstrap.split(",")[0].rsplit(":", 1)[1])
    for h in hosts:
        net.set_name(h, [NODE_IP])
    broker = start_broker(root / "broker", port)
    log.mark("broker ready", bootstrap)
    ensure_topic(bootstrap, INPUT_TOPIC, args.partitions)
    options = Options(root, ["iqmesh"], local_commands(sys.executable),
                      {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(root), "LANG": "C.UTF-8"})
    sts = StatefulSetSim(rendered, "iqmesh", net, options, log)
    out: dict[str, Any] = {"overlay": args.overlay, "work_dir": str(root)}
    try:
        replicas = sts.replicas
        t = time.monotonic()
        sts.scale(replicas, timeout=args.timeout)
        out["all_ready_s"] = round(time.monotonic() - t, 1)
        port_grpc = next(p["containerPort"] for p in sts.container["ports"] if p["name"] == "grpc")
        seed = f"iqmesh-query.{sts.namespace}.svc.{CLUSTER_DOMAIN}:{port_grpc}"
        token = sts.pods[0].env.get("IQMESH_AUTH_TOKEN", "")
        out["application_servers"] = sorted(f"{p.env.get('IQMESH_ADVERTISED_HOST')}:{port_grpc}"
                                            for p in sts.pods.values())
        lines = sample_lines(args.lines)
        expected = collections.Counter(w for line in lines for w in split_words(line))
        produce(bootstrap, INPUT_TOPIC, ((None, line.encode()) for line in lines))
        out["counts_exact_after_start_s"] = round(wait_counts(seed, token, expected, args.timeout), 1)
        log.mark("counts exact")
        t = time.monotonic()
        out["rolling_update_order"] = sts.rolling_update(timeout=args.timeout)
        out["rolling_update_s"] = round(time.monotonic() - t, 1)
        out["counts_exact_after_rolling_update_s"] = round(wait_counts(seed, token, expected, args.timeout), 1)
        log.mark("counts exact")
        t = time.monotonic()
        sts.scale(replicas + 1, timeout=args.timeout)
        out["scale_out_ready_s"] = round(time.monotonic() - t, 1)
        more = sample_lines(args.lines, seed=11)
        expected += collections.Counter(w for line in more for w in split_words(line))
        produce(bootstrap, INPUT_TOPIC, ((None, line.encode()) for line in more))
        out["counts_exact_after_scale_out_s"] = round(wait_counts(seed, token, expected, args.timeout), 1)
        log.mark("counts exact")
        out["restarts"] = {p.name: p.restarts for p in sts.pods.values()}
    finally:
        out["exit_codes"] = sts.close()
        net.close()
        broker.terminate()
        broker.wait(30)
    out["events"] = log.events
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(prog="python -m loadtest.k8s_sim", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("smoke", help="start, count, rolling update, scale out, stop; one JSON summary")
    s.add_argument("--overlay", default="dev", help="k8s/overlays/<name> (default: dev)")
    s.add_argument("--lines", type=int, default=500, help="lines of text per batch")
    s.add_argument("--partitions", type=int, default=6, help="partitions of the input topic")
    s.add_argument("--timeout", type=float, default=180.0, help="seconds per step")
    s.add_argument("--work-dir", help="where claims, pod files and logs go (default: a new temp dir)")
    args = p.parse_args(argv)
    if kubectl() is None:
        print("k8s_sim: error: kubectl is not installed (it renders the overlay)", file=sys.stderr)
        return 2
    if not isolated():
        why = can_isolate()
        if why is not None:
            print(f"k8s_sim: error: {why}", file=sys.stderr)
            return 2
        return reexec_isolated(argv)
    summary = smoke(args)
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
