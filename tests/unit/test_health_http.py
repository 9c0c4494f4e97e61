"""The instance's plain-HTTP health port (instance/server/health_http.py), against a real gRPC health
servicer and real sockets: each path answers what the gRPC health service says, with the rule
``iqmesh.health_probe`` applies to the same service over gRPC; malformed probes get a status,
not a hang; a probe that sends nothing does not hold the others up; ``iqmesh.health.port`` is
validated like every port (one line naming it, exit 2)."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from instance.config import StreamsConfig
from instance.errors import ConfigException
from instance.local.broker import free_port
from instance.server.health_http import HealthServer
from instance.server.servicer import LIVENESS
from iqmesh.health_probe import main as probe_main
from kernel.ports import PortInUseError
from tests.unit.test_cli_one_line_errors import iqmesh, one_line

SERVING, NOT_SERVING = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING


@pytest.fixture
def servers() -> Iterator[tuple[health.HealthServicer, int, int]]:
    """One health servicer published twice: over gRPC (what health_probe asks) and on the health
    port. Returns the servicer, the gRPC port and the health port."""
    servicer = health.HealthServicer()
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    health_pb2_grpc.add_HealthServicer_to_server(servicer, grpc_server)
    grpc_port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    http = HealthServer(servicer, "127.0.0.1", 0).start()
    try:
        yield servicer, grpc_port, http.port
    finally:
        http.stop()
        grpc_server.stop(0).wait()


def get(port: int, path: str, method: str = "GET") -> tuple[int, str]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def raw(port: int, request: bytes) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        s.sendall(request)
        return s.makefile("rb").readline().decode().strip()


@pytest.mark.parametrize("ready,live", [(False, True), (True, True), (False, False), (True, False)])
def test_each_path_answers_what_health_probe_decides(servers: tuple[health.HealthServicer, int, int],
                                                     ready: bool, live: bool,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    servicer, grpc_port, http_port = servers
    servicer.set("", SERVING if ready else NOT_SERVING)
    servicer.set(LIVENESS, SERVING if live else NOT_SERVING)
    for path, probe, passing in (("/startupz", "startup", ready), ("/readyz", "readiness", ready),
                                 ("/livez", "liveness", live)):
        status, body = get(http_port, path)
        assert (status, body) == ((200, "SERVING\n") if passing else (503, "NOT_SERVING\n")), path
        # the CLI, over gRPC, on the same service: the same verdict and the same word
        rc = probe_main(["--target", f"127.0.0.1:{grpc_port}", "--probe", probe, "--timeout", "30"])
        assert rc == (0 if passing else 1) and capsys.readouterr().out.strip() == body.strip(), path


def test_a_server_shutting_down_is_not_ready_nor_live(servers: tuple[health.HealthServicer, int, int]) -> None:
    servicer, _, http_port = servers
    servicer.set("", SERVING)
    servicer.set(LIVENESS, SERVING)
    assert get(http_port, "/readyz")[0] == 200
    servicer.enter_graceful_shutdown()  # what QueryServer.stop does first
    assert [get(http_port, p)[0] for p in ("/startupz", "/readyz", "/livez")] == [503, 503, 503]


def test_other_requests_get_a_status(servers: tuple[health.HealthServicer, int, int]) -> None:
    servicer, _, port = servers
    # a service the servicer does not know fails as a gRPC check of it would
    assert get(port, "/livez") == (503, "NOT_FOUND\n")
    servicer.set(LIVENESS, SERVING)
    status, body = get(port, "/metrics")
    assert status == 404 and "/startupz, /readyz, /livez" in body
    assert get(port, "/livez", method="POST")[0] == 405
    assert get(port, "/livez?verbose=1")[0] == 200  # the kubelet's query strings do not matter
    assert raw(port, b"HEAD /livez HTTP/1.1\r\nHost: x\r\n\r\n") == "HTTP/1.1 200 OK"
    assert raw(port, b"nonsense\r\n\r\n") == "HTTP/1.1 400 Bad Request"
    assert raw(port, b"GET /" + b"x" * 10_000 + b" HTTP/1.1\r\n\r\n") == "HTTP/1.1 400 Bad Request"


def test_a_silent_connection_does_not_hold_up_the_probes(servers: tuple[health.HealthServicer, int, int]) -> None:
    servicer, _, port = servers
    servicer.set(LIVENESS, SERVING)
    with socket.create_connection(("127.0.0.1", port), timeout=30) as idle:
        idle.sendall(b"GET /livez HTTP/1.1\r\n")  # and never the end of its headers
        assert get(port, "/livez")[0] == 200


def test_a_port_in_use_is_refused_before_anything_listens() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        with pytest.raises(PortInUseError, match=f"127.0.0.1:{taken.getsockname()[1]}"):
            HealthServer(health.HealthServicer(), "127.0.0.1", taken.getsockname()[1])


BASE = {"application.id": "a", "bootstrap.servers": "127.0.0.1:9092", "application.server": "127.0.0.1:50051"}


def test_the_setting_is_typed_off_by_default_and_must_be_a_port_of_its_own() -> None:
    assert StreamsConfig.from_properties(BASE).health_port == 0
    assert StreamsConfig.from_properties({**BASE, "iqmesh.health.port": "8081"}).health_port == 8081
    for value, expected in (("70000", "iqmesh.health.port must be from 0 to 65535, got 70000"),
                            ("-1", "iqmesh.health.port must be from 0 to 65535, got -1"),
                            ("50051", "iqmesh.health.port must differ from application.server's port"),
                            ("http", "invalid value for iqmesh.health.port")):
        with pytest.raises(ConfigException, match=expected):
            StreamsConfig.from_properties({**BASE, "iqmesh.health.port": value})
    with pytest.raises(ConfigException, match="iqmesh.health.port must differ from iqmesh.metrics.port"):
        StreamsConfig.from_properties({**BASE, "iqmesh.health.port": "9000", "iqmesh.metrics.port": "9000"})


@pytest.mark.parametrize("value,expected", [("70000", "iqmesh.health.port must be from 0 to 65535, got 70000"),
                                            ("same", "iqmesh.health.port must differ from application.server's port")])
def test_a_bad_health_port_stops_iqmesh_run_with_one_line(tmp_path: Path, value: str, expected: str) -> None:
    grpc_port = free_port()
    rc, err = iqmesh("run", "examples/wordcount.py", "--application-id", "a", "--bootstrap",
                     f"127.0.0.1:{free_port()}", "--grpc-port", str(grpc_port), "--state-dir", str(tmp_path / "state"),
                     "--config", f"iqmesh.health.port={grpc_port if value == 'same' else value}")
    one_line(rc, err, "run", expected)
