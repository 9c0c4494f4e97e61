"""A foreign-key table join (tests/integration/apps/fk_orders.py) on two real instance processes:
orders and customers on topics with different partition counts, every order's enrichment answered
right; then one instance stops, the other takes over its tasks (the subscription store restored
from its changelog) and customer updates, customer deletes, orders moving to other customers and
order deletes made after the stop all reach the right orders."""

from __future__ import annotations

import random
import signal
from pathlib import Path

import grpc
import pytest

from instance.local.cluster import LocalCluster, ensure_topic, produce
from kernel.instance_state import State
from kernel.wire_enums import state_of
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parent / "apps" / "fk_orders.py")
CUSTOMERS, ORDERS = 40, 300


TASKS = 6  # sub-topology 0 (orders, 4 partitions) and 1 (customers, 2 partitions)


def _wait_settled(cluster: LocalCluster, instances: int, timeout: float) -> None:
    """Until ``instances`` instances are RUNNING and own every task once, none restoring
    (LocalCluster.wait_running counts one task per store partition: here two stores share each
    task)."""
    seen: list[str] = [""]

    def settled() -> bool:
        try:
            with QueryClient(cluster.instances[0].target, timeout=2) as q:
                md = q.metadata()
        except grpc.RpcError as e:
            seen[0] = str(e.details())
            return False
        alive = [i for i in md.instances if i.alive and state_of(i.state) is State.RUNNING]
        owned = [t for i in alive for t in i.active_tasks]
        seen[0] = f"{[(i.instance_id, state_of(i.state).name, sorted(i.active_tasks)) for i in md.instances]}"
        return (len(alive) == instances and not any(i.restoring_tasks for i in alive)
                and len(owned) == TASKS == len(set(owned)))
    wait_until(settled, timeout, f"{instances} instance(s) owning every task",
               lambda: f"{seen[0]}\n{cluster.logs()}")


def _enriched(orders: dict[str, str], customers: dict[str, str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for o, v in orders.items():
        name = customers.get(v.split(":")[0])
        out[o] = None if name is None else f"{v}/{name}"
    return out


def _wrong(target: str, truth: dict[str, str | None]) -> list[str]:
    """The orders whose answer (None: not found) is not ``truth``'s, asked through ``target``."""
    wrong = []
    with QueryClient(target, timeout=5) as q:
        for k, want in truth.items():
            try:
                got = q.get("enriched", k).value
            except grpc.RpcError:
                got = "<unavailable>"
            if got != want:
                wrong.append(k)
    return wrong


def test_fk_join_is_right_after_an_instance_stops(bootstrap: str, tmp_path: Path, unique: str) -> None:
    orders_topic, customers_topic = f"fk-orders-{unique}", f"fk-customers-{unique}"
    ensure_topic(bootstrap, orders_topic, 4)
    ensure_topic(bootstrap, customers_topic, 2)
    rnd = random.Random(17)
    customers = {f"c{i}": f"name{i}" for i in range(CUSTOMERS)}
    orders = {f"o{i}": f"c{rnd.randrange(CUSTOMERS + 5)}:item{i}" for i in range(ORDERS)}  # some unknown
    produce(bootstrap, customers_topic, ((k.encode(), v.encode()) for k, v in customers.items()))
    produce(bootstrap, orders_topic, ((k.encode(), v.encode()) for k, v in orders.items()))
    cluster = LocalCluster(bootstrap, APP, f"fk-{unique}", tmp_path, size=2,
                           extra_config=["commit.interval.ms=200"],
                           env={"FK_ORDERS_TOPIC": orders_topic, "FK_CUSTOMERS_TOPIC": customers_topic})
    cluster.start()
    try:
        _wait_settled(cluster, 2, 180)
        truth = _enriched(orders, customers)
        assert any(v is None for v in truth.values())  # orders of customers that do not exist
        target = cluster.instances[0].target
        wait_until(lambda: not _wrong(target, truth), 180, "every order enriched", cluster.logs)

        cluster.signal(1, signal.SIGTERM)
        assert cluster.wait_exit(1, 90) == 0
        _wait_settled(cluster, 1, 180)

        changes_c: list[tuple[str, str | None]] = []
        for i in range(0, CUSTOMERS, 3):                      # renamed
            changes_c.append((f"c{i}", f"name{i}-v2"))
        for i in range(1, CUSTOMERS, 7):                      # deleted
            changes_c.append((f"c{i}", None))
        changes_c.append((f"c{CUSTOMERS}", "newcomer"))       # orders waiting for it now join
        changes_o: list[tuple[str, str | None]] = []
        for i in range(0, ORDERS, 5):                         # moved to another customer
            changes_o.append((f"o{i}", f"c{rnd.randrange(CUSTOMERS)}:moved{i}"))
        for i in range(2, ORDERS, 11):                        # deleted
            changes_o.append((f"o{i}", None))
        for k, v in changes_c:
            if v is None:
                customers.pop(k, None)
            else:
                customers[k] = v
        for k, v in changes_o:
            if v is None:
                orders.pop(k, None)
            else:
                orders[k] = v
        produce(bootstrap, customers_topic, ((k.encode(), None if v is None else v.encode()) for k, v in changes_c))
        produce(bootstrap, orders_topic, ((k.encode(), None if v is None else v.encode()) for k, v in changes_o))

        truth = _enriched(orders, customers)
        truth.update({k: None for k, v in changes_o if v is None})  # deleted orders: not found
        last: list[list[str]] = [[]]

        def settled() -> bool:
            last[0] = _wrong(target, truth)
            return not last[0]
        wait_until(settled, 180, "every order enriched right after the takeover",
                   lambda: f"wrong: {last[0][:10]} of {len(truth)}\n{cluster.logs()}")
        with QueryClient(target, timeout=5) as q:
            md = q.metadata()
        assert [i.instance_id for i in md.instances if i.alive] == [cluster.instances[0].instance_id]
    finally:
        cluster.stop()
