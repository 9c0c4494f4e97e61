"""A record that does not deserialize never fails silently: the error names topic, partition, offset."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from devtools.cluster import LocalCluster, ensure_topic
from router.client import QueryClient

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parents[2] / "examples" / "wordcount.py")
BAD = b"\xff\xfe not utf-8"


def _produce_to(bootstrap: str, topic: str, partition: int, values: list[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap})
    for v in values:
        p.produce(topic, v, partition=partition)
    assert p.flush(30) == 0


def _env(unique: str) -> dict[str, str]:
    return {"WORDCOUNT_INPUT_TOPIC": f"bad-{unique}", "WORDCOUNT_OUTPUT_TOPIC": f"bad-out-{unique}"}


def test_fail_handler_stops_the_instance_naming_the_record(bootstrap: str, tmp_path: Path,
                                                           unique: str) -> None:
    topic = f"bad-{unique}"
    ensure_topic(bootstrap, topic, 6)
    _produce_to(bootstrap, topic, 2, [b"good line", BAD])
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique))
    cluster.start()
    try:
        code = cluster.wait_exit(0, 90)
    finally:
        cluster.stop()
    log = cluster.logs()
    assert code == 1, log
    assert f"topic={topic} partition=2 offset=1" in log, log
    assert "ERROR" in log


def test_log_and_continue_skips_the_record_and_keeps_counting(bootstrap: str, tmp_path: Path,
                                                              unique: str) -> None:
    topic = f"bad-{unique}"
    ensure_topic(bootstrap, topic, 6)
    _produce_to(bootstrap, topic, 4, [b"alpha beta", BAD, b"alpha gamma"])
    cluster = LocalCluster(bootstrap, APP, f"bad-{unique}", tmp_path, size=1, env=_env(unique),
                           extra_config=["default.deserialization.exception.handler=log-and-continue"])
    cluster.start()
    try:
        cluster.wait_running(90)
        deadline = time.monotonic() + 60
        with QueryClient(cluster.instances[0].target) as q:
            while q.get("counts", "gamma").value != 1:
                assert time.monotonic() < deadline, cluster.logs()
                time.sleep(0.2)
            assert q.get("counts", "alpha").value == 2
    finally:
        cluster.stop()
    assert f"topic={topic} partition=4 offset=1" in cluster.logs()
