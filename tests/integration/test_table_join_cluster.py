"""A stream-table join on three real instance processes (examples/order_regions.py): the
co-partitioned customers table and orders stream land on the same instances, and every region's
order count, answered through one instance, is exact."""

from __future__ import annotations

import collections
import random
import time
from pathlib import Path

import grpc
import pytest

from instance.local.cluster import LocalCluster, ensure_topic, produce
from router.client.sync_client import QueryClient

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parents[2] / "examples" / "order_regions.py")
CUSTOMERS, ORDERS = 500, 5000
REGIONS = ["north", "south", "east", "west"]


def _wait_answers(cluster: LocalCluster, store: str, truth: dict[str, object], timeout: float) -> None:
    """Until every key of ``truth`` is answered with its value through instance 0."""
    deadline = time.monotonic() + timeout
    wrong = list(truth)
    with QueryClient(cluster.instances[0].target, timeout=5) as q:
        while time.monotonic() < deadline:
            still = []
            for k in wrong:
                try:
                    if q.get(store, k).value != truth[k]:
                        still.append(k)
                except grpc.RpcError:
                    still.append(k)
            wrong = still
            if not wrong:
                return
            time.sleep(0.3)
    raise AssertionError(f"{len(wrong)} keys of {store} wrong, e.g. {wrong[:5]}\n{cluster.logs()}")


def test_stream_table_join_on_three_instances_is_exact(bootstrap: str, tmp_path: Path, unique: str) -> None:
    customers_topic, orders_topic = f"customers-{unique}", f"orders-{unique}"
    ensure_topic(bootstrap, customers_topic, 6)
    ensure_topic(bootstrap, orders_topic, 6)
    rnd = random.Random(5)
    region_of = {f"c{i}": rnd.choice(REGIONS) for i in range(CUSTOMERS)}
    produce(bootstrap, customers_topic, ((c.encode(), r.encode()) for c, r in region_of.items()))
    cluster = LocalCluster(bootstrap, APP, f"orders-{unique}", tmp_path, size=3,
                           extra_config=["commit.interval.ms=200"],
                           env={"ORDERS_CUSTOMERS_TOPIC": customers_topic, "ORDERS_ORDERS_TOPIC": orders_topic})
    cluster.start()
    try:
        # the table is loaded everywhere before any order exists: every join then finds its row
        _wait_answers(cluster, "customers", dict(region_of), 180)
        orders = [(f"c{rnd.randrange(CUSTOMERS + 50)}", str(rnd.randint(1, 100))) for _ in range(ORDERS)]
        produce(bootstrap, orders_topic, ((c.encode(), a.encode()) for c, a in orders))
        truth = collections.Counter(region_of.get(c, "unknown") for c, _ in orders)
        assert truth["unknown"] > 0  # some orders name customers the table does not have
        _wait_answers(cluster, "orders-by-region", dict(truth), 180)
    finally:
        cluster.stop()
