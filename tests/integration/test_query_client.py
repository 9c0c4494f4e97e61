"""The routing clients on three word-count instances, bootstrapped from one seed.

With a fresh table every key is answered by its owner without a hop (``forwarded`` false, every
partition, both the sync and the grpc.aio client), while the same key asked through the seed
the old way costs one. The instances speak the standard health and reflection services; a body
that is not a protobuf is INVALID_ARGUMENT; with a silent owner the client keeps to its deadline
and a hop within a short deadline gives up before it.
Then one instance stops: its health turns NOT_SERVING, and both clients, still holding the old
table, refresh it and get every count from the new owners, again without a hop.
"""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from instance.local.cluster import produce, sample_lines
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from router.client.async_client import AsyncQueryClient
from router.client.forward import FORWARD_TIMEOUT_S
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration

STORE = "counts"
DEADLINE_S = 3.0  # of a Get whose owner is silent; below the hop's own FORWARD_TIMEOUT_S (5 s)
SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


def _answers(q: QueryClient, words: list[str], timeout: float = 10) -> dict[str, Any]:
    return {w: q.get(STORE, w, timeout=timeout) for w in words}


async def _aanswers(q: AsyncQueryClient, words: list[str], timeout: float = 10) -> dict[str, Any]:
    return {w: await q.get(STORE, w, timeout=timeout) for w in words}


def _check_direct(answers: dict[str, Any], truth: dict[str, int], partitions: int, owners: int) -> None:
    """Every value right, none forwarded, every partition and owner seen; each result names the
    endpoint the client asked, which is the one that answered (``asked``: the gateway's ``via``)."""
    assert {w: r.value for w, r in answers.items()} == truth
    hopped = [w for w, r in answers.items() if r.metadata["forwarded"]]
    assert not hopped, f"paid a hop with a fresh table: {hopped}"
    wrong = {w: (r.asked, r.metadata["endpoint"]) for w, r in answers.items() if r.asked != r.metadata["endpoint"]}
    assert not wrong, f"asked is not the endpoint that answered: {wrong}"
    assert {r.metadata["partition"] for r in answers.values()} == set(range(partitions))
    assert len({r.metadata["served_by"] for r in answers.values()}) == owners


@pytest.mark.timeout(300)
def test_routing_clients_health_reflection_and_recovery(bootstrap: str, tmp_path: Path, unique: str) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 3, "commit.interval.ms=200")
    lines = sample_lines(1500, seed=21)
    truth = dict(word_counts(lines))
    words = sorted(truth)
    cluster.start()
    loop = asyncio.new_event_loop()
    try:
        cluster.wait_running(90)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        seed = cluster.instances[0].target
        q = QueryClient(seed, timeout=10)
        aq = AsyncQueryClient(seed, timeout=10)

        def counted() -> bool:
            try:
                return {w: r.value for w, r in _answers(q, words).items()} == truth
            except grpc.RpcError:
                return False
        wait_until(counted, 90, "every count", cluster.logs)

        # --- straight to the owner: no hop, every partition -------------------------------------
        _check_direct(_answers(q, words), truth, 6, 3)
        _check_direct(loop.run_until_complete(_aanswers(aq, words)), truth, 6, 3)
        assert [i.key for i in q.prefix_scan(STORE, "st")] == [w for w in words if w.startswith("st")]

        async def ascan() -> tuple[list[tuple[str, int]], str]:
            scan = aq.all(STORE, page_size=7)
            return [(i.key, i.value) async for i in scan], scan.asked
        entries, scanned_via = loop.run_until_complete(ascan())
        assert entries == sorted(truth.items(), key=lambda kv: kv[0].encode())
        assert scanned_via == seed  # the entry instance that scattered the scan

        dead = cluster.instances[2]
        owned = [w for w in words if q.get(STORE, w).metadata["served_by"] == dead.instance_id]
        assert owned
        stub = pb_grpc.InteractiveQueryStub(grpc.insecure_channel(seed))
        assert stub.Get(pb.GetRequest(store=STORE, key=owned[0]), timeout=10).metadata.forwarded  # the old way

        # --- health and reflection ------------------------------------------------------------
        for inst in cluster.instances:
            ch = grpc.insecure_channel(inst.target)
            health = health_pb2_grpc.HealthStub(ch)
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == SERVING
            assert health.Check(health_pb2.HealthCheckRequest(service="iqmesh.v1.InteractiveQuery"),
                                timeout=5).status == SERVING
        refl = reflection_pb2_grpc.ServerReflectionStub(grpc.insecure_channel(seed))
        asked = [reflection_pb2.ServerReflectionRequest(list_services=""),
                 reflection_pb2.ServerReflectionRequest(file_containing_symbol="iqmesh.v1.InteractiveQuery")]
        listed, described = list(refl.ServerReflectionInfo(iter(asked), timeout=5))
        assert {s.name for s in listed.list_services_response.service} >= {
            "iqmesh.v1.InteractiveQuery", "grpc.health.v1.Health"}
        assert described.file_descriptor_response.file_descriptor_proto

        # --- a body that is not a protobuf: INVALID_ARGUMENT, not grpcio's INTERNAL -------------------
        raw = grpc.insecure_channel(seed)
        for method, body in (("Get", b"\xff\xff\xff\xff"), ("Get", b"\x0a\x02\xff\xfe"),
                             ("Metadata", b"\x0a\x80"), ("All", b"\x0a")):
            call = (raw.unary_stream if method == "All" else raw.unary_unary)(f"/iqmesh.v1.InteractiveQuery/{method}")
            with pytest.raises(grpc.RpcError) as e:
                result = call(body, timeout=5)
                list(result) if method == "All" else result
            assert e.value.code() is grpc.StatusCode.INVALID_ARGUMENT, (method, body, e.value)

        # --- the hop carries the caller's deadline ----------------------------------------------
        # the key is placed again just before the stop, with a table fetched now: the group may have
        # moved tasks since the words above were placed (a busy machine), and a key whose owner
        # is not the stopped instance would be answered
        with QueryClient(seed, timeout=10) as fresh:
            silent = next(w for w in owned if fresh.get(STORE, w).metadata["served_by"] == dead.instance_id)
        cluster.signal(2, signal.SIGSTOP)
        try:
            cluster.wait_stopped(2)
            # the routing client keeps to its caller's deadline, retries included: it ends within
            # 1 s and the wake-up of a busy machine, far below what it would take otherwise (one
            # attempt of FORWARD_TIMEOUT_S, or the client's own 10 s timeout)
            t0 = time.monotonic()
            try:
                answered = q.get(STORE, silent, timeout=1.0)
            except grpc.RpcError:
                pass
            else:
                pytest.fail(f"{silent!r} answered while its owner {dead.instance_id} was stopped: "
                            f"{answered.metadata}\n{cluster.logs()}")
            assert time.monotonic() - t0 < FORWARD_TIMEOUT_S
            with pytest.raises(grpc.RpcError) as e:
                stub.Get(pb.GetRequest(store=STORE, key=silent), timeout=DEADLINE_S)
        finally:
            cluster.signal(2, signal.SIGCONT)
        # the seed gave up on the silent owner within the deadline and said so (UNAVAILABLE: an
        # answer before the caller's deadline, which would otherwise have ended the call with
        # DEADLINE_EXCEEDED); a hop with its own 5 s timeout would have left the caller with that
        assert e.value.code() is grpc.StatusCode.UNAVAILABLE, e.value

        # --- one instance stops: NOT_SERVING, then both clients refresh their tables -------------
        statuses: list[int] = []
        watch = health_pb2_grpc.HealthStub(grpc.insecure_channel(dead.target)).Watch(
            health_pb2.HealthCheckRequest(), timeout=60)

        def follow() -> None:
            try:
                for r in watch:
                    statuses.append(r.status)
            except grpc.RpcError:
                pass  # the server went away
        follower = threading.Thread(target=follow, daemon=True)
        follower.start()
        wait_until(lambda: SERVING in statuses, 60, "the health watch to report SERVING")
        old_table = q.table
        cluster.signal(2, signal.SIGTERM)
        assert cluster.wait_exit(2, 60) == 0
        follower.join(60)
        assert statuses[statuses.index(SERVING):].count(NOT_SERVING) >= 1, statuses

        after = _answers(q, words, timeout=60)
        assert q.table is not old_table
        _check_direct(after, truth, 6, 2)
        assert dead.instance_id not in {r.metadata["served_by"] for r in after.values()}
        _check_direct(loop.run_until_complete(_aanswers(aq, words, timeout=60)), truth, 6, 2)
        q.close()
        loop.run_until_complete(aq.close())
    finally:
        loop.close()
        cluster.stop()
