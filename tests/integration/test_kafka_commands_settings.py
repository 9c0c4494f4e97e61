"""``iqmesh topic``, ``produce`` and ``consume`` take the Kafka client settings every other command
takes (``--config-file``, ``--config``; ``--client-config`` for ``topic create``, whose ``--config``
is a topic setting as in kafka-topics): against the SASL_SSL Apache Kafka the project starts, with
its client.properties, the three commands work; a wrong password and a security.protocol the
broker does not speak are named as such, not as a broker that is not running, by them and by the
gateway, which stops on them as ``iqmesh run`` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from devtools.suite_broker import suite_engine
from instance.local import kafka_broker
from instance.local.broker import free_port

pytestmark = pytest.mark.integration


def _iqmesh(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "iqmesh", *args], capture_output=True, text=True,
                          timeout=120, input=stdin)


def _error_line(p: subprocess.CompletedProcess[str], command: str, code: str) -> str:
    assert p.returncode == 2, p.stdout + p.stderr
    line = p.stderr.strip()
    assert "Traceback" not in line and len(line.splitlines()) == 1, p.stderr
    assert line.startswith(f"iqmesh {command}: error: {code}: "), line
    return line


def test_the_commands_take_client_settings_on_the_dev_broker(bootstrap: str, tmp_path: Path, unique: str) -> None:
    props = tmp_path / "client.properties"
    props.write_text("security.protocol=PLAINTEXT\nclient.dns.lookup=use_all_dns_ips\napplication.id=ignored\n")
    topic = f"settings-{unique}"
    created = _iqmesh("topic", "create", topic, "--partitions", "2", "--bootstrap", bootstrap,
                      "--config-file", str(props), "--config", "retention.ms=600000",
                      "--client-config", "socket.keepalive.enable=true")
    assert created.returncode == 0, created.stderr
    assert json.loads(created.stdout) == {"topic": topic, "partitions": 2, "created": True}
    sent = _iqmesh("produce", "--topic", topic, "--bootstrap", bootstrap, "--config-file", str(props),
                   "--key-separator", ":", stdin="a:1\nb:2\n")
    assert sent.returncode == 0 and json.loads(sent.stdout)["records"] == 2, sent.stderr
    read = _iqmesh("consume", "--topic", topic, "--from-beginning", "--max-messages", "2", "--timeout", "30",
                   "--bootstrap", bootstrap, "--config-file", str(props), "--config", "fetch.wait.max.ms=100")
    assert read.returncode == 0, read.stderr
    assert sorted((r["key"], r["value"]) for r in map(json.loads, read.stdout.splitlines())) == [("a", "1"), ("b", "2")]
    # the broker speaks plaintext: a TLS client is told so, not that the broker is not running
    line = _error_line(_iqmesh("topic", "list", "--bootstrap", bootstrap, "--config", "security.protocol=SSL"),
                       "topic", "INVALID_CONFIG")
    assert "does not speak TLS" in line and "security.protocol" in line, line
    # the gateway stops on settings the brokers refuse too (not on brokers that do not answer yet)
    line = _error_line(_iqmesh("gateway", "--bootstrap", bootstrap, "--application-id", f"app-{unique}",
                               "--port", str(free_port()), "--config", "security.protocol=SSL"),
                       "gateway", "INVALID_CONFIG")
    assert "does not speak TLS" in line, line


@pytest.mark.skipif(suite_engine() != "kafka" or bool(os.environ.get("IQMESH_BOOTSTRAP")),
                    reason="starts a SASL_SSL Apache Kafka of its own (IQMESH_BROKER=kafka)")
def test_the_commands_reach_a_sasl_ssl_broker_with_its_client_properties(tmp_path: Path, unique: str) -> None:
    broker_dir = tmp_path / "broker"
    bootstrap = kafka_broker.start_broker(broker_dir, sasl_ssl=True).bootstrap
    try:
        props = str(broker_dir / kafka_broker.CLIENT_PROPERTIES)
        topic = f"secured-{unique}"
        created = _iqmesh("topic", "create", topic, "--partitions", "3", "--bootstrap", bootstrap,
                          "--config-file", props)
        assert created.returncode == 0, created.stderr
        assert json.loads(created.stdout)["partitions"] == 3
        listed = _iqmesh("topic", "list", "--bootstrap", bootstrap, "--config-file", props)
        assert {"topic": topic, "partitions": 3} in map(json.loads, listed.stdout.splitlines()), listed.stderr
        sent = _iqmesh("produce", "--topic", topic, "--bootstrap", bootstrap, "--config-file", props,
                       stdin="all streams lead to kafka\n")
        assert sent.returncode == 0, sent.stderr
        read = _iqmesh("consume", "--topic", topic, "--from-beginning", "--max-messages", "1", "--timeout", "60",
                       "--bootstrap", bootstrap, "--config-file", props)
        assert read.returncode == 0 and json.loads(read.stdout)["value"] == "all streams lead to kafka", read.stderr

        wrong = _error_line(_iqmesh("topic", "list", "--bootstrap", bootstrap, "--config-file", props,
                                    "--config", "sasl.password=not-the-password"), "topic", "INVALID_CONFIG")
        assert "refused our credentials" in wrong and "sasl.password" in wrong, wrong
        wrong = _error_line(_iqmesh("gateway", "--bootstrap", bootstrap, "--application-id", f"app-{unique}",
                                    "--port", str(free_port()), "--config-file", props,
                                    "--config", "sasl.password=not-the-password"), "gateway", "INVALID_CONFIG")
        assert "refused our credentials" in wrong, wrong
        plain = _error_line(_iqmesh("topic", "create", "t", "--bootstrap", bootstrap), "topic", "INVALID_CONFIG")
        assert "speaks TLS" in plain and "security.protocol=SSL" in plain, plain
    finally:
        kafka_broker.stop_broker(broker_dir)
