"""The names the board and the rules read, as the gateway's /metrics writes them
(router/gateway/prometheus.py): every metric an instance records, whatever its group and name,
under the JMX exporter's name with an ``instance`` label (so ``dirty-close-total`` of
``stream-thread-metrics`` needs no change to appear), and the processing lag the gateway holds.
The text passes ``promtool check metrics``."""

from __future__ import annotations

import subprocess

from instance.runtime.metrics import THREAD_GROUP, ThreadMetrics
from kernel.rpc import iqmesh_pb2 as pb
from router.gateway.metrics import GatewayMetrics
from router.gateway.prometheus import render
from router.gateway.snapshot import Snapshot, metadata_to_json
from tests.ops.tools import need_promtool


def _snapshot() -> Snapshot:
    reply = pb.MetadataReply(asked="i0", store_partitions={"counts": 1}, instances=[
        pb.InstanceMetadata(instance_id="i0", endpoint="h:1", state=pb.INSTANCE_STATE_RUNNING, alive=True,
                            active_tasks=["0_0"],
                            counters=pb.InstanceCounters(records_processed=7)),
        pb.InstanceMetadata(instance_id="i1", endpoint="h:2", state=pb.INSTANCE_STATE_ERROR, alive=False)])
    return Snapshot(100.0, "h:1", metadata_to_json(reply), {},
                    processing_lag={"by_instance": {"i0": 12, "(no owner)": 3}, "by_topic": {"lines": 15}})


def _reply(metrics: dict[tuple[str, str, tuple[tuple[str, str], ...]], float]) -> pb.MetricsReply:
    return pb.MetricsReply(instance_id="i0", metrics=[
        pb.Metric(name=name, group=group, tags=dict(tags), value=v, description=f"the {name}")
        for (name, group, tags), v in metrics.items()])


def test_every_recorded_thread_metric_is_exported_under_its_jmx_exporter_name() -> None:
    thread = ThreadMetrics("app-StreamThread-1")
    thread.task_metrics("1_0")
    recorded = {(m.name, m.group, m.tags): v for m, v in thread.metrics().items()}
    # a thread-level metric this exporter has never heard of, as another change adds one
    recorded[("dirty-close-total", THREAD_GROUP, (("thread-id", "app-StreamThread-1"),))] = 2.0
    text = render(GatewayMetrics(), _snapshot(), [("i0", _reply(recorded)), ("i1", None)])
    lines = text.splitlines()
    for name, group, tags in recorded:
        exported = f"kafka_streams_{group}_{name}".replace("-", "_")
        labels = ",".join([f'{k.replace("-", "_")}="{v}"' for k, v in sorted((*tags, ("instance", "i0")))])
        assert any(line.startswith(f"{exported}{{{labels}}} ") for line in lines), (exported, labels)
        kind = "counter" if name.endswith("-total") else "gauge"
        assert f"# TYPE {exported} {kind}" in lines, exported
    assert ('kafka_streams_stream_thread_metrics_dirty_close_total{instance="i0",thread_id="app-StreamThread-1"} 2'
            in lines)
    assert 'iqmesh_instance_metrics_up{instance="i1"} 0' in lines
    assert 'iqmesh_instance_state{instance="i1",state="ERROR"} 1' in lines


def test_the_processing_lag_is_exported_per_instance_and_per_topic() -> None:
    text = render(GatewayMetrics(), _snapshot())
    assert "# TYPE iqmesh_instance_processing_lag_records gauge" in text
    assert 'iqmesh_instance_processing_lag_records{instance="i0"} 12' in text
    assert 'iqmesh_instance_processing_lag_records{instance="(no owner)"} 3' in text
    assert 'iqmesh_topic_processing_lag_records{topic="lines"} 15' in text
    # before the gateway's first Describe answer: no series (not zeros that would hide a lag)
    before = Snapshot(100.0, "h:1", _snapshot().metadata, {})
    assert "iqmesh_topic_processing_lag_records{" not in render(GatewayMetrics(), before)


def test_promtool_accepts_the_exposition() -> None:
    promtool = need_promtool()
    thread = ThreadMetrics("app-StreamThread-1")
    thread.task_metrics("1_0")
    recorded = {(m.name, m.group, m.tags): v for m, v in thread.metrics().items()}
    text = render(GatewayMetrics(), _snapshot(), [("i0", _reply(recorded))])
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
