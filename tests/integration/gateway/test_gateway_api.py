"""The REST gateway over a real three-instance word-count cluster: key lookups, range pages and the
streamed whole store return exactly what the test computed from the input, every answer says who
served it, and failures come back as JSON with a stable code and the right status."""

from __future__ import annotations

import json
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

from instance.local.gateway import GatewayProcess
from kernel.tokens import PositionToken
from tests.integration.gateway.conftest import GatewayCluster, ndjson
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

Q = urllib.parse.quote
#: the deadline of each wait on a condition (generous: only its upper bound)
WAIT_S = 60


def _owner(gc: GatewayCluster, partition: int) -> str:
    """The partition's active as /v1/stores lists it: the live one (a heartbeat a busy machine
    delayed past 3 s leaves it unlisted for a moment, so it is read until listed)."""
    def listed() -> str | None:
        status, body = gc.get("/v1/stores")
        assert status == 200
        (counts,) = [s for s in body["stores"] if s["store"] == "counts"]
        active = counts["replicas"][partition]["active"]
        return None if active is None else str(active["instance_id"])
    return str(wait_until(listed, WAIT_S, f"an active listed for partition {partition}", gc.logs))


def _error(gc: GatewayCluster, path: str, status: int, code: str) -> dict[str, Any]:
    got, body = gc.get(path)
    assert (got, body["error"]["code"]) == (status, code), body
    assert body["error"]["message"]
    return body["error"]  # type: ignore[no-any-return]


def test_key_lookups_say_who_served_them(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    ids = {i.instance_id for i in gc.cluster.instances}
    served = set()
    for word in sorted(gc.truth)[:12] + ["kafka"]:
        status, body = gc.get(f"/v1/stores/counts/keys/{Q(word)}")
        assert status == 200, body
        assert (body["found"], body["value"]) == (True, gc.truth[word])
        md = body["metadata"]
        assert md["served_by"] == _owner(gc, md["partition"])
        assert (md["role"], md["stale"], md["lag"]) == ("ACTIVE", False, 0)
        assert md["position_token"] and body["via"]
        served.add(md["served_by"])
    assert served == ids  # keys of every instance were answered

    status, body = gc.get("/v1/stores/counts/keys/no-such-word?allow_stale=true")
    assert status == 200 and body["found"] is False and body["value"] is None
    assert body["metadata"]["served_by"] in ids

    # a position token from an earlier answer bounds a later read: it is met, so it answers
    token = gc.get("/v1/stores/counts/keys/kafka")[1]["metadata"]["position_token"]
    status, body = gc.get(f"/v1/stores/counts/keys/kafka?position={token}")
    assert status == 200 and body["value"] == gc.truth["kafka"]


def test_range_pages_return_exactly_the_computed_entries(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    lo, hi = "item1", "user050"
    want = [(w, n) for w, n in sorted(gc.truth.items(), key=lambda kv: kv[0].encode())
            if lo.encode() <= w.encode() <= hi.encode()]
    assert len(want) > 20
    got: list[tuple[str, int]] = []
    token, pages = "", 0
    while True:
        status, body = gc.get(f"/v1/stores/counts/range?from={lo}&to={hi}&limit=7&page_token={token}")
        assert status == 200, body
        assert body["complete"] and not body["stale"] and len(body["partitions"]) == 6
        assert all(p["available"] and p["role"] == "ACTIVE" for p in body["partitions"])
        got += [(e["key"], e["value"]) for e in body["entries"]]
        pages += 1
        token = body["next_page_token"]
        if not token:
            break
    assert got == want
    assert pages == -(-len(want) // 7)

    status, body = gc.get("/v1/stores/counts/range")  # unbounded: the first DEFAULT_PAGE entries
    assert status == 200 and [e["key"] for e in body["entries"]] == sorted(gc.truth, key=str.encode)[:100]


def test_all_streams_every_entry_then_a_summary(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    want = sorted(gc.truth.items(), key=lambda kv: kv[0].encode())
    status, ctype, text = gc.fetch("/v1/stores/counts/all?allow_stale=true")
    assert status == 200 and ctype.startswith("application/x-ndjson")
    rows = ndjson(text)
    assert [(r["key"], r["value"]) for r in rows[:-1]] == want
    end = rows[-1]["end"]
    assert end["count"] == len(want) and end["complete"] and end["next_page_token"] == ""
    assert sorted(p["partition"] for p in end["partitions"]) == list(range(6))

    # a limit ends the stream early with the token that resumes it
    status, _, text = gc.fetch("/v1/stores/counts/all?limit=5")
    first = ndjson(text)
    token = first[-1]["end"]["next_page_token"]
    assert status == 200 and len(first) == 6 and token
    status, _, text = gc.fetch(f"/v1/stores/counts/all?page_token={token}")
    rest = ndjson(text)
    assert [(r["key"], r["value"]) for r in first[:-1] + rest[:-1]] == want


def test_errors_are_json_with_stable_codes(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    for path in ("/v1/stores/nope/keys/a", "/v1/stores/nope/range", "/v1/stores/nope/all", "/v1/stores/nope/watch"):
        assert "nope" in _error(gc, path, 404, "UNKNOWN_STORE")["message"]
    for bad in ("limit=0", "limit=10001", "limit=x", "allow_stale=yes", "max_lag=-1", "page_token=garbage",
                "position=garbage"):
        _error(gc, f"/v1/stores/counts/range?{bad}", 400, "INVALID_ARGUMENT")
    # a page token of another query
    token = gc.get("/v1/stores/counts/range?limit=1")[1]["next_page_token"]
    _error(gc, f"/v1/stores/counts/range?from=a&limit=1&page_token={token}", 400, "INVALID_ARGUMENT")
    _error(gc, "/v1/stores/counts/keys/a?position=" + PositionToken("other", 0, 1).encode(), 400,
           "INVALID_ARGUMENT")

    # a bound no replica has reached: 503 with the reason and who was asked
    kafka = gc.get("/v1/stores/counts/keys/kafka")[1]["metadata"]
    ahead = PositionToken("counts", kafka["partition"], kafka["position"] + 10**9).encode()
    err = _error(gc, f"/v1/stores/counts/keys/kafka?position={ahead}", 503, "UNAVAILABLE")
    assert err["reason"] == "NOT_UP_TO_BOUND" and err["tried"] == [kafka["served_by"]]
    # a scan reports the partition that cannot answer, or fails when it must be complete
    status, body = gc.get(f"/v1/stores/counts/range?position={ahead}")
    assert status == 200 and not body["complete"]
    (missing,) = [p for p in body["partitions"] if not p["available"]]
    assert (missing["partition"], missing["reason"]) == (kafka["partition"], "NOT_UP_TO_BOUND")
    err = _error(gc, f"/v1/stores/counts/all?position={ahead}&require_complete=true", 503, "UNAVAILABLE")
    assert err["reason"] == "NOT_UP_TO_BOUND"

    _error(gc, "/v1/nothing-here", 404, "NOT_FOUND")
    _error(gc, "/v1/stores/nope/watch", 404, "UNKNOWN_STORE")


def test_instances_metadata_metrics_probes_and_events(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    ids = sorted(i.instance_id for i in gc.cluster.instances)
    # every instance alive and RUNNING is the cluster's steady state, but "alive" is a heartbeat
    # younger than 3 s, which a busy machine can delay for a moment: each view is read until it
    # shows that state (a defect that never shows it still fails at the deadline)

    def instances_up() -> Any:
        status, body = gc.get("/v1/instances")
        assert status == 200, body
        return body if all(i["alive"] and i["state"] == "RUNNING" for i in body["instances"]) else None
    body = wait_until(instances_up, WAIT_S, "/v1/instances to list every instance alive and RUNNING", gc.logs)
    assert [i["instance_id"] for i in body["instances"]] == ids
    assert all("queries_per_s" in i for i in body["instances"])
    status, md = gc.get("/v1/metadata")
    assert status == 200 and md["store_partitions"] == {"counts": 6} and md["asked"] in ids
    assert gc.get("/healthz") == (200, {"status": "ok"})

    def ready() -> Any:
        status, body = gc.get("/readyz")
        return body if status == 200 and body["running"] == ids and body["unowned_partitions"] == [] else None
    wait_until(ready, WAIT_S, "/readyz to list every instance running, no partition unowned", gc.logs)
    status, doc = gc.get("/openapi.json")
    assert status == 200 and doc["openapi"].startswith("3.") and "/v1/stores/{store}/range" in doc["paths"]

    def metrics_up() -> str | None:
        status, ctype, text = gc.fetch("/metrics")
        assert status == 200 and ctype.startswith("text/plain")
        return text if all(f'iqmesh_instance_up{{instance="{iid}"}} 1' in text for iid in ids) else None
    text = wait_until(metrics_up, WAIT_S, "/metrics to say every instance is up", gc.logs)
    assert 'iqmesh_gateway_requests_total{method="GET",route="/v1/stores/{store}/keys/{key}",status="200"}' in text
    assert 'iqmesh_store_partition_lag{instance="' in text
    assert "iqmesh_gateway_request_duration_seconds_bucket" in text

    status, ctype, text = gc.fetch("/v1/events?max_events=2")
    assert status == 200 and ctype.startswith("text/event-stream")
    events = [json.loads(line[len("data: "):]) for line in text.splitlines() if line.startswith("data: ")]
    assert len(events) == 2 and "history" in events[0]
    assert [i["instance_id"] for i in events[1]["instances"]] == ids
    assert events[1]["stores"][0]["store"] == "counts"


def test_seeds_and_an_unreachable_entry(gateway_cluster: GatewayCluster, tmp_path: Path) -> None:
    """Started with --seeds whose first instance cannot be reached, the gateway asks the next one
    and then learns every instance from the routing table."""
    gc = gateway_cluster
    from instance.local.broker import free_port

    dead = f"127.0.0.1:{free_port()}"
    gw = GatewayProcess("", "", tmp_path / "seeds-gateway.log", seeds=[dead, gc.cluster.instances[1].target])
    gw.start()
    try:
        gw.wait_ready(30)
        other = GatewayCluster(gc.cluster, gw, gc.truth, gc.bootstrap, tmp_path)
        status, body = other.get("/v1/stores/counts/keys/kafka")
        assert status == 200 and body["value"] == gc.truth["kafka"]
        assert body["via"] != dead
    finally:
        gw.stop()


def test_via_names_the_instance_the_gateway_asked(gateway_cluster: GatewayCluster) -> None:
    """The gateway's client sends a key straight to its owner: ``via`` is that owner, which
    answered itself (not forwarded), not the entry instance the gateway first learned of."""
    gc = gateway_cluster
    vias = set()
    for word in sorted(gc.truth)[:12]:
        status, body = gc.get(f"/v1/stores/counts/keys/{Q(word)}")
        assert status == 200, body
        md = body["metadata"]
        if not md["forwarded"]:
            assert body["via"] == md["endpoint"], body  # "answered itself" is then true
        vias.add(body["via"])
    assert vias == {i.target for i in gc.cluster.instances}
    status, body = gc.get("/v1/stores/counts/range?limit=3")
    assert status == 200 and body["via"] in {i.target for i in gc.cluster.instances}


def test_a_limit_beyond_the_wire_is_every_entry(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    status, _, body = gc.fetch("/v1/stores/counts/all?limit=99999999999")
    assert status == 200, body
    rows = ndjson(body)
    assert len(rows) - 1 == len(gc.truth) and rows[-1]["end"]["complete"]
