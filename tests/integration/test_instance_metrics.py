"""An instance's own Prometheus ``/metrics`` (``iqmesh.metrics.port``) after known input on the
broker: one word-count instance, a few lines and two records whose value is null (the processing
handler skips them: dropped records); then, restarted with in-memory stores, what it restored."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from instance.local.broker import free_port
from instance.local.cluster import produce
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration

LINES = ["all streams lead to kafka", "hello kafka streams", "join kafka summit", "one two three four five"]


def _scrape(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", e.read().decode()
    except OSError as e:  # not listening yet
        return 0, "", str(e)


def _series(text: str, name: str) -> list[tuple[dict[str, str], float]]:
    out = []
    for labels, value in re.findall(rf"^{name}\{{(.*?)\}} (\S+)$", text, re.M):
        out.append((dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels)), float(value)))
    return out


def _sum(text: str, name: str) -> float:
    return sum(v for _, v in _series(text, name))


def test_metrics_endpoint_reports_known_input(bootstrap: str, tmp_path: Path, unique: str) -> None:
    port = free_port()
    # the rates and maxima are over the sampled windows (2 x 30 s by default): a scrape later than
    # that after the processing or the restore, on a busy machine, would read them empty. Windows
    # of 10 min keep them for the whole test
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 1, f"iqmesh.metrics.port={port}",
                                       "metrics.recording.level=DEBUG", "commit.interval.ms=200",
                                       "metrics.sample.window.ms=600000",
                                       "processing.exception.handler=log-and-continue", "iqmesh.in.memory.stores=true",
                                       partitions=2)
    words = sum(word_counts(LINES).values())
    records = len(LINES) + 2 + words  # lines and nulls by the first sub-topology, words by the second
    url = f"http://127.0.0.1:{port}/metrics"
    cluster.start()
    try:
        cluster.wait_running(90)
        nulls: list[tuple[bytes | None, bytes]] = [(None, None), (None, None)]  # type: ignore[list-item]
        produce(bootstrap, topic, [(None, line.encode()) for line in LINES] + nulls)

        def processed() -> str | None:
            status, _, body = _scrape(url)
            if status == 200 and _sum(body, "kafka_streams_stream_thread_metrics_process_total") == records:
                return body
            return None
        body = wait_until(processed, 60, f"{records} records processed on {url}", cluster.logs)
        status, content_type, _ = _scrape(url)
        assert status == 200 and content_type.startswith("text/plain; version=0.0.4")
        # task level: every record of every active task, and exactly the two nulls dropped
        assert _sum(body, "kafka_streams_stream_task_metrics_process_total") == records
        assert _sum(body, "kafka_streams_stream_task_metrics_dropped_records_total") == 2
        tasks = {labels["task_id"] for labels, _ in _series(body, "kafka_streams_stream_task_metrics_process_total")}
        assert tasks == {"0_0", "0_1", "1_0", "1_1"}
        assert _sum(body, "kafka_streams_stream_task_metrics_process_rate") > 0
        assert "# TYPE kafka_streams_stream_task_metrics_process_total counter" in body
        # stores (DEBUG): one put per word into the counts store, timed
        puts = _series(body, "kafka_streams_stream_state_metrics_put_rate")
        assert {(labels["store_type"], labels["in_memory_state_id"]) for labels, _ in puts} == {("in-memory", "counts")}
        assert sum(v for _, v in puts) > 0
        assert all(v > 0 for _, v in _series(body, "kafka_streams_stream_state_metrics_put_latency_max"))
        # commits happen every 200 ms and are timed (thread level, ms)

        def committed() -> bool:
            _, _, text = _scrape(url)
            return _sum(text, "kafka_streams_stream_thread_metrics_commit_total") >= 1
        wait_until(committed, 30, "a commit", cluster.logs)
        assert _scrape(f"http://127.0.0.1:{port}/other")[0] == 404

        # restarted: in-memory stores restore the whole changelog (no transactions: every offset a record)
        cluster.stop()
        changelog = f"{cluster.application_id}-counts-changelog"
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"probe-{unique}"})
        try:
            logged = sum(c.get_watermark_offsets(TopicPartition(changelog, p), timeout=10)[1] for p in (0, 1))
        finally:
            c.close()
        assert logged > 0
        cluster.start()
        cluster.wait_running(90)

        def restored() -> str | None:
            status, _, text = _scrape(url)
            ok = status == 200 and _sum(text, "kafka_streams_stream_task_metrics_restore_total") == logged
            return text if ok else None
        text = wait_until(restored, 60, f"{logged} changelog records restored", cluster.logs)
        assert _sum(text, "kafka_streams_stream_task_metrics_restore_remaining_records_total") == 0
        assert _sum(text, "kafka_streams_stream_task_metrics_restore_rate") > 0
        assert _sum(text, "kafka_streams_stream_thread_metrics_process_total") == 0  # nothing new to process
    finally:
        cluster.stop()
