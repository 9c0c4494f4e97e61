"""The health port of a real instance (``iqmesh.health.port``, what the manifests' probes ask) while
its query port serves TLS only and requires a token: plain HTTP, no token; /startupz and /readyz
503 while the instance is starting (its restore held), 200 once it runs; /livez 200 throughout,
no answer from a hung (stopped) process; nothing listening once it has stopped."""

from __future__ import annotations

import os
import shutil
import signal
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest

from instance.local.broker import free_port
from instance.local.cluster import LocalCluster, produce, sample_lines
from instance.runtime.holds import Hold
from kernel.instance_state import State
from kernel.wire_enums import state_of
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster
from tests.integration.test_security import self_signed

pytestmark = pytest.mark.integration

TOKEN = "health-port-token"
PROBES = ("/startupz", "/readyz", "/livez")
WAIT_S = 120


def probe(port: int, path: str, timeout: float = 30.0) -> tuple[int, str]:
    """Status and body; 0 and the reason when nothing answers (refused, or no answer in time)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
            return r.status, r.read().decode().strip()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode().strip()
    except (urllib.error.URLError, OSError) as e:
        reason = e.reason if isinstance(e, urllib.error.URLError) else e
        return 0, type(reason).__name__


def probes(port: int) -> dict[str, tuple[int, str]]:
    return {p: probe(port, p) for p in PROBES}


def own(cluster: LocalCluster) -> Any:
    """The instance as its own Metadata reply describes it, over TLS with the token (None: no answer)."""
    inst = cluster.instances[0]
    try:
        with QueryClient(inst.target, timeout=5, security=cluster.client_security) as q:
            md = q.metadata()
    except grpc.RpcError:
        return None
    return next((i for i in md.instances if i.instance_id == md.asked), None)


@pytest.mark.timeout(600)
def test_the_health_port_follows_a_starting_running_and_stopped_instance(bootstrap: str, tmp_path: Path,
                                                                         unique: str) -> None:
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but openssl is not installed (.ci/run installs it)")
        pytest.skip("openssl is not installed (it makes the query port's certificate; apt-get install openssl)")
    cert, key = self_signed(tmp_path)
    port = free_port()
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 1, "commit.interval.ms=200",
                                       f"iqmesh.tls.cert.file={cert}", f"iqmesh.tls.key.file={key}",
                                       f"iqmesh.tls.ca.file={cert}", f"iqmesh.auth.token={TOKEN}",
                                       f"iqmesh.health.port={port}", partitions=2)
    lines = sample_lines(300, seed=11)
    truth = dict(word_counts(lines))
    cluster.start()
    try:
        # running: every probe passes, over plain HTTP while the query port speaks TLS only
        cluster.wait_running(WAIT_S)
        assert probes(port) == {p: (200, "SERVING") for p in PROBES}
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))

        def counted() -> bool:
            with QueryClient(cluster.instances[0].target, timeout=5, security=cluster.client_security) as q:
                try:
                    return all(q.get("counts", w).value == n for w, n in truth.items())
                except grpc.RpcError:
                    return False
        wait_until(counted, WAIT_S, "every count", cluster.logs)

        # hung: the kernel still accepts the connection, but nothing answers (a liveness failure)
        cluster.signal(0, signal.SIGSTOP)
        try:
            cluster.wait_stopped(0)  # SIGSTOP is delivered, not waited for: a probe sent at once may be answered
            assert probe(port, "/livez", timeout=2.0) == (0, "TimeoutError")
        finally:
            cluster.signal(0, signal.SIGCONT)
        wait_until(lambda: probe(port, "/livez") == (200, "SERVING"), WAIT_S, "/livez once the process continues",
                   cluster.logs)

        # stopped: a clean leave (its changelogs flushed), then nothing listens
        cluster.signal(0, signal.SIGTERM)
        assert cluster.wait_exit(0, WAIT_S) == 0, cluster.logs()
        assert probes(port) == {p: (0, "ConnectionRefusedError") for p in PROBES}

        # starting: a fresh state directory restores from the changelog, held mid-restore
        shutil.rmtree(cluster.instances[0].state_dir)
        cluster.hold(Hold.RESTORE)
        cluster.start()

        def restoring() -> bool:
            me = own(cluster)
            return me is not None and bool(me.restoring_tasks) and state_of(me.state) is not State.RUNNING
        wait_until(restoring, WAIT_S, "the restarted instance to be restoring", cluster.logs)
        assert probes(port) == {"/startupz": (503, "NOT_SERVING"), "/readyz": (503, "NOT_SERVING"),
                                "/livez": (200, "SERVING")}
        cluster.release(Hold.RESTORE)
        wait_until(lambda: probe(port, "/readyz") == (200, "SERVING"), WAIT_S, "/readyz once restored", cluster.logs)
        assert probes(port) == {p: (200, "SERVING") for p in PROBES}
        assert counted()
    finally:
        cluster.release(Hold.RESTORE)
        cluster.stop()
    assert probe(port, "/livez") == (0, "ConnectionRefusedError")

