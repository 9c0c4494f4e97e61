"""Get latency through the routing client against the old path (every Get through one instance),
on three local word-count instances, one caller, sequential calls:

    python -m loadtest.client_routing [--bootstrap HOST:PORT] [--keys 3000] [--rounds 2]

Without --bootstrap a dev broker is started for the run. Prints gets/s, p50 and p99 for the
routing client (straight to each key's owner), for a raw stub asking one instance (a third of the
keys local, the rest one hop away), for those two kinds of keys alone, and for the routing client
on the keys local to that instance (the client's own cost, against the same server).
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import grpc

from instance.local import broker as devbroker
from instance.local.cluster import LocalCluster, ensure_topic, produce
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from router.client.sync_client import QueryClient

APP = str(Path(__file__).resolve().parent.parent / "examples" / "wordcount.py")


def measure(name: str, keys: list[str], rounds: int, get: Callable[[str], object]) -> None:
    latencies = []
    t0 = time.perf_counter()
    for _ in range(rounds):
        for k in keys:
            s = time.perf_counter()
            get(k)
            latencies.append(time.perf_counter() - s)
    elapsed = time.perf_counter() - t0
    latencies.sort()
    print(f"{name:38s} {len(latencies) / elapsed:7.0f} gets/s  p50 {latencies[len(latencies) // 2] * 1e3:5.2f} ms"
          f"  p99 {latencies[int(len(latencies) * 0.99)] * 1e3:5.2f} ms", flush=True)


def run(bootstrap: str, base: Path, n_keys: int, rounds: int) -> None:
    unique = uuid.uuid4().hex[:8]
    topic = f"lines-bench-{unique}"
    ensure_topic(bootstrap, topic, 6)
    cluster = LocalCluster(bootstrap, APP, f"bench-{unique}", base, size=3,
                           env={"WORDCOUNT_INPUT_TOPIC": topic, "WORDCOUNT_OUTPUT_TOPIC": f"counts-{unique}"})
    keys = [f"key{i}" for i in range(n_keys)]
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, k.encode()) for k in keys))
        seed = cluster.instances[0].target
        with QueryClient(seed) as q:
            deadline = time.monotonic() + 120
            while not all(q.get("counts", k).found for k in keys[:: max(1, n_keys // 50)] + keys[-1:]):
                if time.monotonic() > deadline:
                    raise TimeoutError("the input was not counted within 120 s")
                time.sleep(0.5)
            stub = pb_grpc.InteractiveQueryStub(grpc.insecure_channel(seed))

            def via_seed(k: str) -> object:
                return stub.Get(pb.GetRequest(store="counts", key=k), timeout=10)
            measure("routing client (straight to the owner)", keys, rounds, lambda k: q.get("counts", k))
            measure("one instance asked (old path)", keys, rounds, via_seed)
            here = cluster.instances[0].instance_id
            local = [k for k in keys if q.get("counts", k).metadata["served_by"] == here]
            measure("  of which keys local to it", local, rounds, via_seed)
            measure("routing client, those local keys", local, rounds, lambda k: q.get("counts", k))
            measure("  of which keys one hop away", [k for k in keys if k not in set(local)], rounds, via_seed)
    finally:
        cluster.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bootstrap", help="a running broker (default: start a dev broker for the run)")
    ap.add_argument("--keys", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="iqmesh-client-bench-"))
    if args.bootstrap:
        run(args.bootstrap, base, args.keys, args.rounds)
        return
    handle = devbroker.start_broker(base / "broker")
    try:
        run(handle.bootstrap, base, args.keys, args.rounds)
    finally:
        devbroker.stop_broker(base / "broker")


if __name__ == "__main__":
    main()
