"""Latency and errors over time, for the dashboard's charts: the gateway's own cumulative counters
(metrics.py) and each instance's Get counters (from the routing table) read at each snapshot, and
the growth between two readings.

An instance's query latency is the mean of its Gets over the window: the growth of the seconds it
spent in Get over the growth of its Gets (answered or forwarded), as Prometheus'
``rate(iqmesh_instance_get_seconds_total) / rate(iqmesh_instance_gets_total)``; a failed Get's time
is in the seconds but not in the count.

Latency quantiles come from the growth of the query routes' histograms over the window (as
Prometheus' ``histogram_quantile`` over a ``rate``): linear within a bucket, so a quantile is
only as fine as the buckets (metrics.BUCKETS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from router.gateway.metrics import BUCKETS, GatewayMetrics

#: the routes whose latency is a query's: key lookups and scans (not the watch: a stream's
#: latency is how long it stayed open)
QUERY_ROUTE_PREFIX = "/v1/stores/{store}/"
NOT_QUERIES = ("/v1/stores/{store}/watch",)


def is_query_route(route: str) -> bool:
    return route.startswith(QUERY_ROUTE_PREFIX) and route not in NOT_QUERIES


@dataclass(frozen=True)
class GatewayReading:
    """The gateway's cumulative counters at one time."""

    latency: tuple[int, ...]  # query requests per latency bucket (the last one: over the largest bound)
    queries: int
    client_errors: int  # answers 4xx, any route
    server_errors: int  # answers 5xx, any route

    @staticmethod
    def of(metrics: GatewayMetrics) -> GatewayReading:
        counts = [0] * (len(BUCKETS) + 1)
        for route, h in list(metrics.latency.items()):
            if is_query_route(route):
                counts = [a + b for a, b in zip(counts, h.counts, strict=True)]
        c4 = c5 = 0
        for (_, _, status), n in list(metrics.requests.items()):
            if 400 <= status < 500:
                c4 += n
            elif status >= 500:
                c5 += n
        return GatewayReading(tuple(counts), sum(counts), c4, c5)


def quantile(q: float, counts: tuple[int, ...] | list[int]) -> float | None:
    """The ``q`` quantile (0..1) of a histogram over BUCKETS, in seconds; None without
    observations. Past the largest bound it answers that bound (the histogram knows no more)."""
    total = sum(counts)
    if total <= 0:
        return None
    rank = q * total
    seen = 0
    for i, n in enumerate(counts):
        if n and seen + n >= rank:
            if i >= len(BUCKETS):
                return BUCKETS[-1]
            lower = BUCKETS[i - 1] if i > 0 else 0.0
            return lower + (BUCKETS[i] - lower) * (rank - seen) / n
        seen += n
    return BUCKETS[-1]


def gateway_rates(now: GatewayReading, base: GatewayReading | None, seconds: float) -> dict[str, float | None]:
    """Query latency p50/p99 (ms) and requests and errors per second between two readings (a
    quantile is None when no query was answered in between)."""
    if base is None or seconds <= 0:
        return {"p50_ms": None, "p99_ms": None, "queries_per_s": 0.0, "client_errors_per_s": 0.0,
                "server_errors_per_s": 0.0}
    grown = [a - b for a, b in zip(now.latency, base.latency, strict=True)]

    def ms(q: float) -> float | None:
        v = quantile(q, grown)
        return None if v is None else round(v * 1000, 2)
    return {"p50_ms": ms(0.5), "p99_ms": ms(0.99),
            "queries_per_s": round((now.queries - base.queries) / seconds, 2),
            "client_errors_per_s": round((now.client_errors - base.client_errors) / seconds, 2),
            "server_errors_per_s": round((now.server_errors - base.server_errors) / seconds, 2)}


@dataclass(frozen=True)
class GetTimes:
    """Each instance's Get counters in one routing table: Gets it answered or forwarded, and the
    seconds it spent in Get."""

    gets: dict[str, int]
    seconds: dict[str, float]

    @staticmethod
    def of(md: dict[str, Any]) -> GetTimes:
        gets, seconds = {}, {}
        for i in md.get("instances", []):
            c = i["counters"]
            gets[i["instance_id"]] = int(c["gets_local"] + c["gets_routed"] + c["gets_forwarded"])
            seconds[i["instance_id"]] = float(c["get_seconds"])
        return GetTimes(gets, seconds)


def instance_get_ms(now: GetTimes, base: GetTimes | None) -> dict[str, float | None]:
    """Per instance of ``now``: its mean Get latency in ms since ``base`` (None when it had no Get
    in between, or there is no base). An instance that restarted (its count went down) counts from zero."""
    out: dict[str, float | None] = {}
    for iid, gets in now.gets.items():
        if base is None:
            out[iid] = None
            continue
        seconds = now.seconds.get(iid, 0.0)
        base_gets, base_seconds = base.gets.get(iid, 0), base.seconds.get(iid, 0.0)
        if gets >= base_gets:
            gets, seconds = gets - base_gets, seconds - base_seconds
        out[iid] = round(max(0.0, seconds) * 1000 / gets, 3) if gets > 0 else None
    return out
