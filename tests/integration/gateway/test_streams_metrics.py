"""The instances' Kafka Streams metrics through the gateway's ``/metrics``: every live instance is
asked (its Metrics RPC) and its thread, task and standby figures appear with an ``instance`` label,
agreeing with the counters the instance publishes itself."""

from __future__ import annotations

import re

import pytest

from tests.integration.gateway.conftest import GatewayCluster, lines
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration


def _by_instance(text: str, name: str) -> dict[str, float]:
    """Sum of a metric's series per ``instance`` label."""
    out: dict[str, float] = {}
    for labels, value in re.findall(rf"^{name}\{{(.*?)\}} (\S+)$", text, re.M):
        iid = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels))["instance"]
        out[iid] = out.get(iid, 0.0) + float(value)
    return out


def test_gateway_serves_every_instances_kafka_streams_metrics(gateway_cluster: GatewayCluster) -> None:
    gc = gateway_cluster
    ids = {i.instance_id for i in gc.cluster.instances}
    at_least = len(lines()) + sum(gc.truth.values())  # lines, then one record per word

    def agreed() -> str | None:
        status, content_type, body = gc.fetch("/metrics")
        assert status == 200 and content_type.startswith("text/plain"), body
        threads = _by_instance(body, "kafka_streams_stream_thread_metrics_process_total")
        published = _by_instance(body, "iqmesh_instance_records_processed_total")
        updates = _by_instance(body, "kafka_streams_stream_task_metrics_update_total")
        ok = (set(threads) == ids and threads == published and sum(threads.values()) >= at_least
              and sum(updates.values()) > 0)
        return body if ok else None
    body = wait_until(agreed, 60, "the instances' process-total to match their published counters", gc.logs)
    assert _by_instance(body, "iqmesh_instance_metrics_up") == dict.fromkeys(ids, 1.0)
    tasks = re.findall(r'^kafka_streams_stream_task_metrics_process_total\{.*task_id="(\d+_\d+)".*\} ', body, re.M)
    assert len(tasks) == len(set(tasks)) >= 2  # each active task once, on its owner
    assert "# TYPE kafka_streams_stream_thread_metrics_commit_latency_max gauge" in body
    # INFO (the default): no per-call store timing
    assert "kafka_streams_stream_state_metrics_" not in body
