"""The ``iqmesh`` command: run, get, range, prefix, all, metadata, gateway, snapshot, describe, broker, demo."""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import threading
from pathlib import Path
from typing import Any

from instance.errors import StreamsException


def _add_config_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE",
                   help="any setting by its Kafka Streams name, e.g. num.standby.replicas=1 (repeatable); "
                   "client commands and the gateway read only iqmesh.tls.* and iqmesh.auth.token")
    p.add_argument("--config-file", help="a .properties file of settings (flags and --config win)")


def build_properties(args: argparse.Namespace, shortcuts: dict[str, Any]) -> dict[str, Any]:
    """Settings from the properties file, then --config, then the named flags."""
    from instance.config import load_properties_file

    props: dict[str, Any] = {}
    if args.config_file:
        props.update(load_properties_file(args.config_file))
    for item in args.config:
        if "=" not in item:
            raise StreamsException(f"--config expects NAME=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    props.update({k: v for k, v in shortcuts.items() if v is not None})
    return props


def cmd_run(args: argparse.Namespace) -> int:
    from instance.app_loader import load_topology
    from instance.config import StreamsConfig
    from instance.runtime.kafka_streams import KafkaStreams
    from instance.runtime.restore import LoggingRestoreListener
    from instance.runtime.states import State
    from instance.server.servicer import QueryServer

    props = build_properties(args, {
        "application.id": args.application_id, "client.id": args.instance_id,
        "bootstrap.servers": args.bootstrap, "state.dir": args.state_dir,
    })
    if args.grpc_port is not None and "application.server" not in props:
        props["application.server"] = f"{args.advertised_host}:{args.grpc_port}"
    config = StreamsConfig.from_properties(props)
    if not config.application_server:
        raise StreamsException("give --grpc-port (or application.server=host:port) so the instance can "
                               "answer queries")
    grpc_port = (args.grpc_port if args.grpc_port is not None
                 else int(config.application_server.rsplit(":")[1]))
    topology = load_topology(args.app)
    streams = KafkaStreams(topology, config)
    streams.restore_listener = LoggingRestoreListener(
        f"[{config.instance_id}]", lambda line: print(line, flush=True))
    server = QueryServer(streams, grpc_port)
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
    streams.start()
    print(f"[{config.instance_id}] serving queries on {config.application_server}", flush=True)
    done.wait()
    failed = streams.state is State.ERROR
    streams.close()
    server.stop()
    if failed:
        print(f"[{config.instance_id}] stopped with an error: {streams.last_error}",
              file=sys.stderr, flush=True)
        return 1
    return 0


def _client_security(args: argparse.Namespace) -> Any:
    """TLS CA and bearer token of a client command, from --config / --config-file."""
    from router.security import Security

    try:
        return Security.from_properties(build_properties(args, {}))
    except ValueError as e:
        raise StreamsException(str(e)) from e


def cmd_get(args: argparse.Namespace) -> int:
    import grpc

    from router.client import QueryClient

    with QueryClient(args.target, timeout=args.timeout, security=_client_security(args)) as client:
        try:
            r = client.get(args.store, args.key, allow_stale=args.allow_stale, max_lag=args.max_lag,
                           position=args.position or "")
        except grpc.RpcError as e:
            print(json.dumps({"error": e.code().name, "message": e.details()}), flush=True)
            return 2
    print(json.dumps({"store": args.store, "key": args.key, "found": r.found, "value": r.json_value,
                      "metadata": r.metadata}), flush=True)
    return 0


def cmd_scan(args: argparse.Namespace) -> int:
    """One JSON line per entry (key, value, partition), then one summary line: whether every
    partition answered, each partition's read metadata or reason."""
    import grpc

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
        try:
            for item in scan:
                print(json.dumps({"key": json.loads(item.key_json), "value": json.loads(item.value_json),
                                  "partition": item.partition}), flush=True)
        except grpc.RpcError as e:
            print(json.dumps({"error": e.code().name, "message": e.details()}), flush=True)
            return 2
    print(json.dumps({"store": args.store, "complete": scan.complete, "missing": scan.missing,
                      "partitions": [scan.partitions[p] for p in sorted(scan.partitions)]}), flush=True)
    return 0


def cmd_metadata(args: argparse.Namespace) -> int:
    from google.protobuf.json_format import MessageToDict

    from router.client import QueryClient

    with QueryClient(args.target, timeout=args.timeout, security=_client_security(args)) as client:
        reply = client.metadata()
    print(json.dumps(MessageToDict(reply, always_print_fields_with_no_presence=True), indent=2), flush=True)
    return 0


def cmd_gateway(args: argparse.Namespace) -> int:
    from router.gateway import GatewayConfig, run_gateway

    seeds = tuple(s.strip() for s in (args.seeds or "").split(",") if s.strip())
    security = _client_security(args)
    try:
        config = GatewayConfig(seeds, args.bootstrap or "", args.application_id or "", args.timeout,
                               security=security)
    except ValueError as e:
        raise StreamsException(str(e)) from e
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
    from devtools import broker as devbroker  # dev tooling, imported only for this subcommand

    data_dir = Path(args.data_dir)
    if args.action == "start":
        h = devbroker.start_broker(data_dir, port=args.port)
        print(h.bootstrap, flush=True)
    elif args.action == "stop":
        print("stopped" if devbroker.stop_broker(data_dir) else "not running", flush=True)
    else:
        h2 = devbroker.broker_status(data_dir)
        print(f"running at {h2.bootstrap} (pid {h2.pid})" if h2 else "not running", flush=True)
        return 0 if h2 else 1
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from devtools.demo import run_demo  # dev tooling, imported only for this subcommand

    return run_demo(Path(args.data_dir), lines=args.lines, exit_when_ready=args.exit_when_ready,
                    gateway_port=args.gateway_port, feed_rate=args.feed_rate)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="iqmesh", description=__doc__)
    ap.add_argument("--log-level", default="WARNING")
    sub = ap.add_subparsers(dest="command", required=True)

    p = sub.add_parser("run", help="run one instance of an application until SIGTERM")
    p.add_argument("app", help="application with build() -> Topology: a file (examples/wordcount.py) or an "
                   "importable module (examples.wordcount)")
    p.add_argument("--application-id")
    p.add_argument("--instance-id", help="client.id: this instance's name in the cluster metadata "
                   "(static membership is --config group.instance.id=NAME)")
    p.add_argument("--bootstrap", help="bootstrap.servers")
    p.add_argument("--grpc-port", type=int, help="port of the query server (application.server port)")
    p.add_argument("--advertised-host", default="127.0.0.1", help="host part of application.server")
    p.add_argument("--state-dir", help="state.dir")
    _add_config_args(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("get", help="query one key through any instance")
    p.add_argument("--target", required=True, help="HOST:PORT of any instance")
    p.add_argument("--store", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--allow-stale", action="store_true")
    p.add_argument("--max-lag", type=int, default=-1)
    p.add_argument("--position", help="consistency token from an earlier reply")
    p.add_argument("--timeout", type=float, default=10.0)
    _add_config_args(p)
    p.set_defaults(func=cmd_get)

    for name, what in (("range", "entries from --from to --to (inclusive, by serialized key)"),
                       ("prefix", "entries whose key starts with --prefix"), ("all", "every entry of a store")):
        p = sub.add_parser(name, help=f"{what}, across every partition; JSON lines")
        p.add_argument("--target", required=True, help="HOST:PORT of any instance")
        p.add_argument("--store", required=True)
        if name == "range":
            p.add_argument("--from", dest="from_key", help="first key (default: unbounded)")
            p.add_argument("--to", dest="to_key", help="last key (default: unbounded)")
        if name == "prefix":
            p.add_argument("--prefix", required=True)
        p.add_argument("--limit", type=int, help="entries in all (default: every one)")
        p.add_argument("--page-size", type=int, default=0, help="entries per call (default: the server's)")
        p.add_argument("--allow-stale", action="store_true")
        p.add_argument("--max-lag", type=int, default=-1)
        p.add_argument("--position", help="consistency token from an earlier reply")
        p.add_argument("--require-complete", action="store_true",
                       help="fail rather than leave out partitions that cannot answer")
        p.add_argument("--timeout", type=float, default=10.0, help="seconds per page")
        _add_config_args(p)
        p.set_defaults(func=cmd_scan)

    p = sub.add_parser("metadata", help="print the routing table as JSON")
    p.add_argument("--target", required=True)
    p.add_argument("--timeout", type=float, default=10.0)
    _add_config_args(p)
    p.set_defaults(func=cmd_metadata)

    p = sub.add_parser("gateway", help="REST gateway and dashboard over the instances of an application")
    p.add_argument("--bootstrap", help="bootstrap.servers: find the instances in the application's instances topic")
    p.add_argument("--application-id", help="with --bootstrap: the application whose instances to serve")
    p.add_argument("--seeds", help="or HOST:PORT,... of instances to ask (the others are learned from them)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call to an instance")
    _add_config_args(p)
    p.set_defaults(func=cmd_gateway)

    from analytics.snapshot.options import add_arguments as snapshot_arguments  # stdlib only: no pyspark here

    p = sub.add_parser("snapshot", help="PySpark job: a consistent snapshot of every store of an application "
                       "as Parquet + manifest.json (needs the analytics extra and Java 17)")
    snapshot_arguments(p)
    p.set_defaults(func=cmd_snapshot)

    p = sub.add_parser("describe", help="print the topology of an application (file or module)")
    p.add_argument("app", help="a file (examples/wordcount.py) or an importable module (examples.wordcount)")
    p.set_defaults(func=cmd_describe)

    p = sub.add_parser("broker", help="the embedded dev broker (noida-db)")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--port", type=int)
    p.add_argument("--data-dir", default=".iqmesh/broker")
    p.set_defaults(func=cmd_broker)

    p = sub.add_parser("demo", help="broker + 3 word-count instances + sample text + the REST gateway and "
                       "dashboard; prints how to query")
    p.add_argument("--data-dir", default=".iqmesh/demo")
    p.add_argument("--lines", type=int, default=2000)
    p.add_argument("--exit-when-ready", action="store_true", help="verify, print, stop everything")
    p.add_argument("--gateway-port", type=int, default=8080, help="of the dashboard (a free one if taken)")
    p.add_argument("--feed-rate", type=int, default=20, help="lines/s fed while the demo runs (0: none)")
    p.set_defaults(func=cmd_demo)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        return int(args.func(args))
    except StreamsException as e:
        print(f"iqmesh: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
