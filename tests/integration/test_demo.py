"""The README's first command, ``iqmesh demo``, in its self-checking form: dev broker, three
word-count instances, sample text, every count verified, then the REST gateway answering."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from devtools.broker import free_port

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
def test_demo_runs_the_cluster_and_the_gateway(tmp_path: Path) -> None:
    port = free_port()
    done = subprocess.run([sys.executable, "-m", "instance.cli", "demo", "--exit-when-ready",
                           "--data-dir", str(tmp_path / "demo"), "--gateway-port", str(port), "--lines", "500"],
                          capture_output=True, text=True, timeout=280)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "all counts verified" in out
    assert f"Dashboard: http://127.0.0.1:{port}/" in out
