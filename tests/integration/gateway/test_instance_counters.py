"""The instances' own query and processing counters: after Gets, a scan and a failed call sent to
one instance (unrouted: it answers or forwards each key), /v1/instances and /metrics show exactly
those figures, and the rates derived from them move."""

from __future__ import annotations

import json
import re
import time
from typing import Any

import grpc
import pytest

from kernel.rpc import iqmesh_pb2 as pb
from kernel.rpc import iqmesh_pb2_grpc as pb_grpc
from tests.integration.gateway.conftest import GatewayCluster, lines
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration


def _instances(gc: GatewayCluster) -> dict[str, dict[str, Any]]:
    status, body = gc.get("/v1/instances")
    assert status == 200, body
    return {i["instance_id"]: i for i in body["instances"]}


def _metric(text: str, name: str, **labels: str) -> float | None:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    m = re.search(rf"^{name}\{{{re.escape(want)}\}} (\S+)$", text, re.M)
    return float(m.group(1)) if m else None


def test_counters_and_metrics_reflect_the_queries(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    asked = gc.cluster.instances[0]
    me = asked.instance_id
    # the baseline: every instance's counters as they stand now, the earlier tests' queries
    # included. The counters are published with the metadata (a heartbeat about once a second,
    # later on a busy machine); one published after ``now_ms`` was computed after it (an
    # instance computes its counters as it stamps its heartbeat), and nothing queries the
    # instances in between, so it holds every earlier query
    now_ms = int(time.time() * 1000)
    seen_before: list[Any] = []

    def published_after_now() -> dict[str, dict[str, Any]] | None:
        status, body = gc.get("/v1/instances")
        assert status == 200, body
        # the snapshot's own time less the age the asked instance gave each heartbeat: no later
        # than the heartbeat's stamp (the asked instance measured the age after the snapshot began)
        stamped = {i["instance_id"]: body["at_ms"] - i["heartbeat_age_ms"] for i in body["instances"]}
        seen_before[:] = [stamped]
        now = {i["instance_id"]: i for i in body["instances"]}
        processed = sum(i["counters"]["records_processed"] for i in now.values())
        # lines by the first sub-topology, then one record per word by the second
        done = processed >= len(lines()) + sum(gc.truth.values())
        return now if done and len(now) == 3 and all(t > now_ms for t in stamped.values()) else None
    before = wait_until(published_after_now, 60, "every instance's counters published after the baseline's time",
                        lambda: f"heartbeats stamped at {seen_before}, baseline at {now_ms}\n{gc.logs()}")
    assert set(before) == {i.instance_id for i in gc.cluster.instances}

    # asked straight through a gRPC stub (the routing client would send each key to its owner)
    words = sorted(gc.truth)[:40]
    local = forwarded = entries = 0
    with grpc.insecure_channel(asked.target) as channel:
        stub = pb_grpc.InteractiveQueryStub(channel)
        for w in words:
            r = stub.Get(pb.GetRequest(store="counts", key=w), timeout=10)
            assert (r.found, json.loads(r.value_json)) == (True, gc.truth[w])
            if r.metadata.served_by == me:
                local += 1
            else:
                forwarded += 1
        for reply in stub.All(pb.AllRequest(store="counts", scan=pb.ScanOptions(limit=10_000)), timeout=10):
            entries += len(reply.entries.entries)
        with pytest.raises(grpc.RpcError) as e:
            stub.Get(pb.GetRequest(store="no-such-store", key="x"), timeout=10)
        assert e.value.code() is grpc.StatusCode.NOT_FOUND
    assert local and forwarded and entries == len(gc.truth)

    b = before[me]["counters"]
    peers_before = sum(i["counters"]["gets_routed"] for iid, i in before.items() if iid != me)
    seen: list[dict[str, Any]] = [{}]

    def counted() -> dict[str, dict[str, Any]] | None:
        now = _instances(gc)
        seen[0] = {iid: i["counters"] for iid, i in now.items()}
        c = now[me]["counters"]
        ok = (c["gets_local"] - b["gets_local"] == local
              and c["gets_forwarded"] - b["gets_forwarded"] == forwarded
              and sum(i["counters"]["gets_routed"] for iid, i in now.items() if iid != me) - peers_before
              == forwarded
              and c["scans"] > b["scans"] and c["scan_entries"] - b["scan_entries"] >= entries
              and c["query_errors"].get("NOT_FOUND", 0) == b["query_errors"].get("NOT_FOUND", 0) + 1
              and c["get_seconds"] > b["get_seconds"])
        return now if ok else None
    now = wait_until(counted, 60, "the instances' counters to show the queries",
                     lambda: f"asked {me}: {local} local, {forwarded} forwarded, {entries} entries; "
                             f"before { {iid: i['counters'] for iid, i in before.items()} }, "
                             f"last seen {seen[0]}\n{gc.logs()}")

    c = now[me]["counters"]
    text = wait_until(lambda: (lambda t: t if _metric(t, "iqmesh_instance_gets_total", instance=me, served="local")
                               == c["gets_local"] else None)(gc.fetch("/metrics")[2]),
                      60, "/metrics to show the same counters", gc.logs)
    assert _metric(text, "iqmesh_instance_gets_total", instance=me, served="forwarded") == c["gets_forwarded"]
    assert _metric(text, "iqmesh_instance_query_errors_total", instance=me, code="NOT_FOUND") == \
        c["query_errors"]["NOT_FOUND"]
    assert _metric(text, "iqmesh_instance_scans_total", instance=me) == c["scans"]
    processed = [_metric(text, "iqmesh_instance_records_processed_total", instance=i) for i in now]
    assert all(p is not None for p in processed)
    assert sum(p for p in processed if p is not None) >= len(lines()) + sum(gc.truth.values())
    assert _metric(text, "iqmesh_instance_records_per_second", instance=me) is not None

    # the rate is the counters' growth over the last 5 s: it moves while queries come
    with grpc.insecure_channel(asked.target) as channel:
        stub = pb_grpc.InteractiveQueryStub(channel)

        def rate() -> float:
            stub.Get(pb.GetRequest(store="counts", key=words[0]), timeout=10)
            return float(_instances(gc)[me]["queries_per_s"])
        assert wait_until(rate, 60, "queries/s of the asked instance to move", gc.logs) > 0
