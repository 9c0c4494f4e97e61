"""The one-line errors of the ``iqmesh`` commands: which failures are reported as
``iqmesh COMMAND: error: CODE: message`` (exit status 2, as argparse reports a bad command line)
and with which CODE and message; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import argparse

from instance.cli.options import client_security
from instance.error_line import report_error
from instance.errors import BrokerUnreachableException, ConfigException, StreamsException, TopologyException


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; a known failure becomes the error line and exit status 2."""
    try:
        check_numbers(args)
        return int(args.func(args))
    except Exception as e:
        code = _error_code(e)
        if code is None:
            raise
        report_error(args.command, code, _error_message(e, args))
        return 2


def _error_code(e: BaseException) -> str | None:
    """The CODE of the error line, or None for a bug (which keeps its traceback)."""
    import grpc

    from instance.cli.kafka import KafkaCommandError
    from instance.local.broker import BrokerError
    from router.core.ports import PortInUseError

    if isinstance(e, grpc.RpcError) and isinstance(e, grpc.Call):
        return e.code().name
    if isinstance(e, BrokerUnreachableException):
        return "BROKER_UNREACHABLE"
    if isinstance(e, ConfigException):
        return "INVALID_CONFIG"
    if isinstance(e, TopologyException):
        return "INVALID_TOPOLOGY"
    if isinstance(e, StreamsException):
        return "STREAMS_ERROR"
    if isinstance(e, BrokerError):
        return "BROKER_ERROR"
    if isinstance(e, KafkaCommandError):
        return e.code
    if isinstance(e, PortInUseError):
        return "PORT_IN_USE"
    if isinstance(e, OSError):
        return "OS_ERROR"
    return None


def _error_message(e: BaseException, args: argparse.Namespace) -> str:
    import grpc

    from router.core.status_details import refusal_of

    if isinstance(e, grpc.Call):
        details = e.details() or ""
        if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and refusal_of(e) is None:
            return (f"no answer from {args.target} ({details}): is an instance serving queries there?"
                    f"{_tls_hint(details, args)}")
        return details
    return str(e)


#: commands whose --timeout, --limit, --page-size and --duration are checked here (topic, produce and
#: consume check their own)
_QUERY_COMMANDS = ("get", "range", "prefix", "all", "watch", "metadata", "gateway")


def check_numbers(args: argparse.Namespace) -> None:
    """A negative count or a timeout that is not positive is a mistake, not \"no limit\"."""
    if args.command not in _QUERY_COMMANDS:
        return
    for name in ("timeout", "duration"):
        value = getattr(args, name, None)
        if value is not None and not value > 0:
            raise ConfigException(f"--{name} must be more than 0 seconds, got {value}")
    for name in ("limit", "page_size"):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise ConfigException(f"--{name.replace('_', '-')} must be 0 or more, got {value}")


def _tls_hint(details: str, args: argparse.Namespace) -> str:
    """A TLS server closes a plaintext client's connection at once ("Socket closed"): say so."""
    from router.core.security import TLS_CA_FILE

    if "Socket closed" not in details:
        return ""
    try:
        tls = bool(client_security(args).ca_file)
    except Exception:
        tls = False
    if tls:
        return " (it closed the connection: is it serving TLS with a certificate your CA file signs?)"
    return (" It closed the connection at once, as a TLS server does for a plaintext client: if it serves TLS, "
            f"give its CA with --config {TLS_CA_FILE}=PATH (or --config-file)")
