"""The README's first command, ``iqmesh demo``, as a new user meets it (issue 9, points 1 and 2): the
installed ``iqmesh`` script with its directory not on PATH; the first run starts the dev broker and
leaves it running, its printed commands are pasted into a shell and must work, and a second run on
the same broker must converge too (it once counted the first run's text as well and never did)."""

from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from instance.local.broker import free_port

pytestmark = pytest.mark.integration

IQMESH = Path(sys.executable).parent / "iqmesh"


def _env_without_venv_on_path() -> dict[str, str]:
    """A new user's shell after the README's install: the venv's bin is not on PATH."""
    venv_bins = {os.path.realpath(IQMESH.parent), os.path.realpath(Path(sys.prefix) / "bin")}
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and os.path.realpath(d) not in venv_bins]
    return {**os.environ, "PATH": os.pathsep.join(path), "PYTHONUNBUFFERED": "1"}


def _lines_until(proc: subprocess.Popen[str], last: str, timeout: float) -> list[str]:
    """The process's output lines up to and including the first that starts with ``last``."""
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            raise AssertionError(f"no line starting with {last!r} within {timeout}s:\n" + "\n".join(seen)) from None
        if line is None:
            raise AssertionError(f"the demo ended (code {proc.wait()}) before {last!r}:\n" + "\n".join(seen))
        seen.append(line)
        if line.startswith(last):
            return seen


@pytest.mark.timeout(480)
def test_demo_twice_on_one_broker_with_commands_that_work_when_pasted(tmp_path: Path) -> None:
    assert IQMESH.is_file(), f"the installed script {IQMESH} (pip install -e .)"
    env = _env_without_venv_on_path()
    data_dir = tmp_path / "demo"
    port = free_port()
    first = subprocess.Popen([str(IQMESH), "demo", "--data-dir", str(data_dir), "--lines", "300",
                              "--feed-rate", "0", "--gateway-port", str(port)],
                             cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out = _lines_until(first, "Logs:", 300)
        text = "\n".join(out)
        assert "Starting the dev broker" in text and "all counts verified" in text, text
        waiting = [line for line in out if line.startswith(("Starting 3", "Waiting until"))]
        assert len(waiting) == 2, f"the demo must say what it waits for:\n{text}"
        assert f"Dashboard: http://127.0.0.1:{port}/" in text
        kafka = int(re.search(r"count of 'kafka' = (\d+)", text).group(1))  # type: ignore[union-attr]
        commands = [line.strip() for line in out if re.match(r"\s+\S*iqmesh\S* (get|metadata) ", line)]
        assert len(commands) == 4, text
        assert not commands[0].startswith("iqmesh "), "iqmesh is not on PATH: the printed command must say where"
        for command in commands:
            done = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=60)
            assert done.returncode == 0, f"{command}\n{done.stdout}{done.stderr}"
            answer = json.loads(done.stdout)
            if " get " in command:
                assert answer["value"] == kafka and answer["metadata"]["position"] > 0
            else:
                assert len(answer["instances"]) == 3
        first.send_signal(signal.SIGTERM)
        assert first.wait(120) == 0
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(30)

    # the broker still runs, holding the first run's topics: a second demo must work all the same
    second = subprocess.run([str(IQMESH), "demo", "--exit-when-ready", "--data-dir", str(data_dir), "--lines", "200",
                             "--gateway-port", str(free_port())],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    try:
        out2 = second.stdout + second.stderr
        assert second.returncode == 0, out2
        assert "Using the running dev broker" in out2 and "all counts verified" in out2, out2
        status = subprocess.run([str(IQMESH), "broker", "status", "--data-dir", str(data_dir / "broker")],
                                env=env, capture_output=True, text=True, timeout=30)
        assert status.returncode == 0, "the demo stopped a broker it had not started"
    finally:
        subprocess.run([str(IQMESH), "broker", "stop", "--data-dir", str(data_dir / "broker")], env=env,
                       capture_output=True, timeout=60)
