"""The liveness health service (``iqmesh.liveness``) that the StatefulSet's livenessProbe asks
(issue 18): SERVING while the instance runs, whatever its readiness; a hung (stopped) process does
not answer it, so a gRPC liveness probe fails where the former tcpSocket probe succeeded (the
kernel accepts connections for a stopped process)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from instance.server.servicer import LIVENESS
from iqmesh.health_probe import check
from kernel.security import Security
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration


def test_liveness_is_serving_while_running_and_silent_when_hung(bootstrap: str, tmp_path: Path,
                                                                 unique: str) -> None:
    cluster, _ = wordcount_cluster(bootstrap, tmp_path, unique, 1)
    cluster.start()
    try:
        cluster.wait_running(120)
        target = cluster.instances[0].target
        # answered while running: within a deadline a busy machine does not reach (the default 3 s
        # is the probe's; a slow answer is not what this test is about)
        assert check(target, Security(), service=LIVENESS, timeout=30.0) == "SERVING"
        cluster.signal(0, signal.SIGSTOP)
        try:
            cluster.wait_stopped(0)  # SIGSTOP is delivered, not waited for: a call sent at once may be answered
            assert check(target, Security(), service=LIVENESS, timeout=2.0) == "DEADLINE_EXCEEDED"
        finally:
            cluster.signal(0, signal.SIGCONT)
        wait_until(lambda: check(target, Security(), service=LIVENESS) == "SERVING", 60,
                   "liveness to answer again once the process continues", cluster.logs)
    finally:
        cluster.stop()
