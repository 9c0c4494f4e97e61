"""The REST gateway's parts that need no cluster: the one error mapping, strict parameters, the
entry failover (against small in-process gRPC servers), rates, Prometheus text, the OpenAPI
document against the routes, and the application's own answers (aiohttp test client)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from aiohttp.test_utils import TestClient, TestServer

from instance.local.broker import free_port
from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from kernel.status_details import refusal_status
from kernel.unavailable import FailureReason, UnavailableError
from router.client.client_core import ClientError, unavailable
from router.gateway import GatewayConfig, create_app
from router.gateway.backend import Backend
from router.gateway.discovery import Discovery
from router.gateway.errors import ApiError, from_rpc_error, is_refusal, to_api_error
from router.gateway.metrics import GatewayMetrics
from router.gateway.openapi import document
from router.gateway.params import ReadParams, ScanParams
from router.gateway.prometheus import render
from router.gateway.snapshot import Sample, Snapshot, metadata_to_json, rates, store_replicas


def FakeRpcError(code: grpc.StatusCode, details: str) -> ClientError:  # noqa: N802 - shaped as a class
    """An error as an instance sends it: a refusal's reason and tried ids (``"REASON: message
    tried=a,b"``, the text servers write) also in its typed details."""
    head, _, rest = details.partition(": ")
    if code is grpc.StatusCode.UNAVAILABLE and head in FailureReason.__members__:
        message, _, tried = rest.partition(" tried=")
        return unavailable(UnavailableError(FailureReason[head], message, [t for t in tried.split(",") if t]))
    return ClientError(code, details)


def test_grpc_statuses_map_to_http_once() -> None:
    def mapped(code: grpc.StatusCode, details: str) -> ApiError:
        return from_rpc_error(FakeRpcError(code, details))

    assert (mapped(grpc.StatusCode.NOT_FOUND, "unknown store 'x'").status, "UNKNOWN_STORE") == \
           (404, mapped(grpc.StatusCode.NOT_FOUND, "").code)
    assert mapped(grpc.StatusCode.INVALID_ARGUMENT, "bad key").body() == \
           {"error": {"code": "INVALID_ARGUMENT", "message": "bad key"}}
    e = mapped(grpc.StatusCode.UNAVAILABLE,
               "NOT_UP_TO_BOUND: no replica of 'counts' partition 3 could answer tried=a,b")
    assert (e.status, e.code, e.extra) == (503, "UNAVAILABLE", {"reason": "NOT_UP_TO_BOUND", "tried": ["a", "b"]})
    assert e.message == "no replica of 'counts' partition 3 could answer"
    e = mapped(grpc.StatusCode.UNAVAILABLE, "REBALANCING: no live replica")
    assert (e.extra["reason"], e.extra["tried"], e.message) == ("REBALANCING", [], "no live replica")
    e = mapped(grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses")
    assert e.extra["reason"] == "UNREACHABLE"
    assert mapped(grpc.StatusCode.DEADLINE_EXCEEDED, "").status == 504
    assert (mapped(grpc.StatusCode.INTERNAL, "boom").status, mapped(grpc.StatusCode.INTERNAL, "").code) == \
           (502, "UPSTREAM_ERROR")
    assert is_refusal(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "NOT_ACTIVE: moved"))
    assert not is_refusal(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "Connection refused"))
    # a reason named in the text alone (another server's, or a message that happens to start so)
    # is no refusal: only the typed details say so
    assert not is_refusal(ClientError(grpc.StatusCode.UNAVAILABLE, "NOT_ACTIVE: moved"))
    assert to_api_error(UnicodeEncodeError("utf-8", "\udcff", 0, 1, "surrogates not allowed")).status == 400
    assert to_api_error(ValueError("a bug, not the caller's input")).status == 500
    assert to_api_error(RuntimeError("bug")).status == 500


@pytest.mark.parametrize("query", [{"allow_stale": "1"}, {"allow_stale": "True"}, {"max_lag": "-1"},
                                   {"max_lag": "1.5"}, {"limit": "0"}, {"limit": "10001"}, {"limit": " 5"},
                                   {"limit": "1_0"}, {"limit": "\u0661"}, {"require_complete": "yes"}])
def test_malformed_parameters_are_400(query: dict[str, str]) -> None:
    with pytest.raises(ApiError) as e:
        ScanParams.of(query, 100)
    assert (e.value.status, e.value.code) == (400, "INVALID_ARGUMENT")


def test_parameters() -> None:
    p = ScanParams.of({"allow_stale": "true", "max_lag": "5", "limit": "7", "page_token": "t"}, 100)
    assert p.kwargs() == {"allow_stale": True, "max_lag": 5, "position": "", "require_complete": False, "limit": 7,
                          "page_token": "t", "with_json": True}
    assert ScanParams.of({}, None).limit is None and ScanParams.of({}, 100).limit == 100
    assert ReadParams.of({"allow_stale": "false"}) == ReadParams()


# --- entry failover against real (small) gRPC servers --------------------------------------------


class Fake(pb_grpc.InteractiveQueryServicer):
    def __init__(self, name: str, refuse: bool = False) -> None:
        self.name, self.refuse, self.calls = name, refuse, 0

    def Get(self, request: pb.GetRequest, context: grpc.ServicerContext) -> pb.GetReply:
        self.calls += 1
        if self.refuse:
            context.abort_with_status(refusal_status(UnavailableError(FailureReason.REBALANCING, "not now"),
                                                     "REBALANCING: not now"))
        return pb.GetReply(found=True, value_json=json.dumps(request.key),
                           metadata=pb.ReadMetadata(served_by=self.name, role=pb.ROLE_ACTIVE))

    def Watch(self, request: pb.WatchRequest, context: grpc.ServicerContext) -> Iterator[pb.WatchReply]:
        context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{self.name} serves 8 watches already (at most 8)")
        yield pb.WatchReply()

    def Metadata(self, request: pb.MetadataRequest, context: grpc.ServicerContext) -> pb.MetadataReply:
        return pb.MetadataReply(asked=self.name, instances=[pb.InstanceMetadata(
            instance_id=self.name, endpoint="", state=pb.INSTANCE_STATE_RUNNING, alive=True)],
            store_partitions={"s": 1})


@pytest.fixture
def servers() -> Iterator[list[tuple[str, Fake]]]:
    out, started = [], []
    for name, refuse in (("a", False), ("b", True)):
        server = grpc.server(futures.ThreadPoolExecutor(2))
        fake = Fake(name, refuse)
        pb_grpc.add_InteractiveQueryServicer_to_server(fake, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        started.append(server)
        out.append((f"127.0.0.1:{port}", fake))
    yield out
    for s in started:
        s.stop(0)


async def test_an_unreachable_entry_is_skipped_but_a_refusal_is_the_answer(servers: list[tuple[str, Fake]]) -> None:
    (a, fake_a), (b, fake_b) = servers
    dead = f"127.0.0.1:{free_port()}"
    backend = Backend(Discovery([dead, a]), timeout=5)
    try:
        reply, via = await backend.call(lambda c: c.get("s", "k"))
        assert (reply.metadata["served_by"], via) == ("a", a)
        assert backend.entries() == [a, dead]  # the one that answered first, the unreachable one last

        # the refusing entry's answer comes back (its client retried it within the deadline); the
        # gateway asks no other entry
        refusing = Backend(Discovery([b, a]), timeout=0.5)
        with pytest.raises(grpc.RpcError) as e:
            await refusing.call(lambda c: c.get("s", "k"))
        assert e.value.code() is grpc.StatusCode.UNAVAILABLE and fake_a.calls == 1 and fake_b.calls >= 1
        await refusing.close()

        nobody = Backend(Discovery([dead]), timeout=5)
        with pytest.raises(ApiError) as err:
            await nobody.call(lambda c: c.metadata())
        assert (err.value.status, err.value.extra["reason"]) == (503, "UNREACHABLE")
        await nobody.close()
    finally:
        await backend.close()


def test_discovery_puts_live_instances_of_the_routing_table_first() -> None:
    d = Discovery(["s1", "s2"])
    assert d.endpoints() == ["s1", "s2"]
    d.learn(["x", "s2"])
    assert d.endpoints() == ["x", "s2", "s1"]


# --- snapshots, rates, Prometheus ---------------------------------------------------------------


def _md(pos0: int, pos1: int, lag: int = 0, answered: int = 0, processed: int = 0) -> dict[str, Any]:
    counters = pb.InstanceCounters(records_processed=processed, gets_local=answered - answered // 2,
                                   gets_routed=answered // 2, gets_forwarded=1, get_seconds=0.25,
                                   query_errors={"NOT_FOUND": 2})
    reply = pb.MetadataReply(asked="i0", store_partitions={"counts": 2}, instances=[
        pb.InstanceMetadata(instance_id="i0", endpoint="h:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                            active_tasks=["0_0"],
                            stores=[pb.StorePartition(store="counts", partition=0, role=pb.ROLE_ACTIVE, position=pos0,
                                                      end_offset=pos0)], counters=counters),
        pb.InstanceMetadata(instance_id="i1", endpoint="h:2", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                            active_tasks=["0_1"],
                            standby_tasks=["0_0"],
                            stores=[pb.StorePartition(store="counts", partition=1, role=pb.ROLE_ACTIVE, position=pos1,
                                                      end_offset=pos1),
                                    pb.StorePartition(store="counts", partition=0, role=pb.ROLE_STANDBY,
                                                      position=pos0 - lag, end_offset=pos0, lag=lag)])])
    return metadata_to_json(reply)


def test_rates_from_one_snapshot_to_the_next() -> None:
    first = Sample.of(_md(10, 20, answered=2, processed=100), 100.0)
    later = Sample.of(_md(30, 20, answered=4, processed=150), 101.0)
    md = _md(30, 20, lag=4, answered=6, processed=250)
    now = Sample.of(md, 102.0)
    got = rates(md, now, first, later)
    assert got["i0"] == {"store_updates_per_s": 10.0, "records_per_s": 100.0, "queries_per_s": 2.0,
                         "query_errors_per_s": 0.0, "lag": 0.0}
    assert got["i1"] == {"store_updates_per_s": 0.0, "records_per_s": 0.0, "queries_per_s": 0.0,
                         "query_errors_per_s": 0.0, "lag": 4.0}
    assert rates(md, now, None, None)["i0"]["store_updates_per_s"] == 0.0
    # an instance that restarted (its counters went down) counts from zero
    restarted = _md(30, 20, answered=3, processed=40)
    assert rates(restarted, Sample.of(restarted, 102.0), first, later)["i0"]["records_per_s"] == 40.0
    # a partition that moved to another instance in the window does not count for either
    moved = metadata_to_json(pb.MetadataReply(instances=[pb.InstanceMetadata(
        instance_id="i1", alive=True, stores=[pb.StorePartition(store="counts", partition=0, role=pb.ROLE_ACTIVE,
                                                                position=50)])]))
    assert rates(moved, Sample.of(moved, 102.0), first, None)["i1"]["store_updates_per_s"] == 0.0
    (store,) = store_replicas(_md(5, 6))
    assert store["replicas"][0]["active"]["instance_id"] == "i0"
    assert [r["instance_id"] for r in store["replicas"][0]["standbys"]] == ["i1"]


def test_prometheus_text() -> None:
    metrics = GatewayMetrics()
    metrics.requests[("GET", "/v1/stores/{store}/keys/{key}", 200)] = 3
    metrics.latency["/v1/stores/{store}/keys/{key}"].observe(0.004)
    metrics.answered("i0", "ACTIVE", False, 2)
    snap = Snapshot(100.0, "h:1", _md(10, 20, answered=5, processed=7),
                    {"i0": {"store_updates_per_s": 1.5, "records_per_s": 3.0, "queries_per_s": 0.0, "lag": 0}})
    text = render(metrics, snap)
    sample = re.compile(r'^[a-z_]+(\{([a-z_]+="[^"]*",?)*\})? -?[0-9.e+]+$')
    for line in text.splitlines():
        assert line.startswith("# ") or sample.match(line), line
    assert 'iqmesh_instance_up{instance="i1"} 1' in text
    assert 'iqmesh_store_partition_lag{instance="i1",store="counts",partition="0",role="STANDBY"} 0' in text
    assert 'iqmesh_instance_store_updates_per_second{instance="i0"} 1.5' in text
    assert 'iqmesh_instance_records_per_second{instance="i0"} 3' in text
    assert 'iqmesh_instance_records_processed_total{instance="i0"} 7' in text
    assert 'iqmesh_instance_gets_total{instance="i0",served="local"} 3' in text
    assert 'iqmesh_instance_gets_total{instance="i0",served="routed"} 2' in text
    assert 'iqmesh_instance_get_seconds_total{instance="i0"} 0.25' in text
    assert 'iqmesh_instance_query_errors_total{instance="i0",code="NOT_FOUND"} 2' in text
    assert 'iqmesh_gateway_answers_total{instance="i0",role="ACTIVE",stale="false"} 2' in text
    assert 'iqmesh_gateway_request_duration_seconds_bucket{route="/v1/stores/{store}/keys/{key}",le="0.005"} 1' in text
    assert 'iqmesh_gateway_request_duration_seconds_count{route="/v1/stores/{store}/keys/{key}"} 1' in text


# --- the application: routes against the document, answers without a cluster -------------------


def test_every_api_route_is_documented_and_every_documented_path_is_routed() -> None:
    app = create_app(GatewayConfig(seeds=("127.0.0.1:1",)))
    routed = {r.resource.canonical for r in app.router.routes()
              if r.method in ("GET", "POST") and r.resource is not None}
    api = {p for p in routed if p.startswith("/v1/") or p in ("/healthz", "/readyz", "/metrics", "/openapi.json")}
    documented = set(document()["paths"])
    assert api - documented == {"/openapi.json"}  # the document itself
    assert documented <= {p.replace("{key:.+}", "{key}") for p in routed} | {"/v1/stores/{store}/keys/{key}"}


async def test_without_any_instance_the_gateway_answers_503_and_stays_healthy() -> None:
    app = create_app(GatewayConfig(seeds=(f"127.0.0.1:{free_port()}",), timeout=2, poll_interval=0.2))
    async with TestClient(TestServer(app)) as client:
        r = await client.get("/healthz")
        assert r.status == 200
        r = await client.get("/v1/stores/counts/keys/a")
        body = await r.json()
        assert r.status == 503 and body["error"]["reason"] == "UNREACHABLE" and r.headers["Retry-After"] == "1"
        r = await client.get("/readyz")
        assert r.status == 503 and (await r.json())["error"]["code"] == "NOT_READY"
        r = await client.get("/v1/stores/counts/range?limit=nope")
        assert r.status == 400
        r = await client.get("/nowhere")
        assert r.status == 404 and (await r.json())["error"]["code"] == "NOT_FOUND"
        r = await client.post("/v1/stores")
        assert r.status == 405 and (await r.json())["error"]["code"] == "METHOD_NOT_ALLOWED"
        r = await client.get("/")
        assert r.status == 200 and "uPlot.iife.min.js" in await r.text()
        r = await client.get("/static/vendor/uPlot.LICENSE")
        assert r.status == 200 and "MIT" in await r.text()
        r = await client.get("/metrics")
        assert 'iqmesh_gateway_requests_total{method="GET",route="/v1/stores/{store}/keys/{key}",status="503"} 1' \
            in await r.text()


async def test_keys_are_taken_from_the_path_as_they_were_sent(servers: list[tuple[str, Fake]]) -> None:
    (a, _), _ = servers
    app = create_app(GatewayConfig(seeds=(a,), timeout=5))
    async with TestClient(TestServer(app)) as client:
        for sent, key in (("a%2Fb", "a/b"), ("x/y", "x/y"), ("%C3%BC%20z", "\u00fc z"), ("100%25", "100%"),
                          ("a%3Fb", "a?b")):
            r = await client.get(f"/v1/stores/s/keys/{sent}")
            body = await r.json()
            assert (r.status, body["key"], body["value"], body["via"]) == (200, key, key, a), sent


def test_openapi_declares_the_bearer_scheme_when_a_token_is_required() -> None:
    open_doc, guarded = document(), document(token_required=True)
    assert guarded["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http", "scheme": "bearer", "description": guarded["components"]["securitySchemes"]["bearerAuth"][
            "description"]}
    assert all("security" not in op for item in open_doc["paths"].values() for op in item.values())
    ops = {(path, m): op["security"] for path, item in guarded["paths"].items() for m, op in item.items()}
    assert ops.pop(("/healthz", "get")) == [] and ops.pop(("/readyz", "get")) == []
    assert ops and all(s == [{"bearerAuth": []}] for s in ops.values())


async def test_rest_edge_cases(servers: list[tuple[str, Fake]]) -> None:
    """Long keys fit in the path (the README allows 1 MiB), bytes that are not UTF-8 are a 400,
    unknown parameters are a 400 naming the known ones, and a watch refused by every instance's
    watch cap says so, with Retry-After."""
    (a, _), _ = servers
    app = create_app(GatewayConfig(seeds=(a,), timeout=10))
    async with TestClient(TestServer(app)) as client:
        for n in (9000, 2**20):
            key = "k" * n
            r = await client.get(f"/v1/stores/s/keys/{key}")
            assert r.status == 200 and (await r.json())["value"] == key, n
        key = "\u00fc" * 2**19  # 1 MiB of UTF-8, 3 MiB percent-encoded
        r = await client.get("/v1/stores/s/keys/" + "%C3%BC" * 2**19)
        assert r.status == 200 and (await r.json())["value"] == key

        r = await client.post("/v1/stores/s/keys", json={"key": key})  # the same 1 MiB key in a body
        assert r.status == 200 and (await r.json())["value"] == key
        for bad in (b"nope", b"[]", b'{"key": 5}', b'{"key": null}', b'{"key": "a", "x": 1}'):
            r = await client.post("/v1/stores/s/keys", data=bad)
            assert r.status == 400 and (await r.json())["error"]["code"] == "INVALID_ARGUMENT", bad
        r = await client.post("/v1/stores/s/keys", data=b'{"key": ""}')  # the empty key, as gRPC takes it
        assert r.status == 200 and (await r.json())["value"] == "", await r.text()
        r = await client.post("/v1/stores/s/keys", data=b'{"key": "' + b"k" * (7 * 2**20) + b'"}')
        assert r.status == 413 and (await r.json())["error"]["code"] == "PAYLOAD_TOO_LARGE"
        # aiohttp's own refusals (before any handler) come in the JSON envelope too
        r = await client.get("/v1/stores/s/keys/" + "k" * (4 * 2**20))
        body = await r.json()
        assert r.status == 414 and body["error"]["code"] == "URI_TOO_LONG" and "POST" in body["error"]["message"]
        r = await client.get("/v1/stores/s/keys/a", headers={"X-Long": "h" * 9000})
        body = await r.json()
        assert r.status in (400, 431) and body["error"]["message"], body

        r = await client.get("/v1/stores/s/keys/%FF%FE")
        body = await r.json()
        assert r.status == 400 and body["error"]["code"] == "INVALID_ARGUMENT", body
        assert "not percent-encoded UTF-8" in body["error"]["message"]

        for path, known in (("/v1/stores/s/keys/a?allow_stal=true", "allow_stale, max_lag, position"),
                            ("/v1/stores/s/range?limt=5", "page_token, from, to"),
                            ("/v1/stores/s/all?pagesize=5", "require_complete, limit, page_token"),
                            ("/v1/stores/s/watch?resume=abc", "key, prefix, token, from_beginning, max_events")):
            r = await client.get(path)
            body = await r.json()
            assert r.status == 400 and body["error"]["code"] == "INVALID_ARGUMENT", (path, body)
            assert "unknown query parameter" in body["error"]["message"] and known in body["error"]["message"], body

        r = await client.get("/v1/stores/s/watch")
        body = await r.json()
        assert r.status == 503 and body["error"]["reason"] == "WATCH_CAP_REACHED", body
        assert "watch cap" in body["error"]["message"] and body["error"]["tried"] == [a]
        assert r.headers["Retry-After"] == "5"
