"""Read options while a store restores: require_active is refused, allow_stale is answered and
flagged RESTORING with its lag, a position bound ahead of the replica is NOT_UP_TO_BOUND.

The restore is held open by the test (Hold.RESTORE, instance/runtime/holds.py) while it asks, then
released: it is observed whatever the machine's speed.
"""

from __future__ import annotations

import grpc
import pytest

from instance.local.cluster import produce
from instance.runtime.holds import Hold
from kernel.local_read import Role
from kernel.status_details import refusal_of
from kernel.tokens import PositionToken
from kernel.unavailable import FailureReason
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

KEYS = 3_000
#: the deadlines: generous, each is only the upper bound of a wait on a condition
COUNT_S, EXIT_S, RESTORE_START_S, RESTORE_END_S = 180.0, 120.0, 120.0, 180.0


@pytest.mark.timeout(COUNT_S + EXIT_S + RESTORE_START_S + RESTORE_END_S + 120)
def test_queries_during_restore_and_position_bounds(bootstrap, tmp_path, unique) -> None:  # type: ignore[no-untyped-def]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 1, "commit.interval.ms=500", partitions=1)
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
            wait_until(counted, COUNT_S, "all input counted", cluster.logs)

            r = q.get("counts", "k7")
            assert r.metadata["role"] is Role.ACTIVE and r.metadata["stale"] is False
            token = PositionToken.decode(r.metadata["position_token"])
            assert token.offset == r.metadata["position"] >= 0
            assert q.get("counts", "k7", position=r.metadata["position_token"]).value == 1
            ahead = PositionToken(token.store, token.partition, token.offset + 1_000_000).encode()
            with pytest.raises(grpc.RpcError) as e:
                q.get("counts", "k7", position=ahead)
            assert e.value.code() is grpc.StatusCode.UNAVAILABLE
            refusal = refusal_of(e.value)
            assert refusal is not None and refusal.reason is FailureReason.NOT_UP_TO_BOUND, e.value
            with pytest.raises(grpc.RpcError) as e:
                q.get("counts", "k7", position="garbage")
            assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT
            # a token for a partition the store does not have (it has one) is the caller's mistake
            elsewhere = PositionToken(token.store, 1, token.offset).encode()
            for scan in (False, True):
                with pytest.raises(grpc.RpcError) as e:
                    list(q.all("counts", position=elsewhere)) if scan else q.get("counts", "k7", position=elsewhere)
                assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT, e.value
                assert "names partition 1 of store 'counts', which has 1" in (e.value.details() or ""), e.value

        # restart without checkpoints: the whole changelog is restored, held open while we ask
        cluster.signal(0)
        assert cluster.wait_exit(0, EXIT_S) == 0
        for ck in cluster.instances[0].state_dir.rglob(".checkpoint"):
            ck.unlink()
        cluster.hold(Hold.RESTORE)
        cluster.start()
        with QueryClient(target, timeout=5) as q:
            def restoring() -> dict | None:
                try:
                    r = q.get("counts", "common", allow_stale=True)
                except grpc.RpcError:
                    return None  # not up yet, or the store is not open yet
                assert r.metadata["role"] is not Role.ACTIVE, "an answer as the active while the restore is held"
                return r.metadata if r.metadata["role"] is Role.RESTORING else None
            meta = wait_until(restoring, RESTORE_START_S, "a RESTORING answer", cluster.logs)
            assert meta["stale"] is True
            assert meta["lag"] > 0
            assert meta["end_offset"] > meta["position"]
            # the replica is restoring: a query that needs the active is refused, with a reason
            # that says why (or the client's own NOT_AVAILABLE when the busy instance does not
            # answer within the short deadline); never answered as if it were the active's
            with pytest.raises(grpc.RpcError) as e:
                q.get("counts", "common", timeout=1)
            assert e.value.code() is grpc.StatusCode.UNAVAILABLE, e.value
            refusal = refusal_of(e.value)
            assert refusal is not None and refusal.reason in (
                FailureReason.REBALANCING, FailureReason.NOT_ACTIVE, FailureReason.NOT_AVAILABLE), e.value
        cluster.release(Hold.RESTORE)
        with QueryClient(target) as q:
            def active() -> bool:
                try:
                    return q.get("counts", "common").metadata["role"] is Role.ACTIVE
                except grpc.RpcError:
                    return False
            wait_until(active, RESTORE_END_S, "the end of the restore", cluster.logs)
            assert q.get("counts", "common").value == KEYS
    finally:
        cluster.stop()
