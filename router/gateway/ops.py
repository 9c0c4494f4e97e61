"""Probes and metrics: ``/healthz`` (the process answers), ``/readyz`` (it can answer queries),
``/metrics`` (Prometheus)."""

from __future__ import annotations

from aiohttp import web

from router.gateway import prometheus
from router.gateway.context import gateway_of
from router.gateway.errors import ApiError


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


async def readyz(request: web.Request) -> web.Response:
    """Ready: a fresh routing table with at least one live RUNNING instance. Partitions without a
    live owner are listed (queries on them get 503) but do not make the gateway unready."""
    gw = gateway_of(request)
    snap = gw.poller.latest
    reasons = []
    if gw.discovery.problem:
        reasons.append(gw.discovery.problem)
    elif not gw.discovery.ready:
        reasons.append("no instance discovered yet")
    if snap is None or not gw.poller.fresh:
        reasons.append(f"no fresh routing table ({snap.error if snap and snap.error else 'not polled yet'})")
    running = [i["instance_id"] for i in snap.metadata.get("instances", [])
               if i["alive"] and i["state"] == "RUNNING"] if snap else []
    if snap is not None and not running:
        reasons.append("no live RUNNING instance")
    if reasons:
        raise ApiError(503, "NOT_READY", "; ".join(reasons), reason="NOT_READY", tried=[])
    assert snap is not None
    unowned = [{"store": s["store"], "partition": r["partition"]}
               for s in snap.to_json(gw.metrics)["stores"] for r in s["replicas"] if r["active"] is None]
    return web.json_response({"status": "ready", "running": running, "unowned_partitions": unowned,
                              "via": snap.via})


async def metrics(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    snap = gw.poller.latest
    body = prometheus.render(gw.metrics, snap, await prometheus.scrape_streams(gw.backend, snap))
    return web.Response(body=body.encode(), headers={"Content-Type": prometheus.CONTENT_TYPE})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
