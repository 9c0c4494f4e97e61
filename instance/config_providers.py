"""Secrets outside the configuration: Kafka's configuration providers (KIP-297, KIP-887).

A value may hold ``${provider:path:key}`` (or ``${provider:key}``), resolved when the settings are
read, so a password lives in a file a Kubernetes Secret mounts instead of on a command line or in
a ConfigMap. As in Kafka, a provider is used only when ``config.providers`` names it:

    config.providers=dir
    sasl.password=${dir:/etc/iqmesh/kafka-sasl:password}

Kafka's three providers, by their short names or their Java class names
(``config.providers.NAME.class``): ``file`` (a key of a ``.properties`` file), ``dir`` (the whole
content of a file in a directory: one Secret key per file) and ``env`` (an environment variable).
``config.providers.NAME.param.allowed.paths`` (comma-separated) limits the files a provider may read
(KIP-993). The ``config.providers*`` settings themselves are removed from what is returned.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from instance.errors import ConfigException
from instance.properties_file import load_properties_file

PROVIDERS = "config.providers"
_VARIABLE = re.compile(r"\$\{([^}:]*?):(?:([^}]*?):)?([^}]*?)\}")
_CLASSES = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "dir",
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
}


def _file(path: str, key: str) -> str:
    values = load_properties_file(path)
    if key not in values:
        raise KeyError(f"no key {key!r} in {path}")
    return values[key]


def _dir(path: str, key: str) -> str:
    return (Path(path) / key).read_text()


def _env(path: str, key: str) -> str:
    if key not in os.environ:
        raise KeyError(f"no environment variable {key}")
    return os.environ[key]


_READERS: dict[str, Callable[[str, str], str]] = {"file": _file, "dir": _dir, "env": _env}


def resolve(props: Mapping[str, Any]) -> dict[str, Any]:
    """``props`` with every provider variable replaced by its value and the provider settings
    removed; a variable of a provider not enabled, or whose value cannot be read, is a
    ConfigException naming the setting."""
    names = [n.strip() for n in str(props.get(PROVIDERS, "")).split(",") if n.strip()]
    readers: dict[str, tuple[Callable[[str, str], str], list[Path]]] = {}
    for name in names:
        kind = str(props.get(f"{PROVIDERS}.{name}.class", name))
        kind = _CLASSES.get(kind, kind)
        if kind not in _READERS:
            raise ConfigException(f"{PROVIDERS}.{name}.class: {kind!r} is not one of Kafka's providers "
                                  f"(file, dir, env or their org.apache.kafka.common.config.provider classes)")
        allowed = str(props.get(f"{PROVIDERS}.{name}.param.allowed.paths", ""))
        readers[name] = (_READERS[kind], [Path(p.strip()).resolve() for p in allowed.split(",") if p.strip()])
    out: dict[str, Any] = {}
    for setting, value in props.items():
        if setting == PROVIDERS or setting.startswith(PROVIDERS + "."):
            continue
        out[setting] = _VARIABLE.sub(partial(_value, setting, readers=readers), value) \
            if isinstance(value, str) else value
    return out


def _value(setting: str, m: re.Match[str], *,
           readers: Mapping[str, tuple[Callable[[str, str], str], list[Path]]]) -> str:
    provider, path, key = m.group(1), m.group(2) or "", m.group(3)
    if provider not in readers:
        raise ConfigException(f"{setting}: {m.group(0)} names provider {provider!r}, which {PROVIDERS} does not "
                              f"enable (e.g. {PROVIDERS}={provider})")
    read, allowed = readers[provider]
    if allowed and path and not any(Path(path).resolve().is_relative_to(a) for a in allowed):
        raise ConfigException(f"{setting}: {path} is outside the provider's allowed.paths")
    try:
        return read(path, key)
    except (OSError, KeyError, ConfigException) as e:
        reason = e.args[0] if isinstance(e, KeyError) else e
        raise ConfigException(f"{setting}: cannot read {m.group(0)}: {reason}") from None
