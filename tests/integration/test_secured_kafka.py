"""A secured Apache Kafka cluster (SASL_SSL, SCRAM-SHA-512, a self-signed certificate), as the users'
production clusters are: the word count runs exactly-once, answers queries and a watch, the gateway
finds the instances through the instances topic and the snapshot job reads the changelogs, each with
the settings of one properties file; wrong credentials are one line naming the settings, exit 2.

Apache Kafka only (``IQMESH_BROKER=kafka``): the dev broker has no SASL or TLS listener.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

from devtools.suite_broker import suite_engine
from instance.local import kafka_broker
from instance.local.broker import free_port
from instance.local.cluster import produce, sample_lines
from instance.runtime.group_admin import GroupMember, remove_members
from router.client.sync_client import QueryClient
from router.client.watch_client import Change
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster
from tests.integration.test_crash_recovery import wait_for_counts

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(suite_engine() != "kafka" or bool(os.environ.get("IQMESH_BOOTSTRAP")),
                       reason="starts a SASL_SSL Apache Kafka of its own (IQMESH_BROKER=kafka)"),
]


def _iqmesh(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "iqmesh", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_word_count_queries_watch_gateway_and_snapshot_on_sasl_ssl(tmp_path: Path, unique: str) -> None:
    broker_dir = tmp_path / "broker"
    bootstrap = kafka_broker.start_broker(broker_dir, sasl_ssl=True).bootstrap
    gateway = None
    try:
        kafka = kafka_broker.client_properties(broker_dir)
        assert kafka["security.protocol"] == "SASL_SSL"
        props_file = broker_dir / kafka_broker.CLIENT_PROPERTIES
        settings = [f"{k}={v}" for k, v in kafka.items()]

        # wrong credentials: one line naming what to check, exit 2 (no traceback)
        wrong = _iqmesh("run", "examples.wordcount", "--application-id", f"bad-{unique}", "--instance-id", "b0",
                        "--bootstrap", bootstrap, "--grpc-port", str(free_port()),
                        "--state-dir", str(tmp_path / "bad"), "--config-file", str(props_file),
                        "--config", "sasl.password=not-the-password")
        assert wrong.returncode == 2, wrong.stderr
        lines = wrong.stderr.strip().splitlines()
        assert "Traceback" not in wrong.stderr and lines[-1].startswith("iqmesh run: error: INVALID_CONFIG: "), lines
        assert "sasl.password" in lines[-1] and "refused our credentials" in lines[-1], lines[-1]

        cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "processing.guarantee=exactly_once_v2",
                                           "commit.interval.ms=200", *settings, kafka=kafka)
        text = sample_lines(2_000, seed=3)
        truth = word_counts(text)
        cluster.start()
        try:
            cluster.wait_running(120)
            target = cluster.instances[0].target
            with QueryClient(target, timeout=10) as q:
                produce(bootstrap, topic, ((None, t.encode()) for t in text), kafka=kafka)
                wait_for_counts(target, truth, cluster, exact=True)
                # from the beginning, so it has every committed count whenever it starts; made
                # after the counts are in, so its deadline is its own (a watch's counts from its
                # creation, and the counting before could take as long on a busy machine)
                watch = q.watch("counts", "kafka", from_beginning=True, timeout=120)
                seen = []
                for change in watch:
                    if not isinstance(change, Change):
                        continue  # a routing event
                    seen.append(change.value)
                    if change.value == truth["kafka"]:
                        break
                watch.close()
                assert seen and seen[-1] == truth["kafka"] and seen == sorted(seen), seen

            # the gateway finds the instances through the instances topic, over SASL_SSL
            port = free_port()
            log = tmp_path / "gateway.log"
            with open(log, "wb") as out:
                gateway = subprocess.Popen(
                    [sys.executable, "-m", "iqmesh", "gateway", "--bootstrap", bootstrap,
                     "--application-id", cluster.application_id, "--port", str(port),
                     "--config-file", str(props_file)],
                    stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})

            def gateway_value() -> object:
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/stores/counts/keys/kafka",
                                                timeout=5) as r:
                        return json.loads(r.read()).get("value")
                except OSError:
                    return None
            wait_until(lambda: gateway_value() == truth["kafka"], 90, "the gateway's answer over SASL_SSL",
                       log.read_text)

            # the snapshot job reads the changelogs with the same settings
            out_dir = tmp_path / "snapshot"
            snap = _iqmesh("snapshot", "--bootstrap", bootstrap, "--application-id", cluster.application_id,
                           "--out", str(out_dir), "--master", "local[1]",
                           *[a for s in settings for a in ("--kafka-config", s)], timeout=300)
            assert snap.returncode == 0, snap.stderr[-3000:]
            import pyarrow.parquet as pq  # comes with pyspark[sql]

            rows = pq.read_table(out_dir / "counts").to_pylist()
            got = {bytes(r["key"]).decode(): int.from_bytes(bytes(r["value"]), "big", signed=True) for r in rows}
            assert got == dict(truth)
        finally:
            cluster.stop()
        _a_static_member_is_removed_over_sasl_ssl(bootstrap, kafka, unique)
    finally:
        if gateway is not None:
            gateway.terminate()
            gateway.wait(30)
        kafka_broker.stop_broker(broker_dir)


def _a_static_member_is_removed_over_sasl_ssl(bootstrap: str, kafka: dict[str, str], unique: str) -> None:
    """The admin request confluent-kafka lacks (remove members, used when a StatefulSet is scaled
    in: instance/runtime/departure.py) speaks TLS and SCRAM with the same settings."""
    group, topic = f"static-{unique}", f"static-{unique}"
    admin = AdminClient({"bootstrap.servers": bootstrap, **kafka})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    # the group keeps the closed static member for its session timeout: 5 min holds it there
    # until it is removed below, however slow the machine (60 s was a window a busy one could miss)
    consumer = Consumer({"bootstrap.servers": bootstrap, **kafka, "group.id": group,
                         "group.instance.id": "pod-0-1", "session.timeout.ms": 300000})
    consumer.subscribe([topic])
    wait_until(lambda: consumer.poll(0.5) is None and bool(consumer.assignment()), 60, "the static member's assignment")
    consumer.close()  # a static member sends no LeaveGroup: the group keeps it for session.timeout.ms

    def members() -> list[str]:
        described = admin.describe_consumer_groups([group])[group].result(30)
        return [m.group_instance_id for m in described.members]

    assert members() == ["pod-0-1"]
    errors = remove_members({"bootstrap.servers": bootstrap, **kafka}, group, [GroupMember("", "", "pod-0-1", "")])
    assert errors == {"pod-0-1": "NONE"}, errors
    wait_until(lambda: members() == [], 30, "the static member removed")
