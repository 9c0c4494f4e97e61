"""At-least-once counts exactly through a repartition topic (instance/state/origins.py).

The word count's first sub-topology splits lines and writes words to a repartition topic; the
second counts them. With ``commit.interval.ms`` far beyond the test nothing is ever committed, so
an instance killed with ``kill -9`` leaves every record it processed to be processed again: its
upstream tasks write their words to the repartition topic a second time, and its downstream tasks
read the whole repartition topic again. Every count must still equal the input's, on the
survivors, and after the killed instance is back: with the record cache on and off, with a
standby taking over warm, with two stream threads per instance.
"""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest

from instance.local.cluster import LocalCluster, produce, sample_lines
from tests.integration.helpers import query_all, wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration

NEVER_MS = 600_000  # no commit within the test


def wait_exact(target: str, truth: Counter[str], cluster: LocalCluster, what: str) -> None:
    """Until every count equals the truth (a count only grows, so a record applied twice keeps it
    above the truth for good: the wait then fails with the difference)."""
    words = sorted(truth)
    last: dict[str, object] = {}

    def exact() -> bool:
        last.clear()
        last.update(query_all(target, words))
        return last == dict(truth)

    def diff() -> str:
        off = {w: (last.get(w), truth[w]) for w in words if last.get(w) != truth[w]}
        return f"{len(off)} counts differ (got, truth), e.g. {dict(list(off.items())[:8])}\n{cluster.logs()}"

    wait_until(exact, 180, what, diff)


@pytest.mark.parametrize("config", [
    (),  # the record cache on (the default)
    ("num.standby.replicas=1", "statestore.cache.max.bytes=0"),  # a warm takeover, every update logged
    ("num.stream.threads=2",),
], ids=["cache", "standby-no-cache", "two-threads"])
def test_kill9_with_nothing_committed_counts_exactly(bootstrap: str, tmp_path: Path, unique: str,
                                                     config: tuple[str, ...]) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 3, f"commit.interval.ms={NEVER_MS}", *config)
    lines = sample_lines(6000, seed=11)
    first, second = lines[:4000], lines[4000:]
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in first))
        target = cluster.instances[0].target
        wait_exact(target, word_counts(first), cluster, "the first counts, exact before the kill")
        cluster.signal(2, signal.SIGKILL)
        cluster.wait_exit(2, 30)
        # input after the kill: counted only once the survivors own the victim's tasks, after the
        # words those tasks write again (same partitions, in order), so exact counts of everything
        # mean every record written twice was applied once
        produce(bootstrap, topic, ((None, t.encode()) for t in second))
        wait_exact(target, word_counts(lines), cluster, "exact counts on the survivors")
        cluster.start([2])  # same instance id and state dir: it takes tasks back, restoring them
        cluster.wait_running(120, expected=3)
        more = sample_lines(1000, seed=12)
        produce(bootstrap, topic, ((None, t.encode()) for t in more))
        wait_exact(cluster.instances[2].target, word_counts(lines + more), cluster,
                   "exact counts once the killed instance is back")
    finally:
        cluster.stop()
