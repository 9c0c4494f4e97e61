"""``iqmesh demo``: the dev broker, three word-count instances, sample text, and how to query."""

from __future__ import annotations

import collections
import re
import shutil
import signal
import time
from pathlib import Path

from devtools import broker as devbroker
from devtools.cluster import LocalCluster, ensure_topic, produce, sample_lines

# a module name, not a path: importable from an installed distribution as from the source tree
APP = "examples.wordcount"


def run_demo(data_dir: Path, lines: int = 2000, exit_when_ready: bool = False) -> int:
    from router.client import QueryClient

    data_dir = data_dir.resolve()
    broker = devbroker.start_broker(data_dir / "broker")
    print(f"dev broker at {broker.bootstrap} (data in {data_dir / 'broker'})", flush=True)
    ensure_topic(broker.bootstrap, "streams-plaintext-input", 6)
    run_dir = data_dir / "instances"
    shutil.rmtree(run_dir, ignore_errors=True)
    app_id = f"wordcount-demo-{int(time.time())}"
    cluster = LocalCluster(broker.bootstrap, APP, app_id, run_dir, size=3)
    cluster.start()
    try:
        cluster.wait_running(120)
        text = sample_lines(lines, seed=int(time.time()))
        produce(broker.bootstrap, "streams-plaintext-input", ((None, t.encode()) for t in text))
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
        print(f"\n{lines} lines processed by 3 instances; {len(truth)} distinct words, all counts "
              f"verified through {first.target}.", flush=True)
        print(f"count of 'kafka' = {sample.value}, served by {sample.metadata['served_by']}", flush=True)
        print("\nQuery any word through any instance:", flush=True)
        for inst in cluster.instances:
            print(f"  iqmesh get --target {inst.target} --store counts --key kafka", flush=True)
        print(f"  iqmesh metadata --target {first.target}", flush=True)
        print(f"Logs: {run_dir}/*/instance.log", flush=True)
        if exit_when_ready:
            return 0
        print("\nPress Ctrl-C to stop the instances (the broker keeps running: "
              f"iqmesh broker stop --data-dir {data_dir / 'broker'}).", flush=True)
        def interrupt(*_: object) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, interrupt)  # stop the instances on SIGTERM too
        try:
            while cluster.running():
                time.sleep(1)
        except KeyboardInterrupt:
            pass
        return 0
    finally:
        cluster.stop()
        if exit_when_ready:
            devbroker.stop_broker(data_dir / "broker")
