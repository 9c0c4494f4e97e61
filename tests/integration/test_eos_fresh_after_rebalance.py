"""Under exactly-once a repartition topic is written in transactions, so each ends in a commit
marker: an offset no record has. After a rebalance, with no new input, the new owners' answers are
not flagged stale and no input partition shows a lag (the committed offsets are past the markers,
as Kafka Streams commits the consumer's position); before, every Get said ``stale: true`` and the
repartition topic showed a lag of one per partition until new input arrived."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from instance.local.cluster import produce, sample_lines
from kernel.local_read import Role
from router.client.sync_client import QueryClient
from tests.integration.helpers import query_all, wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration


@pytest.mark.timeout(600)
def test_no_stale_flag_and_no_lag_after_a_rebalance_without_new_input(bootstrap: str, tmp_path: Path,
                                                                      unique: str) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "processing.guarantee=exactly_once_v2",
                                       "num.standby.replicas=1", partitions=3)
    lines = sample_lines(600, seed=5)
    truth = word_counts(lines)
    words = sorted(truth)
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        first = cluster.instances[0].target
        wait_until(lambda: query_all(first, words) == dict(truth), 180, "every count", cluster.logs)

        cluster.signal(1)  # a clean leave: the survivor takes every task over (a rebalance)
        assert cluster.wait_exit(1, 120) == 0
        cluster.wait_running(180, expected=1)

        with QueryClient(first, timeout=10) as q:
            def fresh() -> list[str]:
                """The words whose answer is not exact, not the active's, or flagged stale."""
                bad = []
                for w in words:
                    try:
                        r = q.get("counts", w)
                    except grpc.RpcError:
                        bad.append(w)
                        continue
                    if r.value != truth[w] or r.metadata["role"] is not Role.ACTIVE or r.metadata["stale"]:
                        bad.append(w)
                return bad
            # no new input from here on: the flags must clear by themselves
            wait_until(lambda: not fresh(), 120, "every answer exact, from the active and not stale",
                       lambda: f"{fresh()[:10]}\n{cluster.logs()}")

            def lags() -> list[tuple[str, int, int]]:
                d = q.describe()
                assert not d.input_lag_error, d.input_lag_error
                return [(x.topic, x.partition, x.lag) for x in d.input_lag if x.lag]
            wait_until(lambda: not lags(), 120, "no input partition with a lag", lambda: f"{lags()}")
            assert query_all(first, words) == dict(truth)
    finally:
        cluster.stop()
