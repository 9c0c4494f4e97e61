"""Broker conformance: a rebalance round that strands a member, and the watchdog that restarts it.

On the dev broker (noida-db 0.2.3) a member whose JoinGroup is waiting is forgotten when another
member joins within the broker's 20 ms poll after a round completed: the round that follows waits
for it until the rebalance timeout (5 minutes). The trap is set here as it happened on CI: inst0
owns everything, inst1 joins, and inst2 joins from inside inst0's on_assign of that round. The
test then asserts that ``StuckRebalanceWatchdog`` gets every member an assignment. Real consumers
in this process; every wait is a poll loop with a deadline.

Whether inst2's join lands in that window is up to the machine (it does not on a busy one every
time), so on the dev broker the trap is set again, each time on a fresh group, until a member was
stranded and the watchdog had to restart the round: the test never passes without having seen the
watchdog at work, and fails, saying so, if the trap no longer springs (a fixed broker). Once set,
a stranded round stays stuck for the rebalance timeout: it is the test that restarts it, through
the watchdog, which it asks only after the round stood unchanged far longer than a healthy round
takes (``STUCK_S``; a member learns of a round at its next heartbeat, 1 s).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from instance.runtime.stuck_rebalance import StuckRebalanceWatchdog
from tests.conformance.test_broker import ON_DEV_BROKER, consumer_conf, create_topics, wait_until

pytestmark = pytest.mark.integration

PARTITIONS = 6
#: a round unchanged this long is stuck (a healthy one completes within a heartbeat or two)
STUCK_S = 10.0
#: the trap is set again until it springs, for at most this long (dev broker)
SPRING_S = 240.0
#: each attempt: every member assigned within this long (a stranded round: STUCK_S, then a restart)
ASSIGNED_S = 120.0


def _attempt(bootstrap: str, topic: str, group: str) -> tuple[int, float]:
    """Set the trap on ``group``; run the watchdog until every member is assigned. Returns the
    rounds the watchdog restarted and the seconds it took."""
    assigned: dict[str, list[int]] = {}
    rounds = {"inst0": 0}
    stop = threading.Event()
    pollers: list[threading.Thread] = []
    conf: dict[str, Any] = dict(session_timeout_ms=10000, heartbeat_interval_ms=1000, max_poll_interval_ms=300000,
                                partition_assignment_strategy="range")
    made = {name: Consumer({**consumer_conf(bootstrap, group, **conf), "client.id": name})
            for name in ("inst0", "inst1", "inst2")}

    def subscribe(name: str) -> None:
        def on_assign(c: Consumer, ps: list[TopicPartition]) -> None:
            assigned[name] = sorted(tp.partition for tp in ps)
            if name == "inst0":
                rounds["inst0"] += 1
                if rounds["inst0"] == 2:
                    subscribe("inst2")  # a join right as the round completes

        def on_revoke(c: Consumer, ps: list[TopicPartition]) -> None:
            assigned.pop(name, None)
        made[name].subscribe([topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
        t = threading.Thread(target=poll, args=(made[name],), daemon=True)
        pollers.append(t)
        t.start()

    def poll(c: Consumer) -> None:
        while not stop.is_set():
            c.poll(0.05)

    watchdog = StuckRebalanceWatchdog(bootstrap, group, stuck_s=STUCK_S, check_every_s=0.5)

    def everyone_assigned() -> bool:
        got = [p for ps in assigned.values() for p in ps]
        return len(assigned) == 3 and sorted(got) == list(range(PARTITIONS))

    try:
        subscribe("inst0")
        wait_until(lambda: rounds["inst0"] >= 1, "inst0 owns every partition", timeout=60)
        subscribe("inst1")
        started = time.monotonic()
        while not everyone_assigned():
            assert time.monotonic() - started < ASSIGNED_S, (f"not every member assigned within {ASSIGNED_S:.0f} s: "
                                                             f"{assigned}; rounds restarted: {watchdog.restarts}")
            watchdog.check()
            time.sleep(0.5)
        return watchdog.restarts, time.monotonic() - started
    finally:
        stop.set()
        for t in pollers:
            t.join(10)
        for c in made.values():
            c.close()


def test_watchdog_restarts_a_round_that_stranded_a_member(bootstrap: str, admin: AdminClient, unique: str) -> None:
    topic = f"stuck-{unique}"
    create_topics(admin, {topic: PARTITIONS})
    deadline = time.monotonic() + SPRING_S
    attempts = 0
    while True:
        attempts += 1
        restarts, took = _attempt(bootstrap, topic, f"stuck-{unique}-{attempts}")
        print(f"\nattempt {attempts}: all assigned after {took:.1f}s; rounds restarted: {restarts}")
        # a round that completes by itself is left alone; the stranded one is restarted (and the
        # rejoin after a restart may, rarely, spring the trap once more)
        assert restarts <= 2
        if restarts or not ON_DEV_BROKER:
            break
        # the join did not land in the window this time: every member was assigned without help
        if time.monotonic() > deadline:
            pytest.fail(f"in {attempts} attempts over {SPRING_S:.0f} s no round stranded a member: the dev broker "
                        "no longer forgets a pending JoinGroup? (then the watchdog may no longer be needed there)")
