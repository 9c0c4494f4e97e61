"""Mistakes the README promises as one error line and exit status 2 (no traceback): an application
that raises while it loads, a state.dir that cannot hold stores (checked before the instance joins
its group), negative counts and timeouts."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from instance.local.broker import free_port


def iqmesh(*args: str) -> tuple[int, str]:
    p = subprocess.run([sys.executable, "-m", "iqmesh", *args], capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr


def one_line(rc: int, err: str, command: str, *expected: str) -> None:
    assert rc == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith(f"iqmesh {command}: error: INVALID_CONFIG: "), err
    for e in expected:
        assert e in err, err


@pytest.mark.parametrize("source,expected", [
    ("raise RuntimeError('no config here')\n", ["importing it raised RuntimeError: no config here", "app.py:1"]),
    ("def build(:\n", ["importing it raised SyntaxError", "app.py:1"]),
    ("import no_such_module_iqmesh\n", ["ModuleNotFoundError", "no_such_module_iqmesh"]),
    ("def build():\n    return {}['x']\n", ["its build() raised KeyError", "app.py:2"]),
])
def test_an_application_that_raises_while_loading(tmp_path: Path, source: str, expected: list[str]) -> None:
    app = tmp_path / "app.py"
    app.write_text(source)
    for cmd in (["run", str(app), "--application-id", "a", "--bootstrap", f"127.0.0.1:{free_port()}",
                 "--grpc-port", str(free_port()), "--state-dir", str(tmp_path / "state")], ["describe", str(app)]):
        one_line(*iqmesh(*cmd), cmd[0], *expected)


@pytest.mark.parametrize("state_dir,expected", [
    ("file", "is a file, not a directory"),
    ("file/below", "cannot be written"),
    ("/proc/iqmesh-state", "cannot be written"),  # a filesystem that takes no new directories
])
def test_a_state_dir_that_cannot_hold_stores_stops_before_joining(tmp_path: Path, state_dir: str,
                                                                  expected: str) -> None:
    (tmp_path / "file").write_text("not a directory")
    where = state_dir if state_dir.startswith("/") else str(tmp_path / state_dir)
    # the bootstrap is dead: an instance that got as far as joining would report BROKER_UNREACHABLE
    rc, err = iqmesh("run", "examples/wordcount.py", "--application-id", "a", "--bootstrap",
                     f"127.0.0.1:{free_port()}", "--grpc-port", str(free_port()), "--state-dir", where)
    one_line(rc, err, "run", expected, where)


@pytest.mark.parametrize("command,flags,expected", [
    ("range", ["--limit", "-3"], "--limit must be 0 or more, got -3"),
    ("all", ["--page-size", "-1"], "--page-size must be 0 or more, got -1"),
    ("prefix", ["--prefix", "a", "--limit", "-1"], "--limit must be 0 or more"),
    ("get", ["--key", "a", "--timeout", "-1"], "--timeout must be more than 0 seconds"),
    ("all", ["--timeout", "0"], "--timeout must be more than 0 seconds"),
    ("watch", ["--all", "--timeout", "-1"], "--timeout must be more than 0 seconds"),
    ("watch", ["--all", "--duration", "-2"], "--duration must be more than 0 seconds"),
    ("watch", ["--all", "--limit", "0"], "--limit must be 1 or more (leave it out to watch until Ctrl-C), got 0"),
    ("metadata", ["--timeout", "-1"], "--timeout must be more than 0 seconds"),
])
def test_negative_counts_and_timeouts_are_refused(command: str, flags: list[str], expected: str) -> None:
    store = [] if command == "metadata" else ["--store", "counts"]
    rc, err = iqmesh(command, "--target", f"127.0.0.1:{free_port()}", *store, *flags)
    one_line(rc, err, command, expected)


def test_gateway_refuses_a_negative_timeout() -> None:
    one_line(*iqmesh("gateway", "--seeds", "127.0.0.1:1", "--port", str(free_port()), "--timeout", "-1"),
             "gateway", "--timeout must be more than 0 seconds")
