"""`iqmesh topic create/list`, `iqmesh produce` and `iqmesh consume` on the session's broker (issue 16
point 5): keys and values parsed and written with the serdes named, read back decoded, and every
mistake one error line with exit status 2 (the installed script runs as a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_cli import _one_error_line

pytestmark = pytest.mark.integration

IQMESH = str(Path(sys.executable).parent / "iqmesh")


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IQMESH, *args], input=stdin, capture_output=True, text=True, timeout=90)


def _json_lines(done: subprocess.CompletedProcess[str]) -> list[Any]:
    assert done.returncode == 0, done
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.timeout(180)
def test_topics_produce_and_consume_with_serdes(bootstrap: str, unique: str, tmp_path: Path) -> None:
    b = ("--bootstrap", bootstrap)
    topic, jtopic = f"kv-{unique}", f"json-{unique}"
    assert _json_lines(_run("topic", "create", topic, "--partitions", "2", *b)) == [
        {"topic": topic, "partitions": 2, "created": True}]
    assert _json_lines(_run("topic", "create", topic, "--if-not-exists", *b))[0]["created"] is False
    _one_error_line(_run("topic", "create", topic, *b), "topic", "TOPIC_ALREADY_EXISTS")
    listed = {t["topic"]: t["partitions"] for t in _json_lines(_run("topic", "list", *b))}
    assert listed[topic] == 2 and not any(t.startswith("__") for t in listed)

    # key:value lines from a file (the value may hold the separator), long values; blank lines skipped
    data = tmp_path / "in.txt"
    data.write_text("alpha:1\n\nbeta:-2\ngamma:9223372036854775807\n")
    assert _json_lines(_run("produce", "--topic", topic, "--file", str(data), "--key-separator", ":",
                            "--value-serializer", "long", *b)) == [{"topic": topic, "records": 3}]
    got = _json_lines(_run("consume", "--topic", topic, "--from-beginning", "--value-deserializer", "long",
                           "--max-messages", "3", "--timeout", "30", *b))
    assert sorted((r["key"], r["value"]) for r in got) == [("alpha", 1), ("beta", -2),
                                                          ("gamma", 9223372036854775807)]
    assert all({"partition", "offset", "timestamp_ms"} <= r.keys() for r in got)
    # the same key goes to the same partition (murmur2, as Java clients and the instances place keys)
    _run("produce", "--topic", topic, "--key-separator", ":", "--value-serializer", "long", *b, stdin="alpha:5\n")
    again = _json_lines(_run("consume", "--topic", topic, "--from-beginning", "--value-deserializer", "long",
                             "--max-messages", "4", "--timeout", "30", *b))
    alpha = {r["partition"] for r in again if r["key"] == "alpha"}
    assert len(alpha) == 1, again

    # stdin, null keys, json values; --timeout ends a consume that has read everything
    _run("topic", "create", jtopic, *b)
    assert _json_lines(_run("produce", "--topic", jtopic, "--value-serializer", "json", *b,
                            stdin='{"a": 1}\n[1, 2]\n'))[0]["records"] == 2
    # (--timeout counts from the start too: long enough for the first fetch on a busy machine)
    got = _json_lines(_run("consume", "--topic", jtopic, "--from-beginning", "--value-deserializer", "json",
                           "--timeout", "15", *b))
    assert sorted(json.dumps(r["value"]) for r in got) == ['[1, 2]', '{"a": 1}'] and all(r["key"] is None for r in got)

    # mistakes: one line each, naming what to change
    line = _one_error_line(_run("produce", "--topic", topic, "--key-separator", ":", *b, stdin="ok:1\nno-sep\n"),
                           "produce", "INVALID_INPUT")
    assert "line 2" in line and "':'" in line
    line = _one_error_line(_run("produce", "--topic", topic, "--key-separator", ":", "--value-serializer", "long",
                                *b, stdin="k:twelve\n"), "produce", "INVALID_INPUT")
    assert "'twelve' is not a long" in line
    line = _one_error_line(_run("consume", "--topic", jtopic, "--from-beginning", "--value-deserializer", "long",
                                "--timeout", "10", *b), "consume", "DESERIALIZATION_ERROR")
    assert "--value-deserializer" in line
    missing = f"missing-{unique}"
    for cmd in (("consume", "--topic", missing, "--timeout", "5"), ("produce", "--topic", missing)):
        line = _one_error_line(_run(*cmd, *b, stdin=""), cmd[0], "UNKNOWN_TOPIC")
        assert f"iqmesh topic create {missing}" in line
    assert missing not in {t["topic"] for t in _json_lines(_run("topic", "list", *b))}  # not auto-created
    _one_error_line(_run("topic", "list", "--bootstrap", "127.0.0.1:1"), "topic", "BROKER_UNREACHABLE")
