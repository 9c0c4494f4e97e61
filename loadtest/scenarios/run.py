"""One scenario, start to end: a broker on the simulated node, the dev overlay's StatefulSet (3
pods), ingest and the load generator on, a quiet period, the action, the wait until every
partition is served by an up-to-date active, a quiet period, then the measurements: queries and
how they failed, stale answers (flagged or not), records restored, the counts against the truth."""

from __future__ import annotations

import copy
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import grpc

from kernel.security import Security
from loadtest.k8s_sim.manifests import Rendered, render
from loadtest.k8s_sim.network import NODE_IP, ClusterNetwork
from loadtest.k8s_sim.smoke import K8S, EventLog, query_seed
from loadtest.k8s_sim.statefulset import Options, StatefulSetSim, local_commands
from loadtest.loadgen.plot import plot
from loadtest.scenarios.ingest import Ingest
from loadtest.scenarios.observe import Watcher, read_counts, restored, unsettled
from router.client.sync_client import QueryClient

#: events worth a line on the plot
PLOTTED = frozenset({"step", "signal", "volume lost", "ready", "terminated", "scale", "rolling update",
                     "rebalance", "unserved", "served"})


@dataclass(frozen=True)
class Settings:
    engine: str = "dev"
    protocol: str = "grpc"
    query_rate: float = 200.0
    ingest_rate: float = 100.0
    #: seconds of load before the action and after the cluster settled again
    quiet_s: float = 20.0
    #: steady: how long "nothing happens" lasts
    steady_s: float = 60.0
    partitions: int = 6
    replicas: int = 3
    guarantee: str = "exactly_once_v2"
    #: the load generator's outstanding queries at most: enough that keys whose replica hangs for
    #: the client's whole deadline do not hold back the others (10 s x the rate)
    max_in_flight: int = 4000
    #: session.timeout.ms put in app.properties (None: the overlay's)
    session_timeout_ms: int | None = None
    timeout: float = 300.0
    overlay: str = "dev"
    #: "static" (the manifests: group.instance.id = pod name) or "dynamic" (that flag dropped)
    membership: str = "static"
    #: group.protocol put in app.properties (None: the overlay's, classic)
    group_protocol: str | None = None


class WallEvents(EventLog):
    """EventLog with wall-clock times too (the load generator is another process)."""

    def extra(self) -> dict[str, Any]:
        return {"wall": time.time()}


def patched(rendered: Rendered, settings: Settings) -> Rendered:
    """The rendering with the scenario's properties: the processing guarantee, the group protocol,
    replication factor 1 on a single Apache Kafka broker (the overlay asks for 3), dynamic
    membership if asked."""
    docs = [copy.deepcopy(d) for d in rendered.docs]
    for d in docs:
        if d["kind"] == "ConfigMap" and "app.properties" in (d.get("data") or {}):
            text = d["data"]["app.properties"]
            text = re.sub(r"(?m)^processing\.guarantee=.*$", f"processing.guarantee={settings.guarantee}", text)
            if settings.session_timeout_ms is not None:
                text = re.sub(r"(?m)^session\.timeout\.ms=.*$", f"session.timeout.ms={settings.session_timeout_ms}",
                              text)
            if settings.group_protocol is not None:
                text = re.sub(r"(?m)^group\.protocol=.*\n?", "", text).rstrip("\n") + \
                    f"\ngroup.protocol={settings.group_protocol}\n"
            if settings.engine == "kafka":
                text = re.sub(r"(?m)^replication\.factor=.*$", "replication.factor=1", text)
            d["data"]["app.properties"] = text
        if d["kind"] == "StatefulSet" and settings.membership == "dynamic":
            for c in d["spec"]["template"]["spec"]["containers"]:
                c["args"] = [a for a in c.get("args", []) if not a.startswith("--config=group.instance.id=")]
    return Rendered(tuple(docs))


class Broker:
    """The engine's broker listening on the node's bridge address, where the overlay's
    KAFKA_BOOTSTRAP name points."""

    def __init__(self, engine: str, data_dir: Path, port: int) -> None:
        self.engine, self.data_dir, self.port = engine, data_dir, port
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.engine == "kafka":
            from instance.local import kafka_broker

            kafka_broker.HOST = NODE_IP  # in the simulator's own network namespace only
            kafka_broker.start_broker(self.data_dir, port=self.port)
        else:
            from loadtest.k8s_sim.smoke import start_broker

            self.proc = start_broker(self.data_dir, self.port)

    def stop(self) -> None:
        if self.engine == "kafka":
            from instance.local import kafka_broker

            kafka_broker.stop_broker(self.data_dir)
        elif self.proc is not None:
            self.proc.terminate()
            self.proc.wait(30)


class Scenario:
    def __init__(self, name: str, settings: Settings, root: Path, out: Path) -> None:
        self.name, self.s, self.root, self.out = name, settings, root, out
        self.log = WallEvents()
        self.rendered = patched(render(K8S / "overlays" / settings.overlay), settings)
        self.net = ClusterNetwork(root / "hosts")
        env = next(c for c in self.rendered.of_kind("ConfigMap") if "KAFKA_BOOTSTRAP" in (c.get("data") or {}))
        self.bootstrap = env["data"]["KAFKA_BOOTSTRAP"]
        self.broker = Broker(settings.engine, root / "broker", int(self.bootstrap.rsplit(":", 1)[1]))
        self.sts: StatefulSetSim | None = None
        self.procs: list[subprocess.Popen[bytes]] = []
        self.result: dict[str, Any] = {"scenario": name, "engine": settings.engine, "settings": asdict(settings)}

    # -- set-up -----------------------------------------------------------------------------------
    def _cluster(self) -> StatefulSetSim:
        from examples.wordcount import INPUT_TOPIC
        from instance.local.cluster import ensure_topic

        self.net.setup()
        self.net.set_name(self.bootstrap.rsplit(":", 1)[0], [NODE_IP])
        self.broker.start()
        self.log.mark("broker ready", self.bootstrap)
        ensure_topic(self.bootstrap, INPUT_TOPIC, self.s.partitions)
        self._group_settings()
        options = Options(self.root, ["iqmesh"], local_commands(sys.executable),
                          {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.root), "LANG": "C.UTF-8"})
        sts = StatefulSetSim(self.rendered, "iqmesh", self.net, options, self.log)
        self.sts = sts
        sts.scale(self.s.replicas, timeout=self.s.timeout)
        return sts

    def _group_settings(self) -> None:
        """Under the streams protocol the group, not the client, holds the number of standbys: the
        properties' ``num.standby.replicas`` is set on the group, as an operator would."""
        from instance.runtime.streams_group.group_config import standbys_on_the_group

        maps = [c.get("data") or {} for c in self.rendered.of_kind("ConfigMap")]
        text = next(d["app.properties"] for d in maps if "app.properties" in d)
        props = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#"))
        app = next(d["APPLICATION_ID"] for d in maps if "APPLICATION_ID" in d)
        if standbys_on_the_group(self.bootstrap, app, props):
            self.log.mark("group configured", f"num.standby.replicas={props['num.standby.replicas']}")

    def _spawn(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "ab") as f:
            p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.procs.append(p)
        return p

    def _gateway(self, seed: str, token: str) -> str:
        from instance.local.broker import free_port

        port = free_port()
        self._spawn([sys.executable, "-m", "iqmesh", "gateway", "--seeds", seed, "--port", str(port),
                     "--config", f"iqmesh.auth.token={token}"], self.root / "gateway.log")
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/readyz", timeout=2):
                    return url
            except OSError:
                if time.monotonic() > deadline:
                    log = self.root / "gateway.log"
                    raise TimeoutError(f"the gateway is not ready within 60 s (see {log})") from None
                time.sleep(0.2)

    # -- waits ------------------------------------------------------------------------------------
    @property
    def _spread(self) -> bool:
        """Settled means every pod holds tasks too (the broker places them, in steps)."""
        return self.s.group_protocol == "streams"

    def _wait_settled(self, client: QueryClient, tasks: int, since: float) -> float:
        assert self.sts is not None
        deadline = time.monotonic() + self.s.timeout
        while True:
            why = unsettled(client, [p.name for p in self.sts.pods.values()], tasks, self._spread)
            if why is None:
                return round(time.monotonic() - since, 1)
            if time.monotonic() > deadline:
                raise TimeoutError(f"not settled within {self.s.timeout:.0f} s: {why}")
            time.sleep(0.5)

    def _count_tasks(self, client: QueryClient) -> int:
        deadline = time.monotonic() + self.s.timeout
        while True:
            assert self.sts is not None
            if unsettled(client, [p.name for p in self.sts.pods.values()], 1, self._spread) is None:
                md = client.metadata()
                return sum(len(i.active_tasks) for i in md.instances if i.alive)
            if time.monotonic() > deadline:
                raise TimeoutError("the cluster did not settle after start")
            time.sleep(0.5)

    def _wait_load(self, client: QueryClient, load: subprocess.Popen[bytes], before: int) -> None:
        """Until the instances have answered queries since ``before`` (their Get counters, as
        published): the load generator is up (its start-up takes seconds on a busy machine), so the
        quiet period and the action are under load."""
        deadline = time.monotonic() + self.s.timeout
        while (_gets(client) or 0) <= before:
            if load.poll() is not None:
                raise RuntimeError(f"the load generator exited ({load.returncode}) before its first answer "
                                   f"(see {self.root / 'loadgen.log'})")
            if time.monotonic() > deadline:
                raise TimeoutError(f"no query of the load generator answered within {self.s.timeout:.0f} s")
            time.sleep(0.2)

    def _wait_pod(self, ordinal: int, restarts: int) -> None:
        assert self.sts is not None
        deadline = time.monotonic() + self.s.timeout
        while True:
            pod = self.sts.pods.get(ordinal)
            if pod is not None and pod.restarts > restarts and pod.ready:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.sts.pod_name(ordinal)} not restarted and Ready in {self.s.timeout:.0f} s")
            time.sleep(0.1)

    # -- actions ----------------------------------------------------------------------------------
    def _action(self, sts: StatefulSetSim, client: QueryClient, tasks: int) -> None:
        t = time.monotonic()
        self.log.mark("step", self.name)
        logs = {p: p.stat().st_size for p in self.root.glob("pods/*/container.log")}
        if self.name == "steady":
            time.sleep(self.s.steady_s)
        elif self.name == "rolling-update":
            self.result["order"] = sts.rolling_update(timeout=self.s.timeout)
        elif self.name == "scale":
            sts.scale(self.s.replicas + 2, timeout=self.s.timeout)
            self.result["settled_at_5_s"] = self._wait_settled(client, tasks, t)
            t5 = time.monotonic()
            sts.scale(self.s.replicas, timeout=self.s.timeout)
            self.result["settled_back_at_3_s"] = self._wait_settled(client, tasks, t5)
        elif self.name == "kill":
            victim = max(sts.pods)
            restarts = sts.pods[victim].restarts
            sts.kill(victim, signal.SIGKILL)
            self._wait_pod(victim, restarts)
        elif self.name == "node-lost":
            victim = max(sts.pods)
            sts.lose_node(victim)
            sts.wait_ready([victim], self.s.timeout)
        else:
            raise ValueError(f"unknown scenario {self.name!r}")
        self.result["action_s"] = round(time.monotonic() - t, 1)
        self.result["settled_s"] = self._wait_settled(client, tasks, t)
        self.result["records_restored"] = restored(
            (p, logs.get(p, 0)) for p in self.root.glob("pods/*/container.log"))

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        load_dir = self.root / "load"
        try:
            sts = self._cluster()
            seed, token = query_seed(sts)
            client = QueryClient(seed, timeout=10, security=Security(token=token))
            tasks = self._count_tasks(client)
            self.result["tasks"] = tasks
            from examples.wordcount import INPUT_TOPIC

            ingest = Ingest(self.bootstrap, INPUT_TOPIC, self.s.ingest_rate)
            ingest.start()
            gets_before = _gets(client) or 0  # nothing asks Gets before the load generator
            target = ["--grpc", seed] if self.s.protocol == "grpc" else ["--rest", self._gateway(seed, token)]
            load = self._spawn([sys.executable, "-m", "loadtest.loadgen", *target, "--token", token,
                                "--rate", str(self.s.query_rate), "--duration", "0",
                                "--max-in-flight", str(self.s.max_in_flight), "--out", str(load_dir),
                                "--title", f"{self.name} ({self.s.engine})"], self.root / "loadgen.log")
            self._wait_load(client, load, gets_before)
            self.log.mark("load on", f"{self.s.protocol} {self.s.query_rate:g}/s, ingest {self.s.ingest_rate:g}/s")
            watcher = Watcher(client, lambda: [p.name for p in list(sts.pods.values())], tasks, self.log.mark)
            watcher.start()
            time.sleep(self.s.quiet_s)
            self._action(sts, client, tasks)
            time.sleep(self.s.quiet_s)
            self.result["unserved_s"] = watcher.stop()
            self.result["unserved_episodes"] = watcher.episodes
            self.log.mark("load off", "SIGTERM to the load generator")
            load_off_wall = time.time()
            load.send_signal(signal.SIGTERM)
            load.wait(120)
            truth = ingest.stop()
            self.log.mark("ingest stopped", f"{ingest.acked} lines acknowledged")
            self.result.update(self._final_counts(client, truth, ingest))
            self.result["load"] = self._load_result(load_dir, load_off_wall)
            self.result["restarts"] = {p.name: p.restarts for p in sts.pods.values()}
            client.close()
        finally:
            self.close()
        self.result["events"] = self.log.events
        return self.result

    def _final_counts(self, client: QueryClient, truth: dict[str, int], ingest: Ingest) -> dict[str, Any]:
        t = time.monotonic()
        got: dict[str, int | None] = {}
        while time.monotonic() - t < self.s.timeout:
            got = read_counts(client, truth)
            if got == truth:
                break
            time.sleep(0.5)
        lost = sum(max(0, n - (got.get(w) or 0)) for w, n in truth.items())
        doubled = sum(max(0, (got.get(w) or 0) - n) for w, n in truth.items())
        return {"lines_acked": ingest.acked, "lines_failed": ingest.failed, "ingest_error": ingest.error,
                "words_counted": sum(truth.values()), "counts_exact": got == truth,
                "exact_after_s": round(time.monotonic() - t, 1) if got == truth else None,
                "records_lost": lost, "records_double_counted": doubled,
                "unreadable_words": sum(1 for v in got.values() if v is None)}

    def _load_result(self, load_dir: Path, off_wall: float) -> dict[str, Any]:
        path = load_dir / "result.json"
        if not path.exists():
            return {"error": f"no result (see {self.root / 'loadgen.log'})"}
        res: dict[str, Any] = json.loads(path.read_text())
        t0 = res["started_wall"]
        #: how long the load generator ran its schedule: from its start to the SIGTERM that stopped it
        res["ran_s"] = round(off_wall - t0, 2)
        events = [{**e, "t": round(e["wall"] - t0, 2)} for e in self.log.events
                  if e["event"] in PLOTTED and e["wall"] >= t0]
        png = plot(res["timeline"], events, self.out / f"{self.s.engine}-{self.name}.png",
                   f"{self.name} on {self.s.engine}: {res['protocol']} {self.s.query_rate:g} q/s open-loop, "
                   f"ingest {self.s.ingest_rate:g} lines/s", res)
        (self.out / f"{self.s.engine}-{self.name}.timeline.json").write_text(json.dumps(res["timeline"]))
        return {**{k: v for k, v in res.items() if k != "timeline"}, "plot": str(png)}

    def close(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        if self.sts is not None:
            self.result["exit_codes"] = self.sts.close()
        self.net.close()
        self.broker.stop()


def _gets(client: QueryClient) -> int | None:
    """Gets the instances have answered or forwarded, by the counters in their published metadata
    (None when the Metadata call fails)."""
    try:
        md = client.metadata()
    except grpc.RpcError:
        return None
    return sum(i.counters.gets_local + i.counters.gets_routed + i.counters.gets_forwarded for i in md.instances)


def run_scenario(name: str, settings: Settings, root: Path, out: Path) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    return Scenario(name, settings, root, out).run()
