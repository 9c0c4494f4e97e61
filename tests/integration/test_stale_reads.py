"""Read options while a store restores: require_active is refused, allow_stale is answered and
flagged RESTORING with its lag, a position bound ahead of the replica is NOT_UP_TO_BOUND."""

from __future__ import annotations

import grpc
import pytest

from devtools.cluster import produce
from instance.server.tokens import PositionToken
from router.client import QueryClient
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

KEYS = 300_000


def test_queries_during_restore_and_position_bounds(bootstrap, tmp_path, unique) -> None:  # type: ignore[no-untyped-def]
    # small restore batches (Kafka Streams' restore.consumer.max.poll.records) keep the restore
    # going long enough to query it
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 1, "commit.interval.ms=500",
                                       "restore.consumer.max.poll.records=10", partitions=1)
    produce(bootstrap, topic, ((None, f"k{i} common".encode()) for i in range(KEYS)))
    cluster.start()
    target = cluster.instances[0].target
    try:
        with QueryClient(target) as q:
            def counted() -> bool:
                try:
                    return q.get("counts", "common").value == KEYS
                except grpc.RpcError:
                    return False
            wait_until(counted, 180, "all input counted", cluster.logs)

            r = q.get("counts", "k7")
            assert r.metadata["role"] == "ACTIVE" and r.metadata["stale"] is False
            token = PositionToken.decode(r.metadata["position_token"])
            assert token.offset == r.metadata["position"] >= 0
            assert q.get("counts", "k7", position=r.metadata["position_token"]).value == 1
            ahead = PositionToken(token.store, token.partition, token.offset + 1_000_000).encode()
            with pytest.raises(grpc.RpcError) as e:
                q.get("counts", "k7", position=ahead)
            assert e.value.code() is grpc.StatusCode.UNAVAILABLE
            assert e.value.details().startswith("NOT_UP_TO_BOUND")
            with pytest.raises(grpc.RpcError) as e:
                q.get("counts", "k7", position="garbage")
            assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT

        # restart without checkpoints: the whole changelog is restored while we ask
        cluster.signal(0)
        assert cluster.wait_exit(0, 60) == 0
        for ck in cluster.instances[0].state_dir.rglob(".checkpoint"):
            ck.unlink()
        cluster.start()
        seen_refused: set[str] = set()
        restoring_meta = None
        with QueryClient(target, timeout=2) as q:
            def observe() -> bool:
                """Both answers while the replica is restoring (the refusal right after the
                RESTORING answer, so it is not a start-up refusal)."""
                nonlocal restoring_meta
                try:
                    r = q.get("counts", "k7", allow_stale=True)
                except grpc.RpcError:
                    return False
                if r.metadata["role"] != "RESTORING":
                    return False
                restoring_meta = r.metadata
                try:
                    q.get("counts", "k7")
                except grpc.RpcError as err:
                    if err.code() is grpc.StatusCode.UNAVAILABLE:
                        seen_refused.add((err.details() or "").split(":", 1)[0])
                return bool(seen_refused)
            wait_until(observe, 60, "a refused require_active query and a RESTORING answer", cluster.logs)
        assert seen_refused & {"REBALANCING", "NOT_ACTIVE"}, seen_refused
        assert restoring_meta["stale"] is True
        assert restoring_meta["lag"] > 0
        assert restoring_meta["end_offset"] > restoring_meta["position"]
        with QueryClient(target) as q:
            def active() -> bool:
                try:
                    return q.get("counts", "common").metadata["role"] == "ACTIVE"
                except grpc.RpcError:
                    return False
            wait_until(active, 120, "the end of the restore", cluster.logs)
            assert q.get("counts", "common").value == KEYS
    finally:
        cluster.stop()
