"""Settings out of range stop a start with one line naming them and exit status 2 (no traceback,
nothing accepted that the instance would not honour): ports, numeric settings, client settings
librdkafka refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from instance.local.broker import free_port
from tests.unit.test_cli_one_line_errors import iqmesh, one_line


@pytest.mark.parametrize("command,flags", [
    ("gateway", ["--seeds", "127.0.0.1:1", "--port", "-1"]),
    ("gateway", ["--seeds", "127.0.0.1:1", "--port", "99999"]),
    ("run", ["examples/wordcount.py", "--application-id", "a", "--bootstrap", "127.0.0.1:1", "--grpc-port", "70000"]),
    ("run", ["examples/wordcount.py", "--application-id", "a", "--bootstrap", "127.0.0.1:1", "--grpc-port", "1",
             "--metrics-port", "65536"]),
    ("broker", ["start", "--port", "123456"]),
    ("demo", ["--gateway-port", "-5"]),
])
def test_a_port_out_of_range_is_refused_as_the_command_line_is_read(command: str, flags: list[str]) -> None:
    rc, err = iqmesh(command, *flags)
    assert rc == 2 and "Traceback" not in err, err
    assert err.strip().splitlines()[-1].startswith(f"iqmesh {command}"), err
    assert "must be a port number from 0 to 65535" in err, err


@pytest.mark.parametrize("setting,expected", [
    ("commit.interval.ms=-1", "commit.interval.ms must be at least 0, got -1"),
    ("session.timeout.ms=0", "session.timeout.ms must be at least 1, got 0"),
    ("application.server=127.0.0.1:70000", "application.server must be host:port with a port from 1 to 65535"),
    ("ssl.ca.location=/nonexistent-iqmesh.pem", "ssl.ca.location=/nonexistent-iqmesh.pem: no such file"),
])
def test_a_setting_out_of_range_stops_the_start_naming_it(tmp_path: Path, setting: str, expected: str) -> None:
    rc, err = iqmesh("run", "examples/wordcount.py", "--application-id", "a", "--bootstrap",
                     f"127.0.0.1:{free_port()}", "--grpc-port", str(free_port()), "--state-dir",
                     str(tmp_path / "state"), "--config", "security.protocol=SSL", "--config", setting)
    one_line(rc, err, "run", expected)
