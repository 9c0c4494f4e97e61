"""An instance whose advertised application.server reaches another server than its own (its
listen host differs, and another application holds that address) refuses to start: peers and
clients would route its keys there."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("application", ["another", "same"])
def test_an_advertised_endpoint_served_by_another_server_stops_the_start(
        bootstrap: str, tmp_path: Path, unique: str, application: str) -> None:
    cluster, _ = wordcount_cluster(bootstrap, tmp_path, unique, 1)
    cluster.start()
    try:
        holder = cluster.instances[0]
        wait_until(lambda: "serving queries on" in holder.log_path.read_text(), 120, "the first instance to serve",
                   cluster.logs)
        app_id = cluster.application_id if application == "same" else f"other-{unique}"
        p = subprocess.run([sys.executable, "-m", "iqmesh", "run", "examples/wordcount.py",
                            "--application-id", app_id, "--instance-id", f"late-{unique}",
                            "--bootstrap", bootstrap, "--grpc-port", str(holder.port),
                            "--state-dir", str(tmp_path / "late"), "--config", "iqmesh.listen.host=127.0.0.2"],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 2, p.stdout + p.stderr
        line = p.stderr.strip()
        assert "Traceback" not in line and len(line.splitlines()) == 1, p.stderr
        assert line.startswith("iqmesh run: error: INVALID_CONFIG: application.server "
                               f"127.0.0.1:{holder.port} is served by "), line
        assert "listening on 127.0.0.2" in line, line
        assert cluster.running() == [holder]  # the first instance goes on
    finally:
        cluster.stop()
