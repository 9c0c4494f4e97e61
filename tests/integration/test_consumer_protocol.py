"""The consumer rebalance protocol (KIP-848, ``group.protocol=consumer``), issue 15 point 5.

On Apache Kafka a membership change moves only the tasks that change owner: the chaos scenarios
run with the protocol and must converge with nothing lost, exactly-once exact, no unflagged stale
answer. On the dev broker, which never assigns under that protocol, an instance refuses to start
with one line saying why (tests/conformance pins the broker's behaviour).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from instance.local.broker import free_port
from loadtest.chaos import run_scenario
from loadtest.chaos.report import describe, log_excerpt
from loadtest.chaos.result import AT_LEAST_ONCE, EXACTLY_ONCE_V2
from tests.conformance.test_broker import NO_CONSUMER_PROTOCOL, ON_DEV_BROKER

pytestmark = pytest.mark.integration

IQMESH = str(Path(sys.executable).parent / "iqmesh")
CONSUMER = ("group.protocol=consumer",)
CASES = [("scale-out-in", AT_LEAST_ONCE), ("clean-leave", EXACTLY_ONCE_V2)]


def _run_with_consumer_protocol(bootstrap: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IQMESH, "run", "examples.wordcount", "--application-id", "kip848", "--bootstrap",
                           bootstrap, "--grpc-port", str(free_port()), "--state-dir", str(tmp_path),
                           "--config", "group.protocol=consumer"], capture_output=True, text=True, timeout=90)


@pytest.mark.skipif(not ON_DEV_BROKER, reason="Apache Kafka implements the protocol: the chaos cases run instead")
def test_the_dev_broker_refuses_the_consumer_protocol_in_one_line(bootstrap: str, tmp_path: Path) -> None:
    done = _run_with_consumer_protocol(bootstrap, tmp_path)
    assert done.returncode == 2, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("iqmesh run: error: INVALID_CONFIG: group.protocol=consumer "
                                                   "needs Apache Kafka"), done.stderr


@pytest.mark.skipif(ON_DEV_BROKER or not NO_CONSUMER_PROTOCOL,
                    reason="for an Apache Kafka whose coordinator leaves the consumer protocol off (3.9)")
def test_a_kafka_with_the_consumer_protocol_off_refuses_it_in_one_line(bootstrap: str, tmp_path: Path) -> None:
    """Apache Kafka 3.9 offers ConsumerGroupHeartbeat but leaves the protocol off
    (``group.coordinator.rebalance.protocols=classic``): an instance would wait for ever for an
    assignment, so it refuses to start, naming the setting."""
    done = _run_with_consumer_protocol(bootstrap, tmp_path)
    assert done.returncode == 2, done
    assert done.stderr.strip().splitlines() == [
        "iqmesh run: error: INVALID_CONFIG: group.protocol=consumer needs Apache Kafka 4.0 or later: this broker's "
        "group.coordinator.rebalance.protocols is classic, so it would never assign partitions; use "
        "group.protocol=classic"], done.stderr


@pytest.mark.skipif(ON_DEV_BROKER, reason="the dev broker never assigns under the consumer protocol (refused at start)")
@pytest.mark.skipif(bool(NO_CONSUMER_PROTOCOL), reason=NO_CONSUMER_PROTOCOL)
@pytest.mark.parametrize(("scenario", "guarantee"), CASES, ids=[f"{s}-{g}" for s, g in CASES])
def test_membership_changes_under_the_consumer_protocol(bootstrap: str, tmp_path: Path, scenario: str,
                                                        guarantee: str) -> None:
    # settle_timeout: the deadline of the wait for convergence after the input ends (the
    # scenarios' default; a busy machine running two suites can take longer than 40 s)
    r = run_scenario(scenario, bootstrap, tmp_path, 1, guarantee, lines_per_s=400, seconds=8.0,
                     settle_timeout=90.0, extra_config=CONSUMER)
    print("\n" + describe(r))
    why = f"\n{describe(r)}\n{log_excerpt(tmp_path)}"
    assert r.converged and r.unreadable_words == 0, f"did not converge{why}"
    assert r.lost == 0, f"records lost{why}"
    if r.exact:
        assert r.double_counted == 0, f"records double-counted{why}"
    assert r.stale_unflagged == 0, f"unflagged stale answers{why}"
