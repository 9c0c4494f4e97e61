"""SIGTERM while the broker does not answer: the instance exits within ``iqmesh.shutdown.timeout.ms``
(Kafka Streams' close(Duration)) instead of waiting up to task.timeout.ms for acknowledgements, so
a pod leaves within its grace period rather than being killed (a CI run of the Kubernetes simulator
saw a pod SIGKILLed with 14 records unacknowledged by a busy broker)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from devtools.suite_broker import suite_engine
from instance.local import engines
from instance.local.cluster import produce, sample_lines
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration

SHUTDOWN_S = 5.0


def test_sigterm_with_the_broker_gone_exits_within_the_shutdown_timeout(tmp_path: Path, unique: str) -> None:
    if os.environ.get("IQMESH_BOOTSTRAP"):
        pytest.skip("stops a broker of its own; IQMESH_BOOTSTRAP names one it cannot stop")
    broker_dir = tmp_path / "broker"
    bootstrap = engines.start(suite_engine(), broker_dir).bootstrap
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 1, "commit.interval.ms=60000",
                                       f"iqmesh.shutdown.timeout.ms={int(SHUTDOWN_S * 1000)}")
    lines = sample_lines(20_000, seed=5)
    first = sorted(word_counts(lines))[0]
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        with QueryClient(cluster.instances[0].target, timeout=5) as q:
            wait_until(lambda: (q.get("counts", first, allow_stale=True).value or 0) > 0, 90,
                       "the first input to be counted", cluster.logs)
        # the broker goes while the instance works: what it writes from now on is never acknowledged,
        # and nothing it read since the start is committed (a 60 s commit interval)
        engines.stop(broker_dir)
        start = time.monotonic()
        cluster.signal(0)
        code = cluster.wait_exit(0, timeout=120)
        took = time.monotonic() - start
        assert code == 0, cluster.logs()
        # the close gives up after the timeout; the final metadata gets at most about 6 s more
        assert took < SHUTDOWN_S + 10, f"exited {took:.1f} s after SIGTERM\n{cluster.logs()}"
    finally:
        cluster.stop()
        engines.stop(broker_dir)
