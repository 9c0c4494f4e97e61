"""``iqmesh demo``: the dev broker, three word-count instances, sample text, the REST gateway with
its dashboard, and how to query. While it runs it keeps feeding a few lines a second, so the
dashboard's rates move.

It works however often it is run on the same broker (each run has its own application id and
topics: the broker keeps earlier runs' text), says what it is doing while it waits, and prints
commands that work when pasted (``iqmesh`` by its path when it is not on PATH).
"""

from __future__ import annotations

import collections
import json
import os
import re
import shlex
import shutil
import signal
import socket
import sys
import threading
import time
import urllib.request
import uuid
from pathlib import Path

from confluent_kafka import Producer

from instance.local import broker as devbroker
from instance.local.cluster import LocalCluster, ensure_topic, produce, sample_lines
from instance.local.gateway import GatewayProcess
from kernel.kafka_log import client_logging
from router.client.sync_client import QueryClient

# a module name, not a path: importable from an installed distribution as from the source tree
APP = "examples.wordcount"


def _port_or_free(port: int) -> int:
    """``port`` if nothing listens there, else 0 (the gateway helper then picks a free one)."""
    with socket.socket() as s:
        return 0 if s.connect_ex(("127.0.0.1", port)) == 0 else port


def say(text: str) -> None:
    print(text, flush=True)


def iqmesh_command() -> str:
    """How to run ``iqmesh`` from the shell the demo was started in: the bare name when PATH finds
    this very installation, else the script's path (relative when below the current directory),
    else ``python -m iqmesh`` with this interpreter."""
    script = Path(sys.executable).parent / "iqmesh"
    if not script.is_file():
        return f"{shlex.quote(sys.executable)} -m iqmesh"
    on_path = shutil.which("iqmesh")
    if on_path and os.path.realpath(on_path) == os.path.realpath(script):
        return "iqmesh"
    try:
        shown = str(script.relative_to(Path.cwd()))
    except ValueError:
        shown = str(script)
    return shlex.quote(shown)


def _wait_for_counts(q: QueryClient, truth: collections.Counter[str], timeout: float) -> list[str]:
    """Until every word's count is right; says how many are, every few seconds. Returns the
    words still wrong at the deadline (none: converged)."""
    deadline = time.monotonic() + timeout
    started = time.monotonic()
    next_report = started + 5
    while True:
        wrong = [w for w in truth if q.get("counts", w).value != truth[w]]
        now = time.monotonic()
        if not wrong or now > deadline:
            return wrong
        if now >= next_report:
            say(f"  {len(truth) - len(wrong)} of {len(truth)} word counts right after {now - started:.0f}s "
                f"(the instances commit every second)...")
            next_report = now + 5
        time.sleep(0.5)


def _feed(bootstrap: str, topic: str, per_second: int, stop: list[bool]) -> None:
    """A few lines a second until ``stop[0]`` (the dashboard then has rates to plot)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random",
                         **client_logging()})  # a broker stopped meanwhile: one line, not one per retry
    n = 0
    try:
        while not stop[0]:
            for t in sample_lines(per_second, seed=n):
                producer.produce(topic, t.encode())
            producer.poll(0)
            n += 1
            time.sleep(1)
    finally:
        producer.flush(10)


def run_demo(data_dir: Path, lines: int = 2000, exit_when_ready: bool = False, gateway_port: int = 8080,
             feed_rate: int = 20) -> int:
    data_dir = data_dir.resolve()
    iqmesh = iqmesh_command()
    broker_dir = data_dir / "broker"
    ours = devbroker.broker_status(broker_dir) is None  # stopped at the end only if this run started it
    say(f"Starting the dev broker (data in {broker_dir})..." if ours else "Using the running dev broker...")
    broker = devbroker.start_broker(broker_dir)
    say(f"dev broker at {broker.bootstrap}")
    run_dir = data_dir / "instances"
    shutil.rmtree(run_dir, ignore_errors=True)
    app_id = f"wordcount-demo-{time.strftime('%H%M%S')}-{uuid.uuid4().hex[:4]}"
    # commits every second so the dashboard's positions, rates and standbys move live; input and
    # output topics of this run only: the broker keeps its data between runs, and a new
    # application reads its input from the beginning, so a shared topic would count earlier runs' text
    topic = f"{app_id}-lines"
    ensure_topic(broker.bootstrap, topic, 6)
    cluster = LocalCluster(broker.bootstrap, APP, app_id, run_dir, size=3,
                           extra_config=["num.standby.replicas=1", "commit.interval.ms=1000"],
                           env={"WORDCOUNT_INPUT_TOPIC": topic, "WORDCOUNT_OUTPUT_TOPIC": f"{app_id}-counts"})
    gateway = GatewayProcess(broker.bootstrap, app_id, run_dir / "gateway.log", port=_port_or_free(gateway_port))
    say(f"Starting 3 word-count instances of application {app_id} (logs in {run_dir}); waiting until "
        f"they have divided the partitions among themselves (up to 120 s)...")
    cluster.start()
    try:
        cluster.wait_running(120, progress=lambda text: say(f"  {text}"))
        text = sample_lines(lines, seed=int(time.time()))
        say(f"Writing {lines} lines of sample text to topic {topic}...")
        produce(broker.bootstrap, topic, ((None, t.encode()) for t in text))
        truth = collections.Counter(w for t in text for w in re.split(r"\W+", t.lower()) if w)
        first = cluster.instances[0]
        say(f"Waiting until all {len(truth)} word counts are right (up to 120 s)...")
        with QueryClient(first.target) as q:
            wrong = _wait_for_counts(q, truth, 120)
            if wrong:
                say(f"counts did not converge: {wrong[:10]}\n{cluster.logs()}")
                return 1
            sample = q.get("counts", "kafka")
        say("Starting the REST gateway and its dashboard...")
        gateway.start()
        gateway.wait_ready(60)
        with urllib.request.urlopen(f"{gateway.url}/v1/stores/counts/keys/kafka", timeout=10) as r:
            rest = json.loads(r.read())
        if rest["value"] != truth["kafka"]:
            print(f"the gateway answered {rest} for 'kafka', expected {truth['kafka']}\n{gateway.logs()}", flush=True)
            return 1
        print(f"\n{lines} lines processed by 3 instances; {len(truth)} distinct words, all counts "
              f"verified through {first.target}.", flush=True)
        print(f"count of 'kafka' = {sample.value}, served by {sample.metadata['served_by']}", flush=True)
        print("\nQuery any word through any instance:", flush=True)
        for inst in cluster.instances:
            print(f"  {iqmesh} get --target {inst.target} --store counts --key kafka", flush=True)
        print(f"  {iqmesh} metadata --target {first.target}", flush=True)
        print(f"\nDashboard: {gateway.url}/   (REST: {gateway.url}/v1/stores/counts/keys/kafka, "
              f"OpenAPI: {gateway.url}/openapi.json)", flush=True)
        print(f"  curl -s '{gateway.url}/v1/stores/counts/range?from=k&to=r&limit=5'", flush=True)
        print(f"Logs: {run_dir}/*/instance.log, {run_dir}/gateway.log", flush=True)
        if exit_when_ready:
            return 0
        feeding = f"Feeding {feed_rate} lines/s. " if feed_rate > 0 else ""
        print(f"\n{feeding}Press Ctrl-C to stop the instances and the gateway (the broker keeps running: "
              f"{iqmesh} broker stop --data-dir {shlex.quote(str(broker_dir))}).", flush=True)
        def interrupt(*_: object) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, interrupt)  # stop the instances on SIGTERM too
        stop = [False]
        feeder = threading.Thread(target=_feed, args=(broker.bootstrap, topic, feed_rate, stop),
                                  daemon=True)
        if feed_rate > 0:
            feeder.start()
        try:
            while cluster.running():
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        stop[0] = True
        if feeder.is_alive():
            feeder.join(15)
        return 0
    finally:
        gateway.stop()
        cluster.stop()
        if exit_when_ready and ours:
            devbroker.stop_broker(broker_dir)
