"""Messages that say what to do: a plaintext client against a TLS server is told it may be TLS, and
``iqmesh broker start`` on a port in use says to pick another --port."""

from __future__ import annotations

import socket
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from kernel.probe import Listener, listener_at, nothing_listens
from tests.integration.test_security import self_signed

pytestmark = pytest.mark.integration


def iqmesh(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "iqmesh", *args], capture_output=True, text=True, timeout=60)


def test_a_plaintext_client_against_a_tls_server_is_told_it_may_be_tls(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    server = grpc.server(futures.ThreadPoolExecutor(1))
    port = server.add_secure_port("127.0.0.1:0", grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())]))
    server.start()
    try:
        for cmd in (["get", "--store", "s", "--key", "k"], ["all", "--store", "s"], ["metadata"]):
            p = iqmesh(cmd[0], "--target", f"127.0.0.1:{port}", *cmd[1:], "--timeout", "5")
            assert p.returncode == 2, p.stderr
            line = [x for x in p.stderr.splitlines() if x.startswith("iqmesh ")]
            assert len(line) == 1 and "UNAVAILABLE" in line[0], p.stderr
            assert "It serves TLS and this client speaks plaintext" in line[0], p.stderr
            assert "--config iqmesh.tls.ca.file=PATH" in line[0], p.stderr
    finally:
        server.stop(0)


def test_a_tls_client_against_a_plaintext_server_is_told_it_is_plaintext(tmp_path: Path) -> None:
    cert, _ = self_signed(tmp_path)
    server = grpc.server(futures.ThreadPoolExecutor(1))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        p = iqmesh("get", "--target", f"127.0.0.1:{port}", "--store", "s", "--key", "k", "--timeout", "5",
                   "--config", f"iqmesh.tls.ca.file={cert}")
        assert p.returncode == 2, p.stderr
        line = [x for x in p.stderr.splitlines() if x.startswith("iqmesh ")]
        assert len(line) == 1 and "it does not serve TLS" in line[0], p.stderr
    finally:
        server.stop(0)


def test_the_probe_tells_nothing_plaintext_and_tls_apart(tmp_path: Path) -> None:
    """kernel.probe, against real gRPC servers on loopback and a port nobody listens at."""
    cert, key = self_signed(tmp_path)
    plain, secure = grpc.server(futures.ThreadPoolExecutor(1)), grpc.server(futures.ThreadPoolExecutor(1))
    plain_port = plain.add_insecure_port("127.0.0.1:0")
    credentials = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
    tls_port = secure.add_secure_port("127.0.0.1:0", credentials)
    plain.start()
    secure.start()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"127.0.0.1:{s.getsockname()[1]}"
    try:
        assert listener_at(closed) is Listener.NOTHING and nothing_listens([closed])
        assert listener_at(f"127.0.0.1:{plain_port}") is Listener.PLAINTEXT
        assert listener_at(f"127.0.0.1:{tls_port}") is Listener.TLS
        assert not nothing_listens([closed, f"127.0.0.1:{plain_port}"])
        assert listener_at("dns:///somewhere") is Listener.UNKNOWN and not nothing_listens([])
    finally:
        plain.stop(0)
        secure.stop(0)


def test_broker_start_on_a_port_in_use_says_pick_another_port(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        p = iqmesh("broker", "start", "--port", str(port), "--data-dir", str(tmp_path / "broker"))
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "BROKER_ERROR" in p.stderr, p.stderr
    assert "pick another --port" in p.stderr and "port=None" not in p.stderr
