"""One point of the dashboard's charts per snapshot: the SSE stream's ``point`` and the entries of
its first event's ``history``.

Per instance of the routing table: its rates (snapshot.rates), its mean Get latency
(series.instance_get_ms) and its processing lag, or nulls while it is gone (stopped, failed, or no
heartbeat for its session timeout: timeline.presence), so its lines break there instead of being
drawn across the time it was away; the gateway's own latency and error rates. When no instance
answers, the point is a gap: every figure null (unknown), every instance with the presence its
aging table gives it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from router.gateway.timeline import presence

#: an instance's figures on the charts
INSTANCE_FIELDS = ("store_updates_per_s", "records_per_s", "queries_per_s", "query_errors_per_s", "lag", "get_ms")
#: the gateway's (series.gateway_rates)
GATEWAY_FIELDS = ("p50_ms", "p99_ms", "queries_per_s", "client_errors_per_s", "server_errors_per_s")


def _t(at: float) -> float:
    return int(at * 1000) / 1000


def chart_point(at: float, md: Mapping[str, Any], rates: Mapping[str, Mapping[str, float]],
                get_ms: Mapping[str, float | None], gateway: Mapping[str, float | None],
                processing_lag: Mapping[str, Mapping[str, int]]) -> dict[str, Any]:
    """The point of a snapshot read at ``at`` (``md``: its routing table as JSON)."""
    instances: dict[str, dict[str, Any]] = {}
    for inst in md.get("instances", []):
        iid, now = inst["instance_id"], presence(inst)
        if now == "gone":
            instances[iid] = {**dict.fromkeys(INSTANCE_FIELDS), "presence": now}
            continue
        r = rates.get(iid, {})
        instances[iid] = {**{k: r.get(k) for k in INSTANCE_FIELDS}, "get_ms": get_ms.get(iid), "presence": now}
    lag = dict(processing_lag)
    if "by_instance" in lag:
        lag["by_instance"] = {iid: n for iid, n in lag["by_instance"].items()
                              if instances.get(iid, {}).get("presence") != "gone"}
    return {"t": _t(at), "rates": instances, "gateway": dict(gateway), "processing_lag": lag}


def gap_point(at: float, md: Mapping[str, Any]) -> dict[str, Any]:
    """The point of a snapshot no instance answered: ``md`` is the last routing table, aged."""
    instances = {i["instance_id"]: {**dict.fromkeys(INSTANCE_FIELDS), "presence": presence(i)}
                 for i in md.get("instances", [])}
    return {"t": _t(at), "rates": instances, "gateway": dict.fromkeys(GATEWAY_FIELDS), "processing_lag": {}}
