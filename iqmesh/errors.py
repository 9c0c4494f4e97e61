"""The one-line errors of the ``iqmesh`` commands: which failures are reported as
``iqmesh COMMAND: error: CODE: message`` (exit status 2, as argparse reports a bad command line)
and with which CODE and message; anything else is a bug and keeps its traceback."""

from __future__ import annotations

import argparse
import os
import signal
import sys

from instance.error_line import report_error
from instance.errors import BrokerUnreachableException, ConfigException, StreamsException, TopologyException
from iqmesh.options import client_security


def run_command(args: argparse.Namespace) -> int:
    """Run the parsed command; a known failure becomes the error line and exit status 2."""
    try:
        check_numbers(args)
        return int(args.func(args))
    except BrokenPipeError:
        # the reader went away (``iqmesh metadata | head``): end quietly, as a C tool killed by
        # SIGPIPE does; stdout is pointed at /dev/null so the interpreter's final flush is quiet too
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE
    except Exception as e:
        code = _error_code(e)
        if code is None:
            raise
        report_error(args.command, code, _error_message(e, args))
        return 2


def _error_code(e: BaseException) -> str | None:
    """The CODE of the error line, or None for a bug (which keeps its traceback)."""
    import grpc

    from instance.local.broker import BrokerError
    from iqmesh.kafka import KafkaCommandError
    from kernel.kafka_clients import ClientSettingsError
    from kernel.ports import PortInUseError

    if isinstance(e, grpc.RpcError) and isinstance(e, grpc.Call):
        return e.code().name
    if isinstance(e, BrokerUnreachableException):
        return "BROKER_UNREACHABLE"
    if isinstance(e, ConfigException | ClientSettingsError):
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

    from kernel.status_details import refusal_of

    if isinstance(e, grpc.Call):
        details = e.details() or ""
        if e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED) and refusal_of(e) is None:
            return (f"no answer from {args.target} ({details}): is an instance serving queries there?"
                    f"{_tls_hint(args)}")
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
    if args.command == "watch" and args.limit is not None and args.limit < 1:
        # a watch stops once it printed --limit changes: 0 would print one all the same
        raise ConfigException(f"--limit must be 1 or more (leave it out to watch until Ctrl-C), got {args.limit}")
    for name in ("limit", "page_size"):
        value = getattr(args, name, None)
        if value is not None and value < 0:
            raise ConfigException(f"--{name.replace('_', '-')} must be 0 or more, got {value}")


def _tls_hint(args: argparse.Namespace) -> str:
    """Whether the target speaks TLS when the client does not, or the other way round, asked of
    the target itself (kernel.probe): gRPC says why it could not connect only in prose."""
    from kernel.probe import Listener, listener_at
    from kernel.security import TLS_CA_FILE

    target = str(getattr(args, "target", "") or "")
    if not target or "," in target:
        return ""
    try:
        tls = bool(client_security(args).ca_file)
    except Exception:
        tls = False
    listener = listener_at(target)
    if listener is Listener.TLS and not tls:
        return (f" It serves TLS and this client speaks plaintext: give its CA with --config {TLS_CA_FILE}=PATH"
                " (or --config-file)")
    if listener is Listener.TLS:
        return " (it serves TLS: is its certificate signed by your CA file, for the name you connect to?)"
    if listener is Listener.PLAINTEXT and tls:
        return f" (it does not serve TLS: drop {TLS_CA_FILE} for a plaintext instance)"
    return ""
