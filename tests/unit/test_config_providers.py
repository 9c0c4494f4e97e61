"""Kafka's configuration providers (KIP-297/887/993): secrets read from files, directories or the
environment when the settings are read, never written on a command line."""

from __future__ import annotations

from pathlib import Path

import pytest

from instance.config import StreamsConfig
from instance.config_providers import resolve
from instance.errors import ConfigException

BASE = {"application.id": "a", "bootstrap.servers": "127.0.0.1:9092"}


def test_dir_file_and_env_providers_fill_in_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = tmp_path / "sasl"
    secrets.mkdir()
    (secrets / "password").write_text("s3cret")
    (tmp_path / "creds.properties").write_text("user=alice\n")
    monkeypatch.setenv("IQMESH_TEST_MECH", "SCRAM-SHA-512")
    config = StreamsConfig.from_properties({
        **BASE,
        "config.providers": "dir,file,env",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "sasl.password": f"${{dir:{secrets}:password}}",
        "sasl.username": f"${{file:{tmp_path}/creds.properties:user}}",
        "sasl.mechanism": "${env:IQMESH_TEST_MECH}",
    })
    assert config.client_config("admin")["sasl.password"] == "s3cret"
    assert config.client_config("admin")["sasl.username"] == "alice"
    assert config.client_config("admin")["sasl.mechanism"] == "SCRAM-SHA-512"
    assert not any(k.startswith("config.providers") for k in config.extra)


@pytest.mark.parametrize(("props", "message"), [
    ({"sasl.password": "${dir:/x:password}"}, "config.providers does not enable"),
    ({"config.providers": "vault", "sasl.password": "${vault:/x:y}"}, "not one of Kafka's providers"),
    ({"config.providers": "dir", "sasl.password": "${dir:/nonexistent-dir:password}"},
     "sasl.password: cannot read"),
    ({"config.providers": "env", "sasl.password": "${env:IQMESH_NO_SUCH_VARIABLE}"}, "no environment variable"),
])
def test_a_secret_that_cannot_be_read_names_the_setting(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigException, match=message):
        resolve({**BASE, **props})


def test_allowed_paths_limit_what_a_provider_reads(tmp_path: Path) -> None:
    (tmp_path / "password").write_text("x")
    props = {"config.providers": "dir", "config.providers.dir.param.allowed.paths": str(tmp_path / "elsewhere"),
             "sasl.password": f"${{dir:{tmp_path}:password}}"}
    with pytest.raises(ConfigException, match="outside the provider's allowed.paths"):
        resolve(props)
    props["config.providers.dir.param.allowed.paths"] = str(tmp_path)
    assert resolve(props) == {"sasl.password": "x"}
