"""The ``iqmesh`` command: run, get, range, prefix, all, watch, metadata, gateway, snapshot, describe, broker,
topic, produce, consume, demo.

One style for every command: results are JSON on stdout with snake_case keys and numbers as
numbers; an error is one line on stderr, ``iqmesh COMMAND: error: CODE: message`` (CODE a gRPC
status name for query errors), exit status 2, as argparse reports a bad command line.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from instance.errors import BrokerUnreachableException, ConfigException, StreamsException, TopologyException
from router.echo import clip

DESCRIPTION = """Kafka Streams in Python, with stores that answer queries across the cluster.
Start with `iqmesh demo`; `iqmesh COMMAND --help` describes each command."""


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every flag's help ends with its default, unless it says the default itself."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if ("default" in text or default is None or default is False or default == []
                or default == argparse.SUPPRESS or not action.option_strings):
            return text
        return f"{text} (default: %(default)s)"


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="any setting by its Kafka Streams name, e.g. num.standby.replicas=1 (repeatable); "
                   "client commands and the gateway read only iqmesh.tls.* and iqmesh.auth.token")
    p.add_argument("--config-file", help="a .properties file of settings (flags and --config win; default: none)")


def build_properties(args: argparse.Namespace, shortcuts: dict[str, Any]) -> dict[str, Any]:
    """Settings from the properties file, then --config, then the named flags."""
    from instance import config_providers
    from instance.config import load_properties_file

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


def cmd_run(args: argparse.Namespace) -> int:
    from instance.app_loader import load_topology
    from instance.config import StreamsConfig
    from instance.runtime.kafka_streams import KafkaStreams
    from instance.runtime.metrics_http import MetricsServer
    from instance.runtime.restore import LoggingRestoreListener
    from instance.runtime.states import State
    from instance.server.servicer import QueryServer
    from instance.startup_checks import check_state_dir

    props = build_properties(args, {
        "application.id": args.application_id, "client.id": args.instance_id,
        "bootstrap.servers": args.bootstrap, "state.dir": args.state_dir,
        "iqmesh.metrics.port": args.metrics_port,
    })
    if args.grpc_port is not None and "application.server" not in props:
        props["application.server"] = f"{args.advertised_host}:{args.grpc_port}"
    config = StreamsConfig.from_properties(props)
    if not config.application_server:
        raise ConfigException("give --grpc-port (or application.server=host:port) so the instance can "
                              "answer queries")
    grpc_port = (args.grpc_port if args.grpc_port is not None
                 else int(config.application_server.rsplit(":")[1]))
    topology = load_topology(args.app)
    check_state_dir(config.state_dir, config.application_id)  # before joining the group
    streams = KafkaStreams(topology, config)
    streams.restore_listener = LoggingRestoreListener(
        f"[{config.instance_id}]", lambda line: print(line, flush=True))
    server = QueryServer(streams, grpc_port)
    metrics_server = (MetricsServer(streams.metrics, config.listen_host, config.metrics_port, config.security)
                      if config.metrics_port else None)
    done = threading.Event()

    def on_state(new: State, old: State) -> None:
        print(f"[{config.instance_id or config.application_id}] state {old.name} -> {new.name}", flush=True)
        server.set_serving(new is State.RUNNING)
        if new in (State.ERROR, State.NOT_RUNNING):
            done.set()

    streams.set_state_listener(on_state)
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    server.start()
    if metrics_server is not None:
        metrics_server.start()
    streams.start()
    print(f"[{config.instance_id}] serving queries on {config.application_server}", flush=True)
    if metrics_server is not None:
        print(f"[{config.instance_id}] serving metrics on {config.listen_host}:{metrics_server.port}/metrics",
              flush=True)
    while not done.wait(1.0):
        server.set_live(streams.is_live())
    failed = streams.state is State.ERROR
    streams.close()
    server.stop()
    if metrics_server is not None:
        metrics_server.stop()
    if failed:
        report_error("run", "STREAMS_ERROR", f"[{config.instance_id}] stopped: {streams.last_error}")
        return 1
    return 0


def _client_security(args: argparse.Namespace) -> Any:
    """TLS CA and bearer token of a client command, from --config / --config-file."""
    from router.security import Security

    try:
        return Security.from_properties(build_properties(args, {}))
    except ValueError as e:
        raise ConfigException(str(e)) from e


def cmd_get(args: argparse.Namespace) -> int:
    from router.client import QueryClient

    if args.wait < 0:
        raise ConfigException(f"--wait must be 0 or more seconds, got {args.wait}")
    opts = {"allow_stale": args.allow_stale, "max_lag": args.max_lag, "position": args.position or ""}
    windowed = args.window_from is not None or args.window_to is not None
    with QueryClient(args.target, timeout=args.timeout, security=_client_security(args)) as client:
        if windowed or args.sessions:
            w = (client.session_fetch(args.store, args.key, **opts) if args.sessions else
                 client.window_fetch(args.store, args.key, args.window_from or 0,
                                     2**63 - 1 if args.window_to is None else args.window_to, **opts))
            print(json.dumps({"store": args.store, "key": args.key, "metadata": w.metadata,
                              "windows": [{"start": s, "end": e, "value": v} for s, e, v in w.windows]}),
                  flush=True)
            return 0
        r = _get_waiting(client, args, opts) if args.wait else client.get(args.store, args.key, **opts)
    print(json.dumps({"store": args.store, "key": args.key, "found": r.found, "value": r.json_value,
                      "metadata": r.metadata}), flush=True)
    return 0


def _get_waiting(client: Any, args: argparse.Namespace, opts: dict[str, Any]) -> Any:
    """``--wait``: ask again while no instance answers yet or the key is not there yet (a cluster
    starting, input not processed yet), until the key is found or the wait is over."""
    import time

    import grpc

    from router.client_core import is_retryable

    deadline = time.monotonic() + args.wait
    while True:
        left = deadline - time.monotonic()
        try:
            r = client.get(args.store, args.key, timeout=max(0.1, min(args.timeout, left)), **opts)
            if r.found or left <= 0:
                return r
        except grpc.RpcError as e:
            if not is_retryable(e) or left <= 0:
                raise
        time.sleep(min(0.25, max(0.0, deadline - time.monotonic())))


def cmd_scan(args: argparse.Namespace) -> int:
    """One JSON line per entry (key, value, partition), then one summary line: whether every
    partition answered, each partition's read metadata or reason."""
    from router.client import QueryClient

    opts = {"page_size": args.page_size, "limit": args.limit, "allow_stale": args.allow_stale,
            "max_lag": args.max_lag, "position": args.position or "", "require_complete": args.require_complete,
            "with_json": True}
    with QueryClient(args.target, timeout=args.timeout, security=_client_security(args)) as client:
        if args.command == "range":
            scan = client.range(args.store, args.from_key, args.to_key, **opts)
        elif args.command == "prefix":
            scan = client.prefix_scan(args.store, args.prefix, **opts)
        else:
            scan = client.all(args.store, **opts)
        for item in scan:
            print(json.dumps({"key": json.loads(item.key_json), "value": json.loads(item.value_json),
                              "partition": item.partition}), flush=True)
    print(json.dumps({"store": args.store, "complete": scan.complete, "missing": scan.missing,
                      "partitions": [scan.partitions[p] for p in sorted(scan.partitions)]}), flush=True)
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """One JSON line per committed change (or routing event) as it happens, until --limit changes
    or --duration seconds; then one line with the token that resumes after the last change."""
    import dataclasses

    from router.client import QueryClient
    from router.watch_client import Change

    changes = 0
    with QueryClient(args.target, timeout=args.timeout, security=_client_security(args)) as client:
        watch = client.watch(args.store, args.key, prefix=args.prefix, all_keys=args.all,
                             resume_token=args.resume or "", from_beginning=args.from_beginning, with_json=True,
                             timeout=args.duration)
        try:
            for item in watch:
                if isinstance(item, Change):
                    changes += 1
                    print(json.dumps({"key": json.loads(item.key_json), "value": json.loads(item.value_json),
                                      "deleted": item.deleted, "partition": item.partition, "offset": item.offset,
                                      "timestamp_ms": item.timestamp_ms, "resume_token": item.resume_token}),
                          flush=True)
                    if args.limit is not None and changes >= args.limit:
                        break
                else:
                    print(json.dumps({"routing": dataclasses.asdict(item)}), flush=True)
        except KeyboardInterrupt:
            pass
        finally:
            watch.close()
    print(json.dumps({"end": {"changes": changes, "resume_token": watch.resume_token, "served_by": watch.served_by}}),
          flush=True)
    return 0


def cmd_metadata(args: argparse.Namespace) -> int:
    from router.client import QueryClient, routing_table_to_dict

    with QueryClient(args.target, timeout=args.timeout, security=_client_security(args)) as client:
        reply = client.metadata()
    print(json.dumps(routing_table_to_dict(reply), indent=2), flush=True)
    return 0


def cmd_gateway(args: argparse.Namespace) -> int:
    from instance.kafka_clients import client_settings, is_client_setting
    from router.gateway import GatewayConfig, run_gateway

    seeds = tuple(s.strip() for s in (args.seeds or "").split(",") if s.strip())
    security = _client_security(args)
    # the instances-topic reader is a consumer like the instances' own: the same Kafka settings
    props = build_properties(args, {})
    kafka = client_settings({k: str(v) for k, v in props.items() if is_client_setting(k)}, "restore.consumer")
    try:
        config = GatewayConfig(seeds, args.bootstrap or "", args.application_id or "", args.timeout,
                               security=security, kafka=kafka)
    except ValueError as e:
        raise ConfigException(str(e)) from e
    run_gateway(config, args.host, args.port)
    return 0


def cmd_snapshot(args: argparse.Namespace) -> int:
    from analytics.snapshot.job import run_from_args

    return run_from_args(args)


def cmd_describe(args: argparse.Namespace) -> int:
    from instance.app_loader import load_topology

    print(load_topology(args.app).describe(), end="", flush=True)
    return 0


def cmd_broker(args: argparse.Namespace) -> int:
    from devtools import engines  # dev tooling, imported only for this subcommand

    data_dir = Path(args.data_dir)
    if args.action == "start":
        h = engines.start(args.engine, data_dir, port=args.port, brokers=args.brokers, sasl_ssl=args.sasl_ssl)
        print(h.bootstrap, flush=True)
    elif args.action == "stop":
        print("stopped" if engines.stop(data_dir) else "not running", flush=True)
    else:
        h2 = engines.status(data_dir)
        print(f"running at {h2.bootstrap} (pid {h2.pid})" if h2 else "not running", flush=True)
        return 0 if h2 else 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from devtools.demo import run_demo  # dev tooling, imported only for this subcommand

    return run_demo(Path(args.data_dir), lines=args.lines, exit_when_ready=args.exit_when_ready,
                    gateway_port=args.gateway_port, feed_rate=args.feed_rate)


def _query_args(p: argparse.ArgumentParser, timeout_help: str) -> None:
    """--target, --store and the read options every query command takes."""
    p.add_argument("--target", required=True, help="HOST:PORT of any instance (its gRPC port)")
    p.add_argument("--store", required=True, help="name of the state store, e.g. counts")
    p.add_argument("--allow-stale", action="store_true",
                   help="a standby or restoring replica may answer (default: only an up-to-date active)")
    p.add_argument("--max-lag", type=int, default=-1,
                   help="with --allow-stale: the most changelog records a replica may be behind (-1: any)")
    p.add_argument("--position", help="position_token of an earlier reply: never answer from older state "
                   "(default: no bound)")
    p.add_argument("--timeout", type=float, default=10.0, help=timeout_help)
    _add_config_args(p)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="iqmesh", description=DESCRIPTION, formatter_class=HelpFormatter)
    ap.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING or ERROR")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)

    p = command("run", "run one instance of an application until SIGTERM")
    p.add_argument("app", help="application with build() -> Topology: a file (examples/wordcount.py) or an "
                   "importable module (examples.wordcount)")
    p.add_argument("--application-id", help="application.id: names the consumer group, internal topics and "
                   "state directory (required here or in --config/--config-file)")
    p.add_argument("--instance-id", help="client.id: this instance's name in the cluster metadata "
                   "(static membership is --config group.instance.id=NAME; default: application.server)")
    p.add_argument("--bootstrap", help="bootstrap.servers, HOST:PORT of the Kafka brokers (required here or "
                   "in --config/--config-file)")
    p.add_argument("--grpc-port", type=int, help="port of the query server (application.server port; "
                   "required unless application.server is set)")
    p.add_argument("--advertised-host", default="127.0.0.1", help="host part of application.server")
    p.add_argument("--state-dir", help="state.dir, where the RocksDB stores live (default: /tmp/iqmesh)")
    p.add_argument("--metrics-port", type=int, help="iqmesh.metrics.port: serve Prometheus /metrics (Kafka "
                   "Streams' metrics) over HTTP on this port, where the query server listens (default: off)")
    _add_config_args(p)
    p.set_defaults(func=cmd_run)

    p = command("get", "query one key through any instance; one JSON object")
    _query_args(p, "seconds to wait for the answer")
    p.add_argument("--key", required=True, help="the key as text, parsed with the store's key serde")
    p.add_argument("--window-from", type=int, help="window store: the windows starting at or after (ms)")
    p.add_argument("--window-to", type=int, help="window store: the windows starting at or before (ms)")
    p.add_argument("--sessions", action="store_true", help="session store: the key's sessions")
    p.add_argument("--wait", type=float, default=0.0, help="keep asking for up to this many seconds while no "
                   "instance answers yet or the key is not found yet (a cluster starting, input not processed "
                   "yet); 0: ask once")
    p.set_defaults(func=cmd_get)

    for name, what in (("range", "entries from --from to --to (inclusive, by serialized key)"),
                       ("prefix", "entries whose key starts with --prefix"), ("all", "every entry of a store")):
        p = command(name, f"{what}, across every partition; JSON lines")
        _query_args(p, "seconds per page")
        if name == "range":
            p.add_argument("--from", dest="from_key", help="first key (default: unbounded)")
            p.add_argument("--to", dest="to_key", help="last key (default: unbounded)")
        if name == "prefix":
            p.add_argument("--prefix", required=True, help="the key prefix, as text")
        p.add_argument("--limit", type=int, help="entries in all (default: every one)")
        p.add_argument("--page-size", type=int, default=0, help="entries per call (default: 0, the server's)")
        p.add_argument("--require-complete", action="store_true",
                       help="fail rather than leave out partitions that cannot answer (default: leave out, "
                       "and say which)")
        p.set_defaults(func=cmd_scan)

    p = command("watch", "committed changes of a key, a prefix or a whole store as they happen, through any "
                "instance (rebalances included); JSON lines, then one line with the token that resumes")
    p.add_argument("--target", required=True, help="HOST:PORT of any instance (its gRPC port)")
    p.add_argument("--store", required=True, help="name of the state store, e.g. counts")
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--key", help="watch this key (text, parsed with the store's key serde)")
    target.add_argument("--prefix", help="watch the keys starting with this prefix (text)")
    target.add_argument("--all", action="store_true", help="watch every key")
    p.add_argument("--resume", help="resume_token of an earlier line: go on right after it (default: from now)")
    p.add_argument("--from-beginning", action="store_true",
                   help="without --resume: first every change the changelog still holds")
    p.add_argument("--limit", type=int, help="stop after this many changes (default: no limit)")
    p.add_argument("--duration", type=float, help="stop after this many seconds (default: run until Ctrl-C)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds to find an instance that starts the watch (and per call while finding one)")
    _add_config_args(p)
    p.set_defaults(func=cmd_watch)

    p = command("metadata", "print the routing table as JSON: instances, their tasks and store positions")
    p.add_argument("--target", required=True, help="HOST:PORT of any instance (its gRPC port)")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for the answer")
    _add_config_args(p)
    p.set_defaults(func=cmd_metadata)

    p = command("gateway", "REST gateway and dashboard over the instances of an application")
    p.add_argument("--bootstrap", help="bootstrap.servers: find the instances in the application's instances topic")
    p.add_argument("--application-id", help="with --bootstrap: the application whose instances to serve")
    p.add_argument("--seeds", help="or HOST:PORT,... of instances to ask (the others are learned from them)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8080, help="port to serve HTTP on")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call to an instance")
    _add_config_args(p)
    p.set_defaults(func=cmd_gateway)

    from analytics.snapshot.options import add_arguments as snapshot_arguments  # stdlib only: no pyspark here

    p = command("snapshot", "PySpark job: a consistent snapshot of every store of an application "
                "as Parquet + manifest.json (needs the analytics extra and Java 17)")
    snapshot_arguments(p)
    p.set_defaults(func=cmd_snapshot)

    p = command("describe", "print the topology of an application (file or module)")
    p.add_argument("app", help="a file (examples/wordcount.py) or an importable module (examples.wordcount)")
    p.set_defaults(func=cmd_describe)

    p = command("broker", "a local broker: the embedded dev broker (noida-db) or Apache Kafka; start, stop, "
                "status")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, what in (("start", "start the broker in the background (if not running) and print its "
                          "address"),
                         ("stop", "stop the broker of --data-dir (its data stays)"),
                         ("status", "say whether the broker of --data-dir runs (exit status 1 if not)")):
        a = actions.add_parser(action, help=what, description=what, formatter_class=HelpFormatter)
        if action == "start":
            a.add_argument("--port", type=int, help="Kafka port on 127.0.0.1 (default: a free one; with "
                           "--brokers 3, the first of three consecutive ports)")
            a.add_argument("--engine", choices=("dev", "kafka"), default="dev",
                           help="dev: noida-db from PyPI; kafka: Apache Kafka 4.x (KRaft), resolved once "
                           "from Maven Central into ~/.cache/iqmesh (needs java and mvn)")
            a.add_argument("--brokers", type=int, default=1,
                           help="nodes of an Apache Kafka cluster (3: replication factor 3, "
                           "min.insync.replicas=2)")
            a.add_argument("--sasl-ssl", action="store_true",
                           help="Apache Kafka: clients connect with SASL_SSL and SCRAM-SHA-512 (a self-signed "
                           "certificate); DATA_DIR/client.properties holds the client settings")
        a.add_argument("--data-dir", default=".iqmesh/broker", help="where the broker keeps its data and pid file")
        a.set_defaults(func=cmd_broker, port=None, engine="dev", brokers=1, sasl_ssl=False)

    from instance.kafka_cli import add_parsers as kafka_parsers  # topic, produce, consume

    kafka_parsers(command, HelpFormatter)

    p = command("demo", "broker + 3 word-count instances + sample text + the REST gateway and "
                "dashboard; prints how to query")
    p.add_argument("--data-dir", default=".iqmesh/demo", help="broker data, instance state and logs")
    p.add_argument("--lines", type=int, default=2000, help="lines of sample text to count")
    p.add_argument("--exit-when-ready", action="store_true",
                   help="verify, print, stop what the demo started (default: keep running until Ctrl-C)")
    p.add_argument("--gateway-port", type=int, default=8080, help="of the dashboard (a free one if taken)")
    p.add_argument("--feed-rate", type=int, default=20, help="lines/s fed while the demo runs (0: none)")
    p.set_defaults(func=cmd_demo)
    return ap


def _error_code(e: BaseException) -> str | None:
    """The CODE of the error line, or None for a bug (which keeps its traceback)."""
    import grpc

    from devtools.broker import BrokerError
    from instance.kafka_cli import KafkaCommandError
    from router.ports import PortInUseError

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

    from router.status_details import refusal_of

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
    from router.security import TLS_CA_FILE

    if "Socket closed" not in details:
        return ""
    try:
        tls = bool(_client_security(args).ca_file)
    except Exception:
        tls = False
    if tls:
        return " (it closed the connection: is it serving TLS with a certificate your CA file signs?)"
    return (" It closed the connection at once, as a TLS server does for a plaintext client: if it serves TLS, "
            f"give its CA with --config {TLS_CA_FILE}=PATH (or --config-file)")


def report_error(command: str, code: str, message: str) -> None:
    """The one error line: ``iqmesh COMMAND: error: CODE: message`` on stderr."""
    line = " ".join(clip(message).split())  # one line, whatever the message held
    print(f"iqmesh {command}: error: {code}: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        check_numbers(args)
        return int(args.func(args))
    except Exception as e:
        code = _error_code(e)
        if code is None:
            raise
        report_error(args.command, code, _error_message(e, args))
        return 2


if __name__ == "__main__":
    sys.exit(main())
