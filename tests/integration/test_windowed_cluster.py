"""A tumbling-window count on three real instance processes and the dev broker: every key's
windows answered exactly through one instance with WindowFetch (routed by key like Get)."""

from __future__ import annotations

import collections
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from confluent_kafka import Producer

from instance.local.cluster import LocalCluster, ensure_topic
from router.client.sync_client import QueryClient

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parents[2] / "examples" / "windowed_counts.py")
MINUTE = 60_000


def test_window_fetch_through_one_instance_is_exact(bootstrap: str, tmp_path: Path, unique: str) -> None:
    # recent event times: the broker's retention would delete records from long ago at once
    base = (int(time.time() * 1000) // MINUTE - 10) * MINUTE
    topic = f"views-{unique}"
    ensure_topic(bootstrap, topic, 6)
    env = {"WINDOWED_INPUT_TOPIC": topic, "WINDOWED_OUTPUT_TOPIC": f"views-out-{unique}"}
    cluster = LocalCluster(bootstrap, APP, f"win-{unique}", tmp_path, size=3, env=env)
    cluster.start()
    try:
        cluster.wait_running(120)
        rnd = random.Random(5)
        truth: collections.Counter[tuple[str, int]] = collections.Counter()
        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "partitioner": "murmur2_random"})
        for i in range(3000):
            user, ts = f"user-{rnd.randrange(60)}", base + i * 100  # five minutes
            p.produce(topic, b"/home", user.encode(), timestamp=ts)
            truth[(user, (ts - base) // MINUTE * MINUTE + base)] += 1
            if i % 500 == 0:
                p.poll(0)
        assert p.flush(60) == 0
        del p  # no client left retrying once the test's broker is gone
        users = sorted({u for u, _ in truth})
        expected = {u: [(s, s + MINUTE, n) for (uu, s), n in sorted(truth.items()) if uu == u] for u in users}

        def answers() -> tuple[dict[str, list[tuple[int, int, int]]], set[str]]:
            got, served = {}, set()
            with QueryClient(cluster.instances[0].target, timeout=5) as q:
                for u in users:
                    try:
                        r = q.window_fetch("views-per-minute", u, base, base + 10 * MINUTE)
                    except grpc.RpcError:
                        continue
                    got[u] = r.windows
                    served.add(r.metadata["served_by"])
            return got, served

        deadline = time.monotonic() + 120
        got: dict[str, list[tuple[int, int, int]]] = {}
        served: set[str] = set()
        while time.monotonic() < deadline:
            got, served = answers()
            if got == expected:
                break
            time.sleep(0.5)
        wrong = [u for u in users if got.get(u) != expected[u]]
        assert not wrong, f"{len(wrong)} users wrong, e.g. {wrong[:3]}: {got.get(wrong[0])}\n{cluster.logs()}"
        assert len(served) == 3  # the answers crossed instances
        out = subprocess.run([sys.executable, "-m", "iqmesh", "get", "--target", cluster.instances[2].target,
                              "--store", "views-per-minute", "--key", users[0], "--window-from", str(base),
                              "--window-to", str(base + 10 * MINUTE)],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert [(w["start"], w["end"], w["value"]) for w in json.loads(out)["windows"]] == expected[users[0]]
        with QueryClient(cluster.instances[1].target, timeout=5) as q, pytest.raises(grpc.RpcError) as err:
            q.session_fetch("views-per-minute", users[0])
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        cluster.stop()
