"""``/v1/stores/{store}/watch``: a store's committed changes as Server-Sent Events (the Watch RPC).

Events: ``start`` (serdes, partitions, the instance reading the changelog), ``change`` (key,
value, deleted, partition, offset, timestamp), ``routing`` (a watched partition's owner changed),
``progress`` (nothing matched lately; the position moved on) and, if the upstream stream fails
after the start, ``error`` before the end. Every event but ``routing`` and ``error`` has the resume
token as its SSE ``id``: a browser's EventSource sends it back as ``Last-Event-ID`` when it
reconnects, and the watch goes on right after it (through whichever instance answers then), so a
dropped connection loses nothing. ``token`` does the same for other clients.

The stream is read with grpc.aio on the event loop, so an open watch holds no thread here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import grpc
from aiohttp import web

from router.gateway.context import gateway_of
from router.gateway.errors import UNREACHABLE, ApiError, from_rpc_error, is_refusal, unavailable
from router.gateway.events import sse
from router.gateway.params import WATCH_PARAMS, boolean, integer, only
from router.rpc import iqmesh_pb2 as pb
from router.rpc import iqmesh_pb2_grpc as pb_grpc
from router.security import Security

#: a comment this often while nothing happens (keeps proxies from closing the stream, and finds
#: a client that went away)
KEEPALIVE_S = 5.0
#: the reason of a 503 when every instance asked is at its watch cap, and when to try again
WATCH_CAP_REACHED = "WATCH_CAP_REACHED"
WATCH_RETRY_AFTER_S = 5
_NEXT_ENTRY = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED})


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


def _change(c: pb.WatchChange) -> dict[str, Any]:
    return {"key": json.loads(c.key_json), "value": None if c.deleted else json.loads(c.value_json),
            "deleted": c.deleted, "partition": c.partition, "offset": c.offset, "timestamp_ms": c.timestamp_ms,
            "resume_token": c.resume_token}


def _event(name: str, data: dict[str, Any], event_id: str = "") -> bytes:
    head = f"id: {event_id}\n".encode() if event_id else b""
    return head + sse(name, data)


async def _open(entries: list[str], request: pb.WatchRequest,
                security: Security) -> tuple[grpc.aio.Channel, Any, pb.WatchReply, str]:
    """The first entry that starts the watch: its channel (dialled with the gateway's TLS and
    token, as every other call), call, header reply and endpoint. The cluster's refusals raise as
    they are; entries that cannot be reached (or are busy) are skipped."""
    failures: list[str] = []
    at_cap: list[str] = []
    for endpoint in entries:
        channel = security.aio_channel(endpoint)
        call = pb_grpc.InteractiveQueryStub(channel).Watch(request)
        try:
            first = await call.read()
        except grpc.RpcError as e:
            await channel.close()
            if e.code() not in _NEXT_ENTRY or is_refusal(e):
                raise
            failures.append(f"{endpoint}: {e.details()}")
            if e.code() is grpc.StatusCode.RESOURCE_EXHAUSTED:
                at_cap.append(endpoint)
            continue
        except BaseException:
            await channel.close()
            raise
        if first is grpc.aio.EOF or first.WhichOneof("part") != "header":
            await channel.close()
            failures.append(f"{endpoint}: the watch did not start")
            continue
        return channel, call, first, endpoint
    if not failures:
        raise unavailable(UNREACHABLE, "no instance known yet (discovery has found none)")
    if at_cap and len(at_cap) == len(failures):
        raise ApiError(503, "UNAVAILABLE", "every instance asked serves as many watches as it may (its watch cap "
                       "was reached): try again when a watch ends; " + "; ".join(failures),
                       reason=WATCH_CAP_REACHED, tried=at_cap, retry_after_s=WATCH_RETRY_AFTER_S)
    raise unavailable(UNREACHABLE, "no instance could start the watch: " + "; ".join(failures))


async def watch(request: web.Request) -> web.StreamResponse:
    """``max_events``: end after that many change events (scripts and tests)."""
    gw = gateway_of(request)
    store = request.match_info["store"]
    only(request.query, WATCH_PARAMS)
    limit = integer(request.query, "max_events", None, 1)
    req = watch_request(store, request.query, request.headers.get("Last-Event-ID", ""))
    channel, call, first, via = await _open(gw.backend.entries(), req, gw.backend.security)
    try:
        h = first.header
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                               "X-Accel-Buffering": "no"})
        await response.prepare(request)
        await response.write(_event("start", {
            "store": h.store, "key_serde": h.key_serde, "value_serde": h.value_serde,
            "partitions": list(h.partitions), "served_by": h.served_by, "resume_token": h.resume_token,
            "via": via}, h.resume_token))
        try:
            await _pump(gw, call, response, limit)
        except ConnectionResetError:
            return response  # the client went away
        await response.write_eof()
        return response
    finally:
        call.cancel()
        await channel.close()


async def _pump(gw: Any, call: Any, response: web.StreamResponse, limit: int | None) -> None:
    """Upstream replies to events until ``limit`` changes, shutdown, or an upstream failure."""
    changes = 0
    pending: asyncio.Task[Any] | None = None
    try:
        while not gw.closing and (limit is None or changes < limit):
            if pending is None:
                pending = asyncio.ensure_future(call.read())
            done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE_S)
            if not done:
                await response.write(b": keepalive\n\n")
                continue
            try:
                reply = pending.result()
            except grpc.RpcError as e:
                await response.write(sse("error", from_rpc_error(e).body()))
                return
            finally:
                pending = None
            if reply is grpc.aio.EOF:
                return
            part = reply.WhichOneof("part")
            if part == "changes":
                out = []
                for c in reply.changes.changes:
                    out.append(_event("change", _change(c), c.resume_token))
                    changes += 1
                    if limit is not None and changes >= limit:
                        break
                await response.write(b"".join(out))
            elif part == "routing":
                r = reply.routing
                await response.write(sse("routing", {"partition": r.partition, "previous_owner": r.previous_owner,
                                                     "owner": r.owner, "endpoint": r.endpoint}))
            elif part == "progress":
                token = reply.progress.resume_token
                await response.write(_event("progress", {"resume_token": token}, token))
    finally:
        if pending is not None:
            pending.cancel()
            with contextlib.suppress(BaseException):
                await pending
