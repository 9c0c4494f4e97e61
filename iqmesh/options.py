"""What the commands share on the command line: the help format, ``--config``/``--config-file``,
and the settings built from them (the properties file, then --config, then the named flags)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from instance.errors import ConfigException

#: adds one command to the ``iqmesh`` parser: (name, help) -> its parser
CommandFactory = Callable[[str, str], argparse.ArgumentParser]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every flag's help ends with its default, unless it says the default itself."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False or default == []
                or default == argparse.SUPPRESS or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def port_number(text: str) -> int:
    """An argparse type: a TCP port, 0 (a free one, where the flag allows it) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 0 to 65535, got {port}")
    return port


def add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="any setting by its Kafka Streams name, e.g. num.standby.replicas=1 (repeatable); "
                   "client commands and the gateway read only iqmesh.tls.* and iqmesh.auth.token")
    p.add_argument("--config-file", help="a .properties file of settings (flags and --config win; default: none)")


def build_properties(args: argparse.Namespace, shortcuts: dict[str, Any]) -> dict[str, Any]:
    """Settings from the properties file, then --config, then the named flags."""
    from instance import config_providers
    from instance.properties_file import load_properties_file

    props: dict[str, Any] = {}
    if args.config_file:
        props.update(load_properties_file(args.config_file))
    for item in args.config:
        if "=" not in item:
            raise ConfigException(f"--config expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    props.update({k: v for k, v in shortcuts.items() if v is not None})
    return config_providers.resolve(props)


def client_security(args: argparse.Namespace) -> Any:
    """TLS CA and bearer token of a client command, from --config / --config-file."""
    from kernel.security import Security

    try:
        return Security.from_properties(build_properties(args, {}))
    except ValueError as e:
        raise ConfigException(str(e)) from e
