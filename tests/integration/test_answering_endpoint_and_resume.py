"""Issue 16, points 1 and 2, on one word-count instance.

Point 1: a server of another application behind an address refuses calls meant for this one
(FAILED_PRECONDITION, WRONG_APPLICATION), and the client and the forwarding hop take it for the
wrong endpoint: the client asks the next one, the hop's caller the next candidate.

Point 2: a watch stopped early (the CLI's --limit, a Python client leaving its loop) hands back a
resume token at the last change it delivered, so resuming from it returns the rest; before, the
token held the end of the batch the change came in and the rest was lost.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from confluent_kafka import Consumer, TopicPartition

from instance.app_loader import load_topology
from instance.local.broker import free_port
from instance.local.cluster import LocalCluster, produce
from instance.runtime.kafka_streams import KafkaStreams
from instance.server.servicer import QueryServer
from kernel.application_guard import APPLICATION_HEADER, is_wrong_application
from kernel.channels import ChannelPool
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.unavailable import FailureReason, UnavailableError
from router.client.async_client import AsyncQueryClient
from router.client.forward import forward_get
from router.client.sync_client import QueryClient
from router.client.watch_client import Change
from tests.integration.helpers import APP, wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

STORE = "counts"
WORD = "bigword"
TIMES = 6
#: the deadline of the watches below: each ends at its --limit (or the loop's break) long before
#: on any machine; the deadline only bounds a failure
WATCH_S = "90"


@pytest.fixture(scope="module")
def wc(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """One instance; WORD counted TIMES times, each count a changelog record of its own (they
    come in one batch when read from the beginning)."""
    import uuid

    unique = uuid.uuid4().hex[:10]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path_factory.mktemp("resume"), unique, 1,
                                       "commit.interval.ms=200", partitions=2)
    cluster.start()
    try:
        cluster.wait_running(90)
        changelog = f"{cluster.application_id}-{STORE}-changelog"
        with QueryClient(cluster.instances[0].target, timeout=10) as q:
            for i in range(1, TIMES + 1):  # a round per count: each count its own changelog record
                before = _written(bootstrap, changelog)
                produce(bootstrap, topic, [(None, WORD.encode())])
                wait_until(lambda i=i: q.get(STORE, WORD).value == i, 60, f"{WORD} counted {i} times", cluster.logs)
                wait_until(lambda b=before: _written(bootstrap, changelog) > b, 60, "the count in the changelog",
                           cluster.logs)
        yield cluster
    finally:
        cluster.stop()


def _written(bootstrap: str, topic: str) -> int:
    """Records (and transaction markers) written to ``topic`` so far, over its partitions."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "resume-test", "enable.auto.commit": False})
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in parts)
    finally:
        c.close()


@pytest.fixture(scope="module")
def other_application(wc: LocalCluster) -> Iterator[str]:
    """The query server of an instance of another application (not started: it refuses before it
    would read anything), at an address of its own."""
    port = free_port()
    streams = KafkaStreams(load_topology(APP), {"application.id": "another-app", "bootstrap.servers": wc.bootstrap,
                                                "application.server": f"127.0.0.1:{port}"})
    server = QueryServer(streams, port)
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def _cli(*args: str, timeout: float = 3 * float(WATCH_S)) -> list[dict[str, Any]]:
    out = subprocess.run([sys.executable, "-m", "iqmesh", *args], capture_output=True, text=True,
                         timeout=timeout, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def test_another_applications_server_refuses_and_is_passed_over(wc: LocalCluster, other_application: str) -> None:
    app, target = wc.application_id, wc.instances[0].target
    stub = pb_grpc.InteractiveQueryStub(grpc.insecure_channel(other_application))
    with pytest.raises(grpc.RpcError) as refused:
        stub.Get(pb.GetRequest(store=STORE, key=WORD), metadata=((APPLICATION_HEADER, app),), timeout=5)
    assert refused.value.code() is grpc.StatusCode.FAILED_PRECONDITION
    assert is_wrong_application(refused.value), refused.value  # the typed details say why
    details = refused.value.details()
    assert "another-app" in details and app in details, details  # and the text names both, for people
    # a call that names no application is served as before; Metadata names the application
    assert stub.Metadata(pb.MetadataRequest(), timeout=5).application_id == "another-app"
    with QueryClient(target, timeout=10) as q:
        assert q.metadata().application_id == app

    # a client that knows its application passes over the other one's server (the first seed)
    with QueryClient(f"{other_application},{target}", timeout=10, application_id=app) as q:
        r = q.get(STORE, WORD)
        assert (r.value, r.metadata["served_by"]) == (TIMES, wc.instances[0].instance_id)
    # one that learned it from its first answer, too
    with QueryClient(f"{target},{other_application}", timeout=10) as q:
        assert q.get(STORE, WORD).value == TIMES
        assert q._pool.application_id == app
        assert q.metadata().asked == wc.instances[0].instance_id

    # the hop between instances: another application's server is not the replica wanted
    pool = ChannelPool(application_id=app)
    try:
        with pytest.raises(UnavailableError) as hop:
            forward_get(pool, other_application, pb.GetRequest(store=STORE, key=WORD), timeout=5)
        assert hop.value.reason is FailureReason.NOT_AVAILABLE and "WRONG_APPLICATION" in str(hop.value)
        assert forward_get(pool, target, pb.GetRequest(store=STORE, key=WORD), timeout=5).found
    finally:
        pool.close()


def test_the_cli_watch_end_token_resumes_after_the_last_change_printed(wc: LocalCluster) -> None:
    target = wc.instances[0].target
    first = _cli("watch", "--target", target, "--store", STORE, "--key", WORD, "--from-beginning", "--limit", "1",
                 "--duration", WATCH_S)
    assert len(first) == 2 and first[0]["value"] == 1, first
    end = first[1]["end"]
    assert end["changes"] == 1 and end["resume_token"] == first[0]["resume_token"], first
    rest = _cli("watch", "--target", target, "--store", STORE, "--key", WORD, "--resume", end["resume_token"],
                "--limit", str(TIMES - 1), "--duration", WATCH_S)
    assert [line["value"] for line in rest[:-1]] == list(range(2, TIMES + 1)), rest
    # the whole store the same way: one change, then the rest from its token
    one = _cli("watch", "--target", target, "--store", STORE, "--all", "--from-beginning", "--limit", "1",
               "--duration", WATCH_S)
    assert one[1]["end"]["resume_token"] == one[0]["resume_token"], one


def test_both_python_clients_keep_the_token_of_the_last_change_handed_over(wc: LocalCluster) -> None:
    target = wc.instances[0].target
    with QueryClient(target, timeout=10) as q:
        w = q.watch(STORE, WORD, from_beginning=True, timeout=float(WATCH_S))
        with w:
            got = next(i for i in w if isinstance(i, Change))
        assert got.value == 1 and w.resume_token == got.resume_token
        with q.watch(STORE, WORD, resume_token=w.resume_token, timeout=float(WATCH_S)) as rest:
            values = []
            for item in rest:
                if isinstance(item, Change):
                    values.append(item.value)
                    if len(values) == TIMES - 1:
                        break
        assert values == list(range(2, TIMES + 1))

    async def first_async() -> tuple[Change, str]:
        async with AsyncQueryClient(target, timeout=10) as aq:
            aw = aq.watch(STORE, WORD, from_beginning=True, timeout=float(WATCH_S))
            async with aw:
                async for item in aw:
                    if isinstance(item, Change):
                        return item, aw.resume_token
        raise AssertionError("no change")

    change, token = asyncio.run(first_async())
    assert change.value == 1 and token == change.resume_token
