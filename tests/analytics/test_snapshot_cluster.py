"""The snapshot job against real 3-instance word-count clusters (dev broker, ``iqmesh run``
processes, PySpark on local[2]), under at-least-once and exactly-once:

- taken while input keeps flowing, a snapshot equals the state at its cut offsets, recomputed here
  from the changelog without the job (read_committed, up to the cut), and the input went on past
  the cut; under exactly-once an aborted transaction in the changelog never appears;
- once processing settles, the snapshot equals the counts read through the mesh, key for key;
  the instances source gives the same rows (and says who served each partition); an incremental
  snapshot onto the one taken while input flowed equals a full one at the same cut; ``--at`` a
  position token from a query reply lines the snapshot up with that reply.
"""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from analytics.snapshot import SnapshotOptions
from analytics.snapshot.job import run_snapshot
from instance.local.cluster import LocalCluster, produce, sample_lines
from kernel.partitioner import default_partition
from kernel.tokens import PositionToken
from router.client.sync_client import QueryClient
from tests.analytics.helpers import committed_to_end, int_cut, snapshot_rows, state_at
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration
STORE = "counts"


class Feeder(threading.Thread):
    """Keeps writing lines (a batch every 50 ms) until stopped; ``sent`` is every line written."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.sent: list[str] = []
        self._halt = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            seed = 0
            while not self._halt.is_set():
                batch = sample_lines(25, seed=seed)
                produce(self.bootstrap, self.topic, ((None, t.encode()) for t in batch))
                self.sent += batch
                seed += 1
                self._halt.wait(0.05)
        except BaseException as e:  # noqa: BLE001 - reported by stop()
            self.error = e

    def stop(self) -> list[str]:
        self._halt.set()
        self.join(60)
        assert self.error is None, self.error
        return self.sent


def _ends(bootstrap: str, topic: str, partitions: int = 6) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "isolation.level": "read_committed"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def _counts(spark: Any, out: Path) -> dict[str, int]:
    return {r["key_string"]: r["value_long"] for r in spark.read.parquet(f"{out}/{STORE}").collect()}


def _rows(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in spark.read.parquet(f"{out}/{STORE}").collect())


def _mesh(cluster: LocalCluster) -> dict[str, int]:
    with QueryClient(cluster.instances[1].target, timeout=10) as q:
        return {i.key: i.value for i in q.all(STORE, require_complete=True)}


def _snapshot_while_flowing(spark: Any, bootstrap: str, cluster: LocalCluster, topic: str, out: Path,
                            before_cut: Any = None) -> tuple[list[str], dict[str, Any]]:
    changelog = f"{cluster.application_id}-{STORE}-changelog"
    feeder = Feeder(bootstrap, topic)
    feeder.start()
    try:
        wait_until(lambda: sum(_ends(bootstrap, changelog).values()) > 200, 60, "the changelog to fill", cluster.logs)
        if before_cut is not None:
            before_cut()
        manifest = run_snapshot(SnapshotOptions(bootstrap, cluster.application_id, str(out)), spark)
        cut = int_cut(manifest, STORE)
        # the state at the cut, recomputed without the job
        assert snapshot_rows(spark, out, STORE) == state_at(bootstrap, changelog, cut)
        # and the input went on past it
        wait_until(lambda: any(e > cut[p] for p, e in _ends(bootstrap, changelog).items()), 120,
                   "the changelog to move past the cut", cluster.logs)
    finally:
        lines = feeder.stop()
    return lines, manifest


@pytest.mark.timeout(300)
def test_at_least_once(spark: Any, bootstrap: str, tmp_path: Path, unique: str) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 3, "commit.interval.ms=200")
    cluster.start()
    try:
        cluster.wait_running(120)
        flowing = tmp_path / "flowing"
        lines, m1 = _snapshot_while_flowing(spark, bootstrap, cluster, topic, flowing)
        truth = dict(word_counts(lines))
        wait_until(lambda: _mesh(cluster) == truth, 90, "the mesh to count every line", cluster.logs)
        # at-least-once, the mesh answers from the stores' caches too: the changelogs hold those
        # counts once a commit covered every record read (not some time after the answers, when a
        # busy machine may not have committed yet)
        app = cluster.application_id
        wait_until(lambda: committed_to_end(bootstrap, app, topic) is None, 90, "a commit of everything read",
                   lambda: f"{committed_to_end(bootstrap, app, topic)}\n{cluster.logs()}")
        mesh = _mesh(cluster)

        # lined up with a query reply: its partition exactly at the reply's position
        with QueryClient(cluster.instances[0].target, timeout=10) as q:
            reply = q.get(STORE, "kafka")
        token = PositionToken.decode(reply.metadata["position_token"])
        quiet = tmp_path / "quiet"
        m2 = run_snapshot(SnapshotOptions(bootstrap, cluster.application_id, str(quiet),
                                          at=(reply.metadata["position_token"],)), spark)
        assert int_cut(m2, STORE)[token.partition] == token.offset
        assert token.partition == default_partition(b"kafka", 6)
        counts = _counts(spark, quiet)
        assert counts == mesh == truth and counts["kafka"] == reply.value

        # the instances source: the same rows, and who served each partition
        live = tmp_path / "live"
        m3 = run_snapshot(SnapshotOptions(bootstrap, cluster.application_id, str(live), source="instances"), spark)
        assert snapshot_rows(spark, live, STORE) == snapshot_rows(spark, quiet, STORE)
        served = m3["served"][STORE]
        assert sorted(served) == [str(p) for p in range(6)]
        assert {s["served_by"] for s in served.values()} == {i.instance_id for i in cluster.instances}
        assert all(s["role"] == "ACTIVE" and s["lag"] == 0 and not s["stale"] for s in served.values())
        assert m3["cut"] == m2["cut"] and m3["stores"][STORE]["rows"] == len(truth)

        # incremental onto the snapshot taken while input flowed == the full one at the same cut
        inc = tmp_path / "incremental"
        m4 = run_snapshot(SnapshotOptions(bootstrap, cluster.application_id, str(inc), at=(m2["cut_token"],),
                                          incremental=str(flowing)), spark)
        assert m4["stores"][STORE]["mode"] == "incremental" and m4["base"]["cut"] == m1["cut"]
        assert _rows(spark, inc) == _rows(spark, quiet)
    finally:
        cluster.stop()


@pytest.mark.timeout(300)
def test_exactly_once(spark: Any, bootstrap: str, tmp_path: Path, unique: str) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 3, "commit.interval.ms=200",
                                       "processing.guarantee=exactly_once_v2")
    changelog = f"{cluster.application_id}-{STORE}-changelog"
    cluster.start()
    try:
        cluster.wait_running(120)

        def zombie_aborts() -> None:
            """A writer that aborts (as a fenced zombie's transaction is): its records never count."""
            tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"zombie-{unique}"})
            tx.init_transactions()
            tx.begin_transaction()
            for p in range(6):
                tx.produce(changelog, struct.pack(">q", 10**9), b"zz-aborted-%d" % p, partition=p)
            tx.flush(30)
            tx.abort_transaction()

        lines, m1 = _snapshot_while_flowing(spark, bootstrap, cluster, topic, tmp_path / "flowing", zombie_aborts)
        assert not any(k.startswith(b"zz-") for _, k in snapshot_rows(spark, tmp_path / "flowing", STORE))
        truth = dict(word_counts(lines))
        wait_until(lambda: _mesh(cluster) == truth, 90, "the mesh to count every line", cluster.logs)
        m2 = run_snapshot(SnapshotOptions(bootstrap, cluster.application_id, str(tmp_path / "quiet")), spark)
        assert _counts(spark, tmp_path / "quiet") == _mesh(cluster) == truth
        assert m2["stores"][STORE]["rows"] == len(truth)
        assert all(int_cut(m2, STORE)[p] >= o for p, o in int_cut(m1, STORE).items())
    finally:
        cluster.stop()

