"""Error messages clip what they echo (issue 9 point 13), librdkafka's lines come once per broker
(point 3), and the repository ignores what builds and runs leave behind (point 8)."""

from __future__ import annotations

import json
import logging
import subprocess
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from confluent_kafka import Producer

from instance.errors import UnknownStateStoreException
from instance.local.broker import free_port
from instance.server.status import to_status
from kernel.echo import ECHO_CHARS, MAX_MESSAGE_CHARS, clip, echo
from kernel.kafka_log import KAFKA_LOGGER, client_logging
from kernel.tokens import PositionToken

ROOT = Path(__file__).resolve().parents[2]


def test_echo_clips_long_input_and_says_how_long_it_was() -> None:
    assert echo("counts") == "'counts'"
    assert echo(b"\xff" * 10) == repr(b"\xff" * 10)
    shown = echo("s" * 1_000_000)
    assert shown.startswith("'" + "s" * ECHO_CHARS + "'...") and "(1000000 chars)" in shown
    assert "(5000 bytes)" in echo(b"k" * 5000)
    assert len(clip("m" * 10_000)) < MAX_MESSAGE_CHARS + 30


def test_grpc_details_are_clipped_whatever_echoed_them() -> None:
    status = to_status(UnknownStateStoreException("unknown store " + "s" * 1_000_000))
    assert status.code is grpc.StatusCode.NOT_FOUND and len(status.details) < MAX_MESSAGE_CHARS + 30
    with pytest.raises(ValueError) as e:
        PositionToken.decode("A" * 3_000_000)
    assert len(str(e.value)) < 300


def test_librdkafka_lines_come_once_per_broker_not_per_retry(caplog: pytest.LogCaptureFixture) -> None:
    """Three clients trying two dead brokers: one line per broker in all. The attempts are counted
    (librdkafka's statistics: connection attempts per broker) rather than hoped for within a few
    seconds, so on a busy machine they are waited for, not passed over."""
    caplog.set_level(logging.INFO, logger=KAFKA_LOGGER.name)
    dead = (f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}")  # nothing listens there
    attempts: dict[tuple[int, str], int] = {}

    def counted(i: int) -> Any:
        def on_stats(text: str) -> None:
            for b in json.loads(text)["brokers"].values():
                host = b["name"].split("/")[0]
                if host in dead:
                    attempts[i, host] = max(attempts.get((i, host), 0), int(b["connects"]))
        return on_stats
    producers = [Producer({"bootstrap.servers": ",".join(dead), "reconnect.backoff.ms": 10,
                           "reconnect.backoff.max.ms": 50, "statistics.interval.ms": 100,
                           "stats_cb": counted(i), **client_logging()}) for i in range(3)]
    deadline = time.monotonic() + 60
    # every client failed to connect to every broker (an idle client tries a bootstrap broker
    # once, then again only when it needs it: the lines of six failed attempts are compared)
    while not all(attempts.get((i, b), 0) >= 1 for i in range(3) for b in dead):
        assert time.monotonic() < deadline, f"not every client tried every broker in 60 s: {attempts}"
        for p in producers:
            p.poll(0.02)
    for p in producers:  # what the attempts logged is delivered by poll: one more round for it
        p.poll(0.1)
    lines = [r.getMessage() for r in caplog.records if r.name == KAFKA_LOGGER.name]
    for broker in dead:
        assert sum(f"Connect to ipv4#{broker} failed" in line for line in lines) == 1, lines


def test_build_and_run_output_is_ignored_and_not_tracked() -> None:
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    assert "egg-info" not in tracked
    # ".venv" without a slash also matches a worktree's .venv link
    assert ".venv" in (ROOT / ".gitignore").read_text().split()
    paths = [".iqmesh/broker/broker.log", "build/lib/x.py", "dist/x.whl",
             "iqmesh.egg-info/PKG-INFO", "router/__pycache__/x.pyc"]
    ignored = subprocess.run(["git", "check-ignore", "--no-index", *paths], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    assert ignored == paths
