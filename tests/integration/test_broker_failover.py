"""Three Apache Kafka brokers (replication factor 3, ``min.insync.replicas=2``): kill -9 the broker
that leads the input and changelog partitions while input flows. Nothing is lost, exactly-once stays
exact, and the counts converge within the leader election plus the usual catch-up.

Apache Kafka only: the dev broker runs one node (its restart is test_broker_outage.py).

Input is written before the kill and after it whatever the machine's speed: the feeder holds its
last chunks back until the broker is killed, so the producer has to get through the election.
"""

from __future__ import annotations

import collections
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from devtools.suite_broker import suite_engine
from instance.local import kafka_broker
from instance.local.cluster import produce, sample_lines
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster
from tests.integration.test_crash_recovery import wait_for_counts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(suite_engine() != "kafka" or bool(os.environ.get("IQMESH_BOOTSTRAP")),
                       reason="starts a three-node Apache Kafka of its own (IQMESH_BROKER=kafka)"),
]

LINES = 8_000
CHUNK = 500
#: chunks the feeder writes only once the leader is killed
AFTER_KILL = 4


def _leaders(bootstrap: str, topics: list[str]) -> collections.Counter[int]:
    """How many partitions of ``topics`` each broker leads."""
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return collections.Counter(p.leader for t in topics if t in md.topics for p in md.topics[t].partitions.values())


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_kill9_the_partition_leader_mid_run(tmp_path: Path, unique: str, guarantee: str) -> None:
    broker_dir = tmp_path / "brokers"
    bootstrap = kafka_broker.start_broker(broker_dir, brokers=3).bootstrap
    try:
        cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, f"processing.guarantee={guarantee}",
                                           "commit.interval.ms=500", "replication.factor=3", replication=3)
        lines = sample_lines(LINES, seed=21)
        truth = word_counts(lines)
        words = sorted(truth)
        cluster.start()
        try:
            cluster.wait_running(120)
            changelog = f"{cluster.application_id}-counts-changelog"
            killed = threading.Event()
            chunks = [lines[i:i + CHUNK] for i in range(0, LINES, CHUNK)]

            def feed() -> None:
                for n, chunk in enumerate(chunks):
                    if n == len(chunks) - AFTER_KILL:
                        killed.wait(300)
                    produce(bootstrap, topic, ((None, t.encode()) for t in chunk))
                    time.sleep(0.2)
            feeding = threading.Thread(target=feed, daemon=True)
            feeding.start()
            target = cluster.instances[0].target
            with QueryClient(target, timeout=5) as q:
                wait_until(lambda: (q.get("counts", words[0], allow_stale=True).value or 0) > 0, 90,
                           "the first input to be counted", cluster.logs)
            leaders = _leaders(bootstrap, [topic, changelog])
            victim = leaders.most_common(1)[0][0]
            assert kafka_broker.stop_node(broker_dir, victim, signal.SIGKILL)
            killed_at = time.monotonic()
            killed.set()
            feeding.join(120)
            assert not feeding.is_alive(), "the producer did not get through the leader election"
            wait_for_counts(target, truth, cluster, exact=guarantee == "exactly_once_v2")
            converged_s = time.monotonic() - killed_at
            assert victim not in _leaders(bootstrap, [topic, changelog])
            dead = [i.instance_id for i in cluster.instances if i.proc is None or i.proc.poll() is not None]
            assert not dead, f"{dead} exited after the leader was killed\n{cluster.logs()}"
            print(f"broker {victim} killed; counts {'exact' if guarantee != 'at_least_once' else 'complete'} "
                  f"{converged_s:.1f} s later")
        finally:
            cluster.stop()
    finally:
        kafka_broker.stop_broker(broker_dir)
