"""What a command prints besides its answer: a reader that goes away (``iqmesh ... | head``) ends
the command quietly (no OS_ERROR line, the exit status of a tool SIGPIPE ended); a TLS client
against a plaintext instance prints its one error line and none of gRPC's handshake lines."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from concurrent import futures
from pathlib import Path

import grpc
import pytest

APP = '''
from instance.serde import StringSerde
from instance.topology import StreamsBuilder

def build():
    b = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    for i in range(50):
        b.stream(f"topic-{i}").filter(lambda k, v: True).map_values(str.upper).to(f"out-{i}")
    return b.build()
'''


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    app = tmp_path / "many.py"
    app.write_text(APP)
    p = subprocess.Popen([sys.executable, "-m", "iqmesh", "describe", str(app)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None and p.stderr is not None
    p.stdout.close()  # as head does after its lines: here before the first, while the app loads
    err = p.stderr.read().decode()
    assert p.wait(60) == 141, err
    assert err == "", err


def test_a_failed_tls_handshake_is_one_error_line(tmp_path: Path) -> None:
    if shutil.which("openssl") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but openssl is not installed (.ci/run installs it)")
        pytest.skip("openssl is not installed (it makes the test certificate; apt-get install openssl)")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(tmp_path / "k.pem"),
                    "-out", str(tmp_path / "ca.pem"), "-days", "1", "-subj", "/CN=localhost"],
                   check=True, capture_output=True)
    server = grpc.server(futures.ThreadPoolExecutor(2))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        p = subprocess.run([sys.executable, "-m", "iqmesh", "get", "--target", f"127.0.0.1:{port}",
                            "--store", "counts", "--key", "a", "--timeout", "3",
                            "--config", f"iqmesh.tls.ca.file={tmp_path / 'ca.pem'}"],
                           capture_output=True, text=True, timeout=60)
    finally:
        server.stop(None)
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines() == [p.stderr.strip()] and "does not serve TLS" in p.stderr, p.stderr
