"""The /v1 query API: stores, one key, a page of a range, a whole store streamed, the routing table.

Every reply says who answered: a key its read metadata (served_by, role, position, lag, stale,
position_token), a scan each partition's, the routing table the instance asked (``asked``) and the
instance the gateway's call went to (``via``: for a key its owner, asked directly, unless the
gateway's routing table was missing or wrong and an entry instance forwarded it one hop).
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any

import grpc
from aiohttp import web

from router.client.async_client import AsyncQueryClient
from router.client.scan_pages import AsyncScan, Scan, ScanItem
from router.gateway.context import Gateway, gateway_of
from router.gateway.errors import UNREACHABLE, ApiError, bad_request, from_rpc_error
from router.gateway.params import (
    DEFAULT_PAGE,
    RANGE_PARAMS,
    READ_PARAMS,
    SCAN_PARAMS,
    ReadParams,
    ScanParams,
    only,
    path_text,
    text,
)
from router.gateway.snapshot import metadata_to_json, store_replicas
from router.gateway.topology import input_lag_to_json, processing_lag, topology_to_json
from router.gateway.watch import watch

#: entries fetched per step of a streamed scan (and written per flush)
STREAM_CHUNK = 500
NDJSON = "application/x-ndjson"


def _entry(item: ScanItem) -> dict[str, Any]:
    return {"key": json.loads(item.key_json), "value": json.loads(item.value_json), "partition": item.partition}


def _partitions(gw: Gateway, scan: Scan) -> list[dict[str, Any]]:
    """Each partition's last status, counted as an answer of its replica."""
    out = [scan.partitions[p] for p in sorted(scan.partitions)]
    for s in out:
        if s["available"]:
            gw.metrics.answered(s["served_by"], s["role"], s["stale"])
    return out


def _scan_summary(gw: Gateway, store: str, scan: Scan, count: int, via: str) -> dict[str, Any]:
    parts = _partitions(gw, scan)
    return {"store": store, "count": count, "next_page_token": scan.next_page_token, "complete": scan.complete,
            "stale": any(s.get("stale") for s in parts), "partitions": parts, "via": scan.asked or via}


async def list_stores(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    reply, via = await gw.backend.call(lambda c: c.metadata())
    md = metadata_to_json(reply)
    return web.json_response({"stores": store_replicas(md), "asked": md["asked"], "via": via})


async def get_key(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    only(request.query, READ_PARAMS)
    raw = request.rel_url.raw_path
    store, key = request.match_info["store"], path_text(raw[raw.index("/keys/", len("/v1/stores/")) + 6:], "key")
    read = ReadParams.of(request.query)
    r, via = await gw.backend.call(lambda c: c.get(store, key, **read.kwargs()))
    md = r.metadata
    gw.metrics.answered(md["served_by"], md["role"], md["stale"])
    return web.json_response({"store": store, "key": key, "found": r.found, "value": r.json_value, "metadata": md,
                              "via": r.asked or via})


async def post_lookup(request: web.Request) -> web.Response:
    """One key given in the body, ``{"key": "..."}``: for keys too long for a URL (up to 1 MiB of
    key); the read options stay in the query string. Answers as ``GET .../keys/{key}``."""
    gw = gateway_of(request)
    only(request.query, READ_PARAMS)
    store = request.match_info["store"]
    try:
        body = json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        raise bad_request('the body must be a JSON object {"key": "..."}') from None
    # the empty key is a key (Kafka's records may have one), as gRPC's Get takes it
    if not isinstance(body, dict) or set(body) != {"key"} or not isinstance(body["key"], str):
        raise bad_request('the body must be a JSON object {"key": "..."} with the key as text')
    key: str = body["key"]
    read = ReadParams.of(request.query)
    r, via = await gw.backend.call(lambda c: c.get(store, key, **read.kwargs()))
    md = r.metadata
    gw.metrics.answered(md["served_by"], md["role"], md["stale"])
    return web.json_response({"store": store, "key": key, "found": r.found, "value": r.json_value, "metadata": md,
                              "via": r.asked or via})


async def get_range(request: web.Request) -> web.Response:
    """One page of ``from <= key <= to`` (by serialized key); ``next_page_token`` asks the next."""
    gw = gateway_of(request)
    store, q = request.match_info["store"], request.query
    only(q, RANGE_PARAMS)
    params = ScanParams.of(q, DEFAULT_PAGE)
    lo, hi = text(q, "from"), text(q, "to")

    async def page(c: AsyncQueryClient) -> tuple[AsyncScan, list[dict[str, Any]]]:
        scan = c.range(store, lo, hi, **params.kwargs())
        return scan, [_entry(i) async for i in scan]

    (scan, entries), via = await gw.backend.call(page)
    return web.json_response({**_scan_summary(gw, store, scan, len(entries), via), "entries": entries})


async def _take(it: AsyncIterator[ScanItem], n: int) -> list[ScanItem]:
    out: list[ScanItem] = []
    while len(out) < n:
        try:
            out.append(await anext(it))
        except StopAsyncIteration:
            break
    return out


async def get_all(request: web.Request) -> web.StreamResponse:
    """Every entry (or the first ``limit``) as JSON lines, then one ``{"end": summary}`` line. A
    failure before the first line is an HTTP error; after it, the last line is ``{"error": ...}``."""
    gw = gateway_of(request)
    store = request.match_info["store"]
    only(request.query, SCAN_PARAMS)
    params = ScanParams.of(request.query, None)

    async def first(c: AsyncQueryClient) -> tuple[AsyncScan, AsyncIterator[ScanItem], list[ScanItem]]:
        scan = c.all(store, **params.kwargs())
        it = aiter(scan)
        return scan, it, await _take(it, STREAM_CHUNK)

    (scan, it, chunk), via = await gw.backend.call(first)
    response = web.StreamResponse(headers={"Content-Type": NDJSON, "Cache-Control": "no-store"})
    await response.prepare(request)
    count = 0
    last: dict[str, Any] | None = None
    try:
        while chunk:
            count += len(chunk)
            await response.write(b"".join(json.dumps(_entry(i)).encode() + b"\n" for i in chunk))
            try:
                chunk = await _take(it, STREAM_CHUNK)
            except grpc.RpcError as e:
                last = from_rpc_error(e).body()
                break
        if last is None:
            last = {"end": _scan_summary(gw, store, scan, count, via)}
        await response.write(json.dumps(last).encode() + b"\n")
        await response.write_eof()
    except ConnectionResetError:
        pass  # the client went away; the rest of the scan is never asked for
    return response


async def get_metadata(request: web.Request) -> web.Response:
    """The routing table as the asked instance sees it now."""
    gw = gateway_of(request)
    reply, via = await gw.backend.call(lambda c: c.metadata())
    return web.json_response({**metadata_to_json(reply), "via": via, "at_ms": int(time.time() * 1000)})


async def list_instances(request: web.Request) -> web.Response:
    """Every instance with its tasks, store partitions and rates (the latest snapshot)."""
    gw = gateway_of(request)
    if gw.poller.latest is None or not gw.poller.latest.metadata:
        await gw.poller.poll_once()
    snap = gw.poller.latest
    assert snap is not None
    if not snap.metadata:
        raise ApiError(503, "UNAVAILABLE", snap.error or "no routing table yet", reason=UNREACHABLE, tried=[])
    doc = snap.to_json(gw.metrics)
    return web.json_response({k: doc[k] for k in ("instances", "asked", "via", "at_ms", "age_ms", "error")})


async def get_topology(request: web.Request) -> web.Response:
    """The topology as the asked instance runs it, the processing lag of every input partition,
    and those lags summed per owner (the latest routing table) and per topic."""
    gw = gateway_of(request)
    reply, via = await gw.backend.call(lambda c: c.describe())
    snap = gw.poller.latest
    lags = input_lag_to_json(reply)
    return web.json_response({**topology_to_json(reply), "input_lag": lags, "input_lag_error": reply.input_lag_error,
                              "processing_lag": processing_lag(lags, snap.metadata if snap else {}), "via": via})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/v1/stores", list_stores)
    app.router.add_get("/v1/stores/{store}/keys/{key:.+}", get_key)
    app.router.add_post("/v1/stores/{store}/keys", post_lookup)
    app.router.add_get("/v1/stores/{store}/range", get_range)
    app.router.add_get("/v1/stores/{store}/all", get_all)
    app.router.add_get("/v1/stores/{store}/watch", watch)
    app.router.add_get("/v1/metadata", get_metadata)
    app.router.add_get("/v1/instances", list_instances)
    app.router.add_get("/v1/topology", get_topology)
