"""``group.protocol=streams`` (KIP-1071) is refused at start-up in one line, exit status 2, no
traceback (issue 28 point 5), on a broker without StreamsGroupHeartbeat (the dev broker, Kafka before
4.2), naming the release needed. Never a silent fall-back to the classic protocol. On a broker with
it (Apache Kafka 4.4) the instance runs as a streams group member: tests/integration/test_streams_protocol.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from instance.local.broker import free_port
from tests.conformance.test_broker import NO_STREAMS_PROTOCOL

pytestmark = pytest.mark.integration

IQMESH = str(Path(sys.executable).parent / "iqmesh")


def _run_with_streams_protocol(bootstrap: str, state_dir: Path, unique: str,
                               *config: str) -> subprocess.CompletedProcess[str]:
    settings = [a for c in ("group.protocol=streams", *config) for a in ("--config", c)]
    return subprocess.run([IQMESH, "run", "examples.wordcount", "--application-id", f"kip1071-{unique}",
                           "--bootstrap", bootstrap, "--grpc-port", str(free_port()), "--state-dir", str(state_dir),
                           *settings], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(not NO_STREAMS_PROTOCOL, reason="this broker offers the protocol: the other refusal applies")
def test_a_broker_without_the_protocol_refuses_it_naming_the_release(bootstrap: str, tmp_path: Path,
                                                                     unique: str) -> None:
    done = _run_with_streams_protocol(bootstrap, tmp_path, unique)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert lines == ["iqmesh run: error: INVALID_CONFIG: group.protocol=streams needs Apache Kafka 4.2 or later: "
                     "this broker does not offer StreamsGroupHeartbeat; use group.protocol=classic"], done.stderr
    assert "serving queries" not in done.stdout


@pytest.mark.skipif(bool(NO_STREAMS_PROTOCOL), reason="no streams protocol here: the refusal above applies")
def test_the_dev_brokers_membership_workarounds_forced_on_are_refused(bootstrap: str, tmp_path: Path,
                                                                      unique: str) -> None:
    """They pause every member around classic rebalances, which never come under this protocol."""
    done = _run_with_streams_protocol(bootstrap, tmp_path, unique, "iqmesh.membership.assist=true")
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        "iqmesh run: error: INVALID_CONFIG: iqmesh.membership.assist=true works around the dev broker's classic "
        "rebalances; with group.protocol=streams set it to auto or false"], done.stderr
