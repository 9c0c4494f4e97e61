"""``/v1/stores/{store}/watch``: a store's committed changes as Server-Sent Events (the Watch RPC).

Events: ``start`` (serdes, partitions, the instance reading the changelog), ``change`` (key,
value, deleted, partition, offset, timestamp), ``routing`` (a watched partition's owner changed),
``progress`` (nothing matched lately; the position moved on) and, if the upstream stream fails
after the start, ``error`` before the end. Every event but ``routing`` and ``error`` has the resume
token as its SSE ``id``: a browser's EventSource sends it back as ``Last-Event-ID`` when it
reconnects, and the watch goes on right after it (through whichever instance answers then), so a
dropped connection loses nothing. ``token`` does the same for other clients.

The upstream is the client's watch loop (:class:`router.client.watch_client.AsyncWatch`, grpc.aio on the
event loop, so an open watch holds no thread here): when the instance serving it goes away, it
asks another with the last token and a ``routing`` event (partition -1) says so.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import grpc
from aiohttp import web

from kernel.rpc import iqmesh_pb2 as pb
from router.client.watch_client import AsyncWatch, Change, Progress, RoutingChange, Started, WatchEvent, WatchNotStarted
from router.gateway.backend import Backend
from router.gateway.context import gateway_of
from router.gateway.errors import UNREACHABLE, ApiError, GatewayReason, from_rpc_error, is_refusal, unavailable
from router.gateway.events import sse
from router.gateway.params import WATCH_PARAMS, boolean, integer, only

#: a comment this often while nothing happens (keeps proxies from closing the stream, and finds
#: a client that went away)
KEEPALIVE_S = 5.0
#: the reason of a 503 when every instance asked is at its watch cap, and when to try again
WATCH_CAP_REACHED = GatewayReason.WATCH_CAP_REACHED
WATCH_RETRY_AFTER_S = 5


def watch_request(store: str, q: Any, last_event_id: str) -> pb.WatchRequest:
    """``key`` (text, parsed with the store's key serde), or with ``prefix=true`` every key that
    starts with it; no ``key``: every key of the store."""
    token = q.get("token") or last_event_id
    req = pb.WatchRequest(store=store, resume_token=token, from_beginning=boolean(q, "from_beginning"),
                          with_json=True)
    key = q.get("key")
    if key is None:
        req.all = True
    elif boolean(q, "prefix"):
        req.prefix.text = key
    else:
        req.key.text = key
    return req


def _change(c: Change) -> dict[str, Any]:
    return {"key": json.loads(c.key_json), "value": None if c.deleted else json.loads(c.value_json),
            "deleted": c.deleted, "partition": c.partition, "offset": c.offset, "timestamp_ms": c.timestamp_ms,
            "resume_token": c.resume_token}


def _event(name: str, data: dict[str, Any], event_id: str = "") -> bytes:
    head = f"id: {event_id}\n".encode() if event_id else b""
    return head + sse(name, data)


def open_watch(backend: Backend, request: pb.WatchRequest) -> AsyncWatch:
    """The watch of ``request`` through the client's one watch loop (router/client/watch_client.py):
    the entries in the backend's order, one round to start it (a refusal of the cluster raises as
    it is), then the same reconnects with the last token as any client's watch."""
    stub = backend.channels.stub

    async def entries() -> list[str]:
        return backend.entries()
    return AsyncWatch(lambda endpoint, r, left: stub(endpoint).Watch(r, timeout=left), entries, request,
                      start_rounds=1)


def not_started(e: WatchNotStarted, nobody_known: str) -> ApiError:
    """The 503 when no entry started the watch: every one at its watch cap, or none reached
    (``nobody_known``: why none could be asked at all)."""
    if not e.failures:
        return unavailable(UNREACHABLE, nobody_known)
    failures = str(e)
    at_cap = [endpoint for endpoint, err in e.failures
              if err is not None and err.code() is grpc.StatusCode.RESOURCE_EXHAUSTED]
    if len(at_cap) == len(e.failures):
        return ApiError(503, "UNAVAILABLE", "every instance asked serves as many watches as it may (its watch cap "
                        "was reached): try again when a watch ends; " + failures,
                        reason=WATCH_CAP_REACHED, tried=at_cap, retry_after_s=WATCH_RETRY_AFTER_S)
    last = e.failures[-1][1]
    if last is not None and is_refusal(last):
        return from_rpc_error(last)
    return unavailable(UNREACHABLE, "no instance could start the watch: " + failures)


async def watch(request: web.Request) -> web.StreamResponse:
    """``max_events``: end after that many change events (scripts and tests)."""
    gw = gateway_of(request)
    store = request.match_info["store"]
    only(request.query, WATCH_PARAMS)
    limit = integer(request.query, "max_events", None, 1)
    upstream = open_watch(gw.backend, watch_request(store, request.query, request.headers.get("Last-Event-ID", "")))
    events = upstream.events()
    try:
        try:
            first = await anext(events)
        except WatchNotStarted as e:
            raise not_started(e, gw.backend.nobody_known()) from None
        except StopAsyncIteration:
            raise unavailable(UNREACHABLE, "the watch did not start") from None
        assert isinstance(first, Started)  # the first event of every watch
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        await response.write(_event("start", {
            "store": store, "key_serde": first.key_serde, "value_serde": first.value_serde,
            "partitions": list(first.partitions), "served_by": first.served_by,
            "resume_token": first.resume_token, "via": first.endpoint}, first.resume_token))
        try:
            await _pump(gw, events, response, limit)
        except ConnectionResetError:
            return response  # the client went away
        await response.write_eof()
        return response
    finally:
        upstream.close()
        with contextlib.suppress(BaseException):
            await events.aclose()


async def _pump(gw: Any, events: AsyncIterator[WatchEvent], response: web.StreamResponse, limit: int | None) -> None:
    """The watch's events to SSE until ``limit`` changes, shutdown, or an error the cluster
    answers (or no instance serving the watch for the reconnect timeout)."""
    changes = 0
    pending: asyncio.Task[WatchEvent] | None = None
    try:
        while not gw.closing and (limit is None or changes < limit):
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE_S)
            if not done:
                await response.write(b": keepalive\n\n")
                continue
            try:
                event = pending.result()
            except StopAsyncIteration:
                return
            except grpc.RpcError as e:
                await response.write(sse("error", from_rpc_error(e).body()))
                return
            except ConnectionError as e:  # no instance served it for the reconnect timeout
                await response.write(sse("error", unavailable(UNREACHABLE, str(e)).body()))
                return
            finally:
                pending = None
            if isinstance(event, Change):
                await response.write(_event("change", _change(event), event.resume_token))
                changes += 1
            elif isinstance(event, RoutingChange):
                await response.write(sse("routing", {"partition": event.partition, "previous_owner":
                                                     event.previous_owner, "owner": event.owner,
                                                     "endpoint": event.endpoint}))
            elif isinstance(event, Progress):
                await response.write(_event("progress", {"resume_token": event.resume_token}, event.resume_token))
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
