"""``iqmesh demo``: the dev broker, three word-count instances, sample text, the REST gateway with
its dashboard, and how to query. While it runs it keeps feeding a few lines a second, so the
dashboard's rates move."""

from __future__ import annotations

import collections
import json
import re
import shutil
import signal
import socket
import threading
import time
import urllib.request
from pathlib import Path

from confluent_kafka import Producer

from devtools import broker as devbroker
from devtools.cluster import LocalCluster, ensure_topic, produce, sample_lines
from devtools.gateway import GatewayProcess

# a module name, not a path: importable from an installed distribution as from the source tree
APP = "examples.wordcount"


def _port_or_free(port: int) -> int:
    """``port`` if nothing listens there, else 0 (the gateway helper then picks a free one)."""
    with socket.socket() as s:
        return 0 if s.connect_ex(("127.0.0.1", port)) == 0 else port


def _feed(bootstrap: str, topic: str, per_second: int, stop: list[bool]) -> None:
    """A few lines a second until ``stop[0]`` (the dashboard then has rates to plot)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random"})
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
    from router.client import QueryClient

    data_dir = data_dir.resolve()
    broker = devbroker.start_broker(data_dir / "broker")
    print(f"dev broker at {broker.bootstrap} (data in {data_dir / 'broker'})", flush=True)
    run_dir = data_dir / "instances"
    shutil.rmtree(run_dir, ignore_errors=True)
    app_id = f"wordcount-demo-{int(time.time())}"
    # commits every second so the dashboard's positions, rates and standbys move live; input and
    # output topics of this run only: the broker keeps its data between runs, and a new
    # application reads its input from the beginning, so a shared topic would count earlier runs' text
    topic = f"{app_id}-lines"
    ensure_topic(broker.bootstrap, topic, 6)
    cluster = LocalCluster(broker.bootstrap, APP, app_id, run_dir, size=3,
                           extra_config=["num.standby.replicas=1", "commit.interval.ms=1000"],
                           env={"WORDCOUNT_INPUT_TOPIC": topic, "WORDCOUNT_OUTPUT_TOPIC": f"{app_id}-counts"})
    gateway = GatewayProcess(broker.bootstrap, app_id, run_dir / "gateway.log", port=_port_or_free(gateway_port))
    cluster.start()
    try:
        cluster.wait_running(120)
        text = sample_lines(lines, seed=int(time.time()))
        produce(broker.bootstrap, topic, ((None, t.encode()) for t in text))
        truth = collections.Counter(w for t in text for w in re.split(r"\W+", t.lower()) if w)
        first = cluster.instances[0]
        with QueryClient(first.target) as q:
            deadline = time.monotonic() + 120
            while True:
                wrong = [w for w in truth if q.get("counts", w).value != truth[w]]
                if not wrong:
                    break
                if time.monotonic() > deadline:
                    print(f"counts did not converge: {wrong[:10]}\n{cluster.logs()}", flush=True)
                    return 1
                time.sleep(0.5)
            sample = q.get("counts", "kafka")
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
            print(f"  iqmesh get --target {inst.target} --store counts --key kafka", flush=True)
        print(f"  iqmesh metadata --target {first.target}", flush=True)
        print(f"\nDashboard: {gateway.url}/   (REST: {gateway.url}/v1/stores/counts/keys/kafka, "
              f"OpenAPI: {gateway.url}/openapi.json)", flush=True)
        print(f"  curl -s '{gateway.url}/v1/stores/counts/range?from=k&to=r&limit=5'", flush=True)
        print(f"Logs: {run_dir}/*/instance.log, {run_dir}/gateway.log", flush=True)
        if exit_when_ready:
            return 0
        print(f"\nFeeding {feed_rate} lines/s. Press Ctrl-C to stop the instances and the gateway (the broker "
              f"keeps running: iqmesh broker stop --data-dir {data_dir / 'broker'}).", flush=True)
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
        if exit_when_ready:
            devbroker.stop_broker(data_dir / "broker")
