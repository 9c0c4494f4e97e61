"""What the gateway counts itself: requests by route and status with their latency, and the answers
it received by serving instance (the instances' own counters, for every client, come with the
routing table: see snapshot.py)."""

from __future__ import annotations

import bisect
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from aiohttp import web

#: latency histogram buckets, seconds (Prometheus ``le``)
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


@dataclass
class Histogram:
    counts: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))
    total: float = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(BUCKETS, seconds)] += 1
        self.total += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)


class GatewayMetrics:
    """Counters of one gateway process (the event loop is its only writer: no locks)."""

    def __init__(self) -> None:
        self.started = time.time()
        #: (method, route, status) -> requests
        self.requests: dict[tuple[str, str, int], int] = defaultdict(int)
        #: route -> latency histogram
        self.latency: dict[str, Histogram] = defaultdict(Histogram)
        #: (served_by, role, stale) -> answers (a key lookup is one, a scan one per partition)
        self.answers: dict[tuple[str, str, bool], int] = defaultdict(int)

    def answered(self, served_by: str, role: str, stale: bool, n: int = 1) -> None:
        if served_by:
            self.answers[(served_by, role, stale)] += n

    @property
    def requests_total(self) -> int:
        return sum(self.requests.values())

    @property
    def errors_total(self) -> int:
        return sum(n for (_, _, status), n in self.requests.items() if status >= 400)


def route_of(request: web.Request) -> str:
    """The route's template (``/v1/stores/{store}/keys/{key}``), so label values stay few."""
    resource = request.match_info.route.resource
    return resource.canonical if resource is not None else "unmatched"


def metrics_middleware(metrics: GatewayMetrics) -> Callable[..., Awaitable[web.StreamResponse]]:
    @web.middleware
    async def middleware(request: web.Request,
                         handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        start = time.perf_counter()
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as e:
            status = e.status
            raise
        finally:
            route = route_of(request)
            metrics.requests[(request.method, route, status)] += 1
            metrics.latency[route].observe(time.perf_counter() - start)
    return middleware
