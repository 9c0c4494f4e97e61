"""iqmesh.health_probe against a real gRPC health server on loopback, plaintext and TLS (the
exec probe production-example uses because the kubelet's grpc probe cannot dial TLS)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from iqmesh.health_probe import main as probe_main

POD_DNS = "iqmesh-0.iqmesh-headless.iqmesh.svc.cluster.local"
#: the probe's deadline here: far beyond a handshake and a call on a busy machine (a probe that
#: fails, fails at once, with its reason: UNAVAILABLE, not DEADLINE_EXCEEDED)
TIMEOUT = ["--timeout", "30"]


def _cert(d: Path) -> tuple[Path, Path]:
    """A self-signed certificate for the pod's DNS name only (not 127.0.0.1)."""
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but openssl is not installed (it makes the test certificate)")
        pytest.skip("openssl is not installed (it makes the test certificate; apt-get install openssl)")
    cert, key = d / "tls.crt", d / "tls.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "1", "-subj", f"/CN={POD_DNS}", "-addext", f"subjectAltName=DNS:{POD_DNS}"],
                   check=True, capture_output=True)
    return cert, key


@pytest.fixture(params=["plaintext", "tls"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[health.HealthServicer, int, Path]]:
    """A health server on loopback and the properties file its clients would read."""
    srv = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, srv)
    props = tmp_path / "app.properties"
    if request.param == "tls":
        cert, key = _cert(tmp_path)
        creds = grpc.ssl_server_credentials([(key.read_bytes(), cert.read_bytes())])
        port = srv.add_secure_port("127.0.0.1:0", creds)
        props.write_text(f"iqmesh.tls.cert.file={cert}\niqmesh.tls.key.file={key}\niqmesh.tls.ca.file={cert}\n")
    else:
        port = srv.add_insecure_port("127.0.0.1:0")
        props.write_text("state.dir=/tmp/x\n")
    srv.start()
    try:
        yield servicer, port, props
    finally:
        srv.stop(0).wait()


def test_exit_status_follows_the_serving_status(server: tuple[health.HealthServicer, int, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    servicer, port, props = server
    argv = ["--target", f"127.0.0.1:{port}", "--config-file", str(props), "--server-name", POD_DNS, *TIMEOUT]
    servicer.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    assert probe_main(argv) == 1
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    assert probe_main(argv) == 0
    assert capsys.readouterr().out.split() == ["NOT_SERVING", "SERVING"]


@pytest.mark.parametrize("server", ["tls"], indirect=True)  # only a TLS server has a name to check
def test_tls_checks_the_name_of_the_certificate(server: tuple[health.HealthServicer, int, Path],
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    servicer, port, props = server
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    base = ["--target", f"127.0.0.1:{port}", "--config-file", str(props), *TIMEOUT]
    assert probe_main([*base, "--server-name", "someone-else.example.com"]) == 1
    assert capsys.readouterr().out.split() == ["UNAVAILABLE"]  # the handshake fails (no time-out)
    monkeypatch.setenv("IQMESH_ADVERTISED_HOST", POD_DNS)  # what the StatefulSet sets: the default name
    assert probe_main(base) == 0


def test_a_bad_config_file_is_status_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "app.properties"
    bad.write_text(f"iqmesh.tls.ca.file={tmp_path / 'missing.pem'}\n")
    assert probe_main(["--config-file", str(bad)]) == 2
    assert "iqmesh.tls.ca.file" in capsys.readouterr().err
