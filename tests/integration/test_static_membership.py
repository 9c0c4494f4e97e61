"""Static membership (group.instance.id): an instance restarted within the session timeout gets
its own partitions back, with no rebalance of the others, and restores only the delta."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from instance.local.cluster import produce, sample_lines
from router.client.sync_client import QueryClient
from tests.integration.helpers import query_all, static_membership, wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration


def _tasks(target: str, instance_id: str) -> tuple[str, ...]:
    with QueryClient(target) as q:
        for i in q.metadata().instances:
            if i.instance_id == instance_id:
                return tuple(sorted(i.active_tasks))
    return ()


def test_restart_within_session_timeout_keeps_partitions(bootstrap: str, tmp_path: Path, unique: str) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "session.timeout.ms=30000",
                                       "commit.interval.ms=300")
    static_membership(cluster)
    lines = sample_lines(3000, seed=9)
    truth = word_counts(lines)
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        other = cluster.instances[1]
        wait_until(lambda: query_all(other.target, sorted(truth)) == dict(truth), 120, "all counts", cluster.logs)
        me = cluster.instances[0]
        before = _tasks(other.target, me.instance_id)
        assert before
        other_log_len = len(other.log_path.read_text())

        cluster.signal(0)
        assert cluster.wait_exit(0, 60) == 0
        my_log_len = len(me.log_path.read_text())
        cluster.start([0])
        cluster.wait_running(120, expected=2)
        assert _tasks(other.target, me.instance_id) == before
        assert query_all(other.target, sorted(truth)) == dict(truth)
        other_after = other.log_path.read_text()[other_log_len:]
        assert "REBALANCING" not in other_after, other_after
        second_run = me.log_path.read_text()[my_log_len:]
        assert sum(int(n) for n in re.findall(r"restore-end .* restored=(\d+)", second_run)) == 0
    finally:
        cluster.stop()


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once_v2"])
def test_a_static_instance_stopped_for_good_hands_its_tasks_over(bootstrap: str, tmp_path: Path, unique: str,
                                                                 guarantee: str) -> None:
    """Scale-in with static membership: the stopped instance sends no LeaveGroup, so its tasks move
    once its session times out (Apache Kafka expires the member; on the dev broker, which never
    does, the membership assist removes it), and the counts stay exact."""
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "session.timeout.ms=6000",
                                       "commit.interval.ms=300", f"processing.guarantee={guarantee}")
    static_membership(cluster)
    lines = sample_lines(3000, seed=10)
    truth = word_counts(lines)
    half = len(lines) // 2
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[:half]))
        stays, leaves = cluster.instances[0], cluster.instances[1]
        assert _tasks(stays.target, leaves.instance_id)
        cluster.signal(1)
        assert cluster.wait_exit(1, 60) == 0
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[half:]))
        # every task on the one left: session.timeout.ms (6 s) plus a rebalance, well within 90 s
        wait_until(lambda: len(_tasks(stays.target, stays.instance_id)) == 12, 90,
                   "the remaining instance to own every task", cluster.logs)
        wait_until(lambda: query_all(stays.target, sorted(truth)) == dict(truth), 120, "exact counts", cluster.logs)
    finally:
        cluster.stop()
