"""Probes and metrics: ``/healthz`` (the process answers), ``/readyz`` (this gateway can serve: its
readiness probe), ``/readyz?cluster=true`` (the cluster can answer queries), ``/metrics`` (Prometheus).

The gateway's readiness does not follow the cluster's: in a total outage a gateway that left its
Service would take the dashboard away exactly when it is needed to see the outage. So ``/readyz``
is 503 only when this gateway cannot do its own job: it cannot read its discovery (the instances
topic: the broker, the credentials, the application id), it has not found the cluster once yet
(with ``--seeds``, no seed has answered since it started), or it is shutting down. Its body says
how the cluster is (``cluster``, ``cluster_problem``); ``?cluster=true`` is the former ``/readyz``:
503 unless a fresh routing table has a live RUNNING instance.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from kernel.instance_state import State
from router.gateway import prometheus
from router.gateway.context import Gateway, gateway_of
from router.gateway.discovery import TopicDiscovery
from router.gateway.errors import ApiError, GatewayReason, bad_request
from router.gateway.params import boolean, only
from router.gateway.snapshot import store_replicas

#: the query parameters /readyz takes
READYZ_PARAMS = ("cluster",)


async def healthz(request: web.Request) -> web.Response:
    return web.json_response({"status": "ok"})


def gateway_problems(gw: Gateway) -> list[str]:
    """Why this gateway cannot serve (empty: it can, whatever state the cluster is in)."""
    if gw.closing:
        return ["the gateway is shutting down"]
    d = gw.discovery
    if d.problem:
        return [d.problem]
    if isinstance(d, TopicDiscovery):
        return [] if d.reader.loaded.is_set() else ["the instances topic has not been read to its end yet"]
    snap = gw.poller.latest
    if snap is None or snap.at == 0:  # a failed poll keeps the time of the last table read: 0 is never
        why = snap.error if snap is not None and snap.error else "not asked yet"
        return [f"no seed has answered yet ({why}); check --seeds"]
    return []


def cluster_problems(gw: Gateway) -> list[str]:
    """Why the cluster cannot answer queries through this gateway (empty: a fresh routing table
    with at least one live RUNNING instance)."""
    snap = gw.poller.latest
    reasons = []
    if gw.discovery.problem:
        reasons.append(gw.discovery.problem)
    elif not gw.discovery.ready:
        reasons.append("no instance discovered yet")
    if snap is None or not gw.poller.fresh:
        reasons.append(f"no fresh routing table ({snap.error if snap and snap.error else 'not polled yet'})")
    if snap is not None and not running(gw):
        reasons.append("no live RUNNING instance")
    return reasons


def running(gw: Gateway) -> list[str]:
    snap = gw.poller.latest
    return [i["instance_id"] for i in snap.metadata.get("instances", [])
            if i["alive"] and i["state"] is State.RUNNING] if snap else []


def not_ready(problems: list[str]) -> ApiError:
    return ApiError(503, "NOT_READY", "; ".join(problems), reason=GatewayReason.NOT_READY, tried=[])


async def readyz(request: web.Request) -> web.Response:
    """This gateway's readiness, or with ``cluster=true`` the cluster's. Partitions without a live
    owner are listed (queries on them get 503) but make neither unready."""
    only(request.query, READYZ_PARAMS)
    if request.query.get("cluster") == "":  # a probe's URL says what it means: true or false
        raise bad_request("cluster must be true or false, got ''")
    for_cluster = boolean(request.query, "cluster")
    gw = gateway_of(request)
    own = [] if for_cluster else gateway_problems(gw)
    if own:
        raise not_ready(own)
    cluster = cluster_problems(gw)
    if for_cluster and cluster:
        raise not_ready(cluster)
    snap = gw.poller.latest
    body: dict[str, Any] = {"status": "ready", "running": running(gw),
                            "unowned_partitions": [{"store": s["store"], "partition": r["partition"]}
                                                   for s in (store_replicas(snap.metadata) if snap and snap.metadata
                                                             else []) for r in s["replicas"] if r["active"] is None],
                            "via": snap.via if snap else ""}
    if not for_cluster:
        body.update(cluster="not_ready" if cluster else "ready", cluster_problem="; ".join(cluster))
    return web.json_response(body)


async def metrics(request: web.Request) -> web.Response:
    gw = gateway_of(request)
    snap = gw.poller.latest
    body = prometheus.render(gw.metrics, snap, await prometheus.scrape_streams(gw.backend, snap))
    return web.Response(body=body.encode(), headers={"Content-Type": prometheus.CONTENT_TYPE})


def add_routes(app: web.Application) -> None:
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)
