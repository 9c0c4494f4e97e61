"""Read options while a store restores: require_active is refused, allow_stale is answered and
flagged RESTORING with its lag, a position bound ahead of the replica is NOT_UP_TO_BOUND."""

from __future__ import annotations

import time

import grpc
import pytest

from instance.local.cluster import produce
from router.client.sync_client import QueryClient
from router.core.tokens import PositionToken
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

# Sized so that neither phase depends on the machine's speed: counting KEYS lines takes seconds
# (the waits below allow minutes, for a busy 2-core CI machine), and restoring their changelog
# (KEYS + a few records) one record per stream-thread loop iteration
# (restore.consumer.max.poll.records=1, Kafka Streams' setting) takes seconds on a fast machine
# too, so the restore stays observable without a large input.
KEYS = 100_000
#: the deadlines: generous, each is only the upper bound of a wait on a condition
COUNT_S, EXIT_S, RESTORE_START_S, RESTORE_END_S = 240.0, 120.0, 120.0, 240.0


@pytest.mark.timeout(COUNT_S + EXIT_S + RESTORE_START_S + RESTORE_END_S + 120)
def test_queries_during_restore_and_position_bounds(bootstrap, tmp_path, unique) -> None:  # type: ignore[no-untyped-def]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 1, "commit.interval.ms=500",
                                       "restore.consumer.max.poll.records=1", partitions=1)
    produce(bootstrap, topic, ((None, f"k{i} common".encode()) for i in range(KEYS)))
    t0 = time.monotonic()
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
            print(f"counted {KEYS} lines in {time.monotonic() - t0:.1f}s")  # shown if the test fails

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
        assert cluster.wait_exit(0, EXIT_S) == 0
        for ck in cluster.instances[0].state_dir.rglob(".checkpoint"):
            ck.unlink()
        t0 = time.monotonic()
        cluster.start()
        seen_refused: set[str] = set()
        restoring_meta = None
        with QueryClient(target, timeout=5) as q:
            def observe() -> bool:
                """Both answers while the replica is restoring (the refusal right after the
                RESTORING answer, so it is not a start-up refusal)."""
                nonlocal restoring_meta
                try:
                    r = q.get("counts", "k7", allow_stale=True)
                except grpc.RpcError:
                    return False  # not up yet, or the store is not open yet
                if r.metadata["role"] == "ACTIVE":
                    raise AssertionError("the restore ended before it could be observed (raise KEYS):\n"
                                         + cluster.logs())
                if r.metadata["role"] != "RESTORING":
                    return False
                restoring_meta = r.metadata
                try:  # a short deadline: the client retries a refusal while its deadline allows
                    q.get("counts", "k7", timeout=0.3)
                except grpc.RpcError as err:
                    if err.code() is grpc.StatusCode.UNAVAILABLE:
                        seen_refused.add((err.details() or "").split(":", 1)[0])
                return bool(seen_refused)
            deadline = time.monotonic() + RESTORE_START_S
            while not observe():  # polled faster than wait_until: the restore may be short
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out after {RESTORE_START_S}s waiting for a refused "
                                         f"require_active query and a RESTORING answer\n{cluster.logs()}")
                time.sleep(0.02)
            print(f"restoring after {time.monotonic() - t0:.1f}s")
        # refused as not active, or (an instance busy restoring may not answer the short deadline at
        # all) the client's own NOT_AVAILABLE: either way no answer claims to be the active's
        assert seen_refused & {"REBALANCING", "NOT_ACTIVE", "NOT_AVAILABLE"}, seen_refused
        assert restoring_meta["stale"] is True
        assert restoring_meta["lag"] > 0
        assert restoring_meta["end_offset"] > restoring_meta["position"]
        with QueryClient(target) as q:
            def active() -> bool:
                try:
                    return q.get("counts", "common").metadata["role"] == "ACTIVE"
                except grpc.RpcError:
                    return False
            wait_until(active, RESTORE_END_S, "the end of the restore", cluster.logs)
            print(f"restored after {time.monotonic() - t0:.1f}s")
            assert q.get("counts", "common").value == KEYS
    finally:
        cluster.stop()
