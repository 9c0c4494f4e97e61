"""The ``iqmesh`` command as a user meets it, without a cluster or broker (issue 9, points 3, 4 and 6): help
that explains every flag, and one error line, exit status 2, for every kind of failure. The
installed script runs as a subprocess."""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from instance.local.broker import free_port
from iqmesh.main import parser

pytestmark = pytest.mark.integration

IQMESH = str(Path(sys.executable).parent / "iqmesh")
ERROR_LINE = re.compile(r"^iqmesh [a-z]+: error: [A-Z_]+: \S.*$")


def _iqmesh(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([IQMESH, *args], capture_output=True, text=True, timeout=timeout)


def _one_error_line(done: subprocess.CompletedProcess[str], command: str, code: str) -> str:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and ERROR_LINE.match(lines[0]), done.stderr
    assert lines[0].startswith(f"iqmesh {command}: error: {code}: "), lines[0]
    return lines[0]


def _commands(ap: argparse.ArgumentParser, prefix: str = "iqmesh") -> dict[str, argparse.ArgumentParser]:
    out = {prefix: ap}
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.update(_commands(sub, f"{prefix} {name}"))
    return out


def test_every_flag_says_what_it_is_and_its_default() -> None:
    for command, ap in _commands(parser()).items():
        for action in ap._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS or action.dest == "help":
                continue
            flag = f"{command} {action.option_strings[0]}"
            assert action.help and len(action.help.split()) >= 3, f"{flag} has no help"
            if not (action.default is None or action.default is False or action.default == []):
                formatted = ap._get_formatter()._get_help_string(action)  # type: ignore[attr-defined]
                assert "default" in formatted, f"{flag} does not give its default {action.default!r}"


def test_help_has_no_markup_and_each_broker_action_its_own() -> None:
    top = _iqmesh("--help")
    assert top.returncode == 0 and "``" not in top.stdout and "iqmesh demo" in top.stdout
    start = _iqmesh("broker", "start", "--help")
    assert start.returncode == 0
    assert "start the broker" in start.stdout and "--port" in start.stdout and "--engine" in start.stdout
    assert "(default: .iqmesh/broker)" in " ".join(start.stdout.split())
    stop = _iqmesh("broker", "stop", "--help")
    assert "--port" not in stop.stdout and "--engine" not in stop.stdout and "stop the broker" in stop.stdout
    get = " ".join(_iqmesh("get", "--help").stdout.split())
    for flag in ("--store STORE name of the state store", "--max-lag MAX_LAG", "(default: 10.0)", "(default: -1)"):
        assert flag in get, get


def test_a_dead_target_is_one_error_line_for_every_query_command() -> None:
    target = f"127.0.0.1:{free_port()}"
    lines = [_one_error_line(_iqmesh(cmd, "--target", target, *args, "--timeout", "2"), cmd, "UNAVAILABLE")
             for cmd, args in (("metadata", ()), ("get", ("--store", "counts", "--key", "k")),
                               ("all", ("--store", "counts")))]
    for line in lines:
        assert f"no answer from {target}" in line and "is an instance serving queries there?" in line


def test_configuration_and_usage_errors_are_the_same_line() -> None:
    _one_error_line(_iqmesh("run", "no/such/app.py", "--application-id", "a", "--bootstrap", "127.0.0.1:9",
                            "--grpc-port", "1"), "run", "INVALID_CONFIG")
    _one_error_line(_iqmesh("run", "examples.wordcount", "--application-id", "a", "--bootstrap", "127.0.0.1:9"),
                    "run", "INVALID_CONFIG")
    usage = _iqmesh("get", "--store", "counts")  # argparse's own error: same prefix, same status
    assert usage.returncode == 2 and usage.stderr.strip().splitlines()[-1].startswith("iqmesh get: error: ")


@pytest.mark.timeout(90)
def test_a_broker_that_is_not_there_is_one_line_naming_it(tmp_path: Path) -> None:
    """Issue 9 point 3: 194 librdkafka lines and a traceback before; one line, exit status 2 now."""
    done = _iqmesh("run", "examples.wordcount", "--application-id", "nobroker", "--bootstrap", "127.0.0.1:1",
                   "--grpc-port", str(free_port()), "--state-dir", str(tmp_path), timeout=60)
    line = _one_error_line(done, "run", "BROKER_UNREACHABLE")
    assert "127.0.0.1:1" in line and "iqmesh broker start" in line
    assert "rdkafka" not in done.stdout + done.stderr


@pytest.mark.parametrize("missing", ["mvn", "java"])
def test_apache_kafka_without_java_or_maven_is_one_line(tmp_path: Path, missing: str) -> None:
    """A fresh cache and a PATH that lacks ``missing``: one line that says what to install, exit 2."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("java", "mvn", "openssl"):
        found = shutil.which(tool)
        if tool != missing and found:
            (bin_dir / tool).symlink_to(found)
    done = subprocess.run([IQMESH, "broker", "start", "--engine", "kafka", "--data-dir", str(tmp_path / "k")],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": str(bin_dir), "IQMESH_CACHE": str(tmp_path / "cache")})
    line = _one_error_line(done, "broker", "BROKER_ERROR")
    assert f"{missing} was not found on PATH" in line and "apt-get install" in line, line


def _grpc_server_on_a_port() -> tuple[grpc.Server, int]:
    """A gRPC server with gRPC's default options (SO_REUSEPORT on Linux), as another application's
    instance or an older iqmesh would hold a port."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


@pytest.mark.timeout(90)
def test_a_query_port_in_use_stops_the_start(tmp_path: Path) -> None:
    """Issue 16 point 1: `iqmesh run` shared a port with another gRPC server (gRPC's SO_REUSEPORT)
    and said it served queries; the gateway printed its URL before failing on a port in use."""
    server, port = _grpc_server_on_a_port()
    try:
        done = _iqmesh("run", "examples.wordcount", "--application-id", "dup", "--bootstrap", "127.0.0.1:1",
                       "--grpc-port", str(port), "--state-dir", str(tmp_path), timeout=60)
        line = _one_error_line(done, "run", "PORT_IN_USE")
        assert f"127.0.0.1:{port}" in line and "serving queries" not in done.stdout, done
        gateway = _iqmesh("gateway", "--seeds", "127.0.0.1:1", "--port", str(port), timeout=60)
        line = _one_error_line(gateway, "gateway", "PORT_IN_USE")
        assert f"127.0.0.1:{port}" in line and "iqmesh gateway on" not in gateway.stdout, gateway
    finally:
        server.stop(None)


#: the deadlines the commands below are given: far above a command's start on a busy machine, so
#: ending before one of them is told apart from waiting for it
LONG_S = 60


@pytest.mark.timeout(600)
def test_watch_and_get_of_a_refused_port_fail_fast() -> None:
    """Issue 16 point 4: `watch` of a dead target printed nothing and never exited (with --duration:
    exit 0 and an empty end); `get` retried a refused connection for its whole --timeout.

    Each command must end before a deadline it was given: the shorter of the watch's two ends it
    (--timeout, the time to find an instance that starts it, or --duration), and a get does not
    wait for its --timeout at all. The other deadline is LONG_S, far above the seconds the
    command takes to start on a busy machine, so ending before it is no race with the machine."""
    target = f"127.0.0.1:{free_port()}"
    for extra in (("--timeout", "2"), ("--timeout", str(LONG_S), "--duration", "3")):
        start = time.monotonic()
        done = _iqmesh("watch", "--target", target, "--store", "counts", "--key", "k", *extra, timeout=3 * LONG_S)
        elapsed = time.monotonic() - start
        line = _one_error_line(done, "watch", "UNAVAILABLE")
        assert f"no answer from {target}" in line and done.stdout == "", done
        # ended by its short deadline (with --duration 3: not by its --timeout of LONG_S)
        assert elapsed < LONG_S, f"watch {extra} took {elapsed:.1f}s"
    start = time.monotonic()
    _one_error_line(_iqmesh("get", "--target", target, "--store", "counts", "--key", "k", "--timeout", str(LONG_S),
                            timeout=3 * LONG_S), "get", "UNAVAILABLE")
    assert time.monotonic() - start < LONG_S, "get waited for its timeout on a refused connection"
