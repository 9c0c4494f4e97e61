"""``/v1/events``: Server-Sent Events, one ``snapshot`` event per routing-table poll (about a second).

The first event also carries ``history`` (the recent rates), so a page that opens late still draws
its charts from the start of the gateway's memory rather than from an empty plot.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from router.gateway.context import gateway_of
from router.gateway.params import integer

#: a comment line this often keeps proxies from closing an idle stream
KEEPALIVE_S = 15.0


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


async def events(request: web.Request) -> web.StreamResponse:
    """``max_events`` (optional) ends the stream after that many events (for scripts and tests)."""
    gw = gateway_of(request)
    limit = integer(request.query, "max_events", None, 1)
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store",
                                           "X-Accel-Buffering": "no"})
    await response.prepare(request)
    sent = 0
    snap = gw.poller.latest
    if snap is None:
        snap = await gw.poller.poll_once()
    first = {**snap.to_json(gw.metrics), "history": list(gw.poller.history)}
    try:
        await response.write(sse("snapshot", first))
        sent += 1
        while not gw.closing and (limit is None or sent < limit):
            async with gw.poller.changed:
                try:
                    await asyncio.wait_for(gw.poller.changed.wait(), KEEPALIVE_S)
                except TimeoutError:
                    await response.write(b": keepalive\n\n")
                    continue
            if gw.closing or gw.poller.latest is None:
                break
            await response.write(sse("snapshot", gw.poller.latest.to_json(gw.metrics)))
            sent += 1
    except ConnectionResetError:
        return response  # the client went away
    await response.write_eof()
    return response
