"""The smoke run of the simulator: the overlay's StatefulSet on a dev broker, word count input,
and steps a Kafka Streams team asks about (start, rolling update, kill -9, scale out, scale in),
each followed by "are the counts exact, and how long until they are". Its files (claims, pod
logs, the broker's data) go to ``work_dir`` when given and are kept; otherwise to a temporary
directory removed at the end, the pods' last log lines printed to stderr first when a step failed."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from loadtest.k8s_sim.manifests import Rendered, pod_template, render
from loadtest.k8s_sim.network import NODE_IP, ClusterNetwork
from loadtest.k8s_sim.statefulset import CLUSTER_DOMAIN, Options, StatefulSetSim, local_commands

K8S = Path(__file__).resolve().parents[2] / "k8s"
STEPS = ("start", "rolling-update", "kill", "scale-out", "scale-in")
DEFAULT_STEPS = STEPS


class EventLog:
    """Timestamped events (seconds from the start), printed as JSON lines to stderr."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: str, pod: str, detail: str) -> None:
        e = {"t": round(time.monotonic() - self.t0, 2), "event": event, "pod": pod, "detail": detail,
             **self.extra()}
        self.events.append(e)
        print(json.dumps(e), file=sys.stderr, flush=True)

    def extra(self) -> dict[str, Any]:
        """More fields of an event, set before it is shared (pods log from threads of their own)."""
        return {}

    def mark(self, event: str, detail: str = "") -> None:
        self(event, "", detail)


def start_broker(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    """noida-db's Kafka on the node's bridge address, where the overlay's KAFKA_BOOTSTRAP names
    point."""
    from instance.local.broker import find_noida_binary, wait_for_broker

    data_dir.mkdir(parents=True, exist_ok=True)
    with open(data_dir / "broker.log", "ab") as log:
        proc = subprocess.Popen([find_noida_binary(), "start", "--only", "kafka", "--host", NODE_IP,
                                 "--kafka-port", str(port), "--data-dir", str(data_dir)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=data_dir)
    wait_for_broker(f"{NODE_IP}:{port}", timeout=60.0)
    return proc


def wait_counts(seed: str, token: str, expected: collections.Counter[str], timeout: float) -> float:
    """Seconds until every word's count, read through ``seed`` (up-to-date actives only), is exact."""
    import grpc

    from kernel.security import Security
    from router.client.sync_client import QueryClient

    t0 = time.monotonic()
    last: dict[str, Any] = {}
    with QueryClient(seed, timeout=5, security=Security(token=token)) as q:
        while time.monotonic() - t0 < timeout:
            try:
                last = {w: q.get("counts", w).value for w in expected}
            except grpc.RpcError as e:
                last = {"error": f"{e.code().name if isinstance(e, grpc.Call) else e}"}
            if last == dict(expected):
                return time.monotonic() - t0
            time.sleep(0.5)
    wrong = {w: (last.get(w), n) for w, n in expected.items() if last.get(w) != n}
    raise TimeoutError(f"counts not exact within {timeout:.0f} s (got, want): {dict(list(wrong.items())[:5]) or last}")


def wait_committed(bootstrap: str, group: str, topics: list[str], timeout: float) -> float:
    """Seconds until ``group`` has committed every partition of ``topics`` up to its end: nothing
    read is left to process again, so a kill now loses and doubles nothing, even at-least-once."""
    from confluent_kafka import Consumer, TopicPartition

    from kernel.kafka_log import client_logging

    t0 = time.monotonic()
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                  **client_logging()})
    try:
        md = c.list_topics(timeout=10)
        tps = [TopicPartition(t, p) for t in topics for p in md.topics[t].partitions]
        while True:
            marks = [c.get_watermark_offsets(tp, timeout=10) for tp in tps]
            done = [tp.offset for tp in c.committed(tps, timeout=10)]
            behind = {f"{tp.topic}-{tp.partition}": (d, high)
                      for tp, d, (low, high) in zip(tps, done, marks, strict=True) if high > low and d < high}
            if not behind:
                return time.monotonic() - t0
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{group} has not committed up to the end within {timeout:.0f} s: {behind}")
            time.sleep(0.2)
    finally:
        c.close()


class Smoke:
    def __init__(self, rendered: Rendered, root: Path, lines: int, partitions: int, timeout: float) -> None:
        self.rendered, self.root, self.lines, self.partitions, self.timeout = rendered, root, lines, partitions, timeout
        self.log = EventLog()
        self.net = ClusterNetwork(root / "hosts")
        env = next(c for c in rendered.of_kind("ConfigMap") if "KAFKA_BOOTSTRAP" in (c.get("data") or {}))["data"]
        self.bootstrap = env["KAFKA_BOOTSTRAP"]
        self.expected: collections.Counter[str] = collections.Counter()
        self.batches = 0
        self.out: dict[str, Any] = {"work_dir": str(root)}
        self.broker: subprocess.Popen[bytes] | None = None
        self.sts: StatefulSetSim | None = None

    def run(self, steps: tuple[str, ...]) -> dict[str, Any]:
        from examples.wordcount import INPUT_TOPIC
        from instance.local.cluster import ensure_topic

        self.net.setup()
        for hostport in self.bootstrap.split(","):
            self.net.set_name(hostport.rsplit(":", 1)[0], [NODE_IP])
        self.broker = start_broker(self.root / "broker", int(self.bootstrap.split(",")[0].rsplit(":", 1)[1]))
        self.log.mark("broker ready", self.bootstrap)
        ensure_topic(self.bootstrap, INPUT_TOPIC, self.partitions)
        options = Options(self.root, ["iqmesh"], local_commands(sys.executable),
                          {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "LANG": "C.UTF-8"})
        self.sts = StatefulSetSim(self.rendered, "iqmesh", self.net, options, self.log)
        actions: dict[str, Callable[[StatefulSetSim], None]] = {
            "start": self._start, "rolling-update": self._rolling_update, "kill": self._kill,
            "scale-out": lambda s: self._scale(s, s.replicas + 1), "scale-in": lambda s: self._scale(s, s.replicas - 1)}
        try:
            for step in steps:
                t = time.monotonic()
                self.log.mark("step", step)
                actions[step](self.sts)
                self._feed()
                self.out[step] = {"step_s": round(time.monotonic() - t, 1), "counts_exact_s": self._exact()}
                self.log.mark("counts exact", step)
            self.out["restarts"] = {p.name: p.restarts for p in self.sts.pods.values()}
        finally:
            self.close()
        self.out["events"] = self.log.events
        return self.out

    def _feed(self) -> None:
        from examples.wordcount import INPUT_TOPIC, split_words
        from instance.local.cluster import produce, sample_lines

        self.batches += 1
        lines = sample_lines(self.lines, seed=self.batches)
        self.expected += collections.Counter(w for line in lines for w in split_words(line))
        produce(self.bootstrap, INPUT_TOPIC, ((None, line.encode()) for line in lines))

    def _exact(self) -> float:
        assert self.sts is not None
        seed, token = query_seed(self.sts)
        return round(wait_counts(seed, token, self.expected, self.timeout), 1)

    def _start(self, sts: StatefulSetSim) -> None:
        sts.scale(sts.replicas, timeout=self.timeout)
        port = next(p["containerPort"] for p in sts.container["ports"] if p["name"] == "grpc")
        self.out["application_servers"] = sorted(f"{p.env.get('IQMESH_ADVERTISED_HOST')}:{port}"
                                                 for p in sts.pods.values())

    def _rolling_update(self, sts: StatefulSetSim) -> None:
        self.out["rolling_update_order"] = sts.rolling_update(timeout=self.timeout)

    def _kill(self, sts: StatefulSetSim) -> None:
        """kill -9 the container of the highest ordinal once everything read is committed (at
        least once, a kill while records are in flight may count them twice, as in Kafka Streams;
        loadtest.chaos measures that); the kubelet restarts it in its pod."""
        from confluent_kafka.admin import AdminClient

        from examples.wordcount import INPUT_TOPIC

        group = sts.pods[min(sts.pods)].env["APPLICATION_ID"]
        existing = AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(timeout=10).topics
        topics = [INPUT_TOPIC, *(t for t in existing if t.startswith(group) and t.endswith("-repartition"))]
        self.out["kill_quiet_after_s"] = round(wait_committed(self.bootstrap, group, topics, self.timeout), 1)
        victim = max(sts.pods)
        restarts = sts.pods[victim].restarts
        sts.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + self.timeout
        while sts.pods[victim].restarts == restarts or not sts.pods[victim].ready:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{sts.pod_name(victim)} not restarted and Ready within {self.timeout:.0f} s")
            time.sleep(0.1)

    def _scale(self, sts: StatefulSetSim, replicas: int) -> None:
        """Scale; a pod deleted by a scale-in has its exit status in ``exit_codes`` too."""
        self.out.setdefault("exit_codes", {}).update(sts.scale(replicas, timeout=self.timeout))

    def close(self) -> None:
        if self.sts is not None:
            self.out.setdefault("exit_codes", {}).update(self.sts.close())
            # what each claim holds at the end: they outlive their pods (a scale-in keeps its volume)
            self.out["claims"] = {d.name: sorted(x.name for x in d.iterdir())
                                  for d in sorted((self.root / "pvc").glob("*")) if d.is_dir()}
        self.net.close()
        if self.broker is not None:
            self.broker.terminate()
            self.broker.wait(30)


def smoke(overlay: str, steps: tuple[str, ...], lines: int = 500, partitions: int = 6, timeout: float = 180.0,
          work_dir: str | None = None) -> dict[str, Any]:
    rendered = render(K8S / "overlays" / overlay)
    root = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="k8s-sim-"))
    try:
        out = Smoke(rendered, root, lines, partitions, timeout).run(steps)
    except BaseException:
        if not work_dir:
            print_log_tails(root)
        raise
    finally:
        if not work_dir:
            shutil.rmtree(root, ignore_errors=True)
    out["work_dir"] = str(root) if work_dir else None
    return {"overlay": overlay, "steps": list(steps), **out}


def print_log_tails(root: Path, chars: int = 3000) -> None:
    """The end of every pod's and the broker's log, to stderr (before their directory goes)."""
    for log in sorted([*root.glob("pods/*/container.log"), *root.glob("broker/broker.log")]):
        print(f"--- {log.relative_to(root)}\n{log.read_text(errors='replace')[-chars:]}", file=sys.stderr, flush=True)


def query_seed(sts: StatefulSetSim) -> tuple[str, str]:
    """The client Service's address (a seed for QueryClient) and the bearer token the pods read
    from their mounted Secret."""
    port = next(p["containerPort"] for p in sts.container["ports"] if p["name"] == "grpc")
    auth = next(v for v in pod_template(sts.sts)["spec"]["volumes"] if v["name"] == "auth")
    token = sts.rendered.secret_data(auth["secret"]["secretName"])["token"]
    return f"iqmesh-query.{sts.namespace}.svc.{CLUSTER_DOMAIN}:{port}", token
