"""``iqmesh run`` (one instance of an application until SIGTERM) and ``iqmesh describe`` (its
topology): the commands that load an application."""

from __future__ import annotations

import argparse
import signal
import threading
import time

from instance.error_line import report_error
from instance.errors import ConfigException
from iqmesh.options import CommandFactory, add_config_args, build_properties, port_number


def say(line: str) -> None:
    """One line of the instance's own story (states, restores), timestamped as the log lines are."""
    now = time.time()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(now))},{int(now * 1000) % 1000:03d} {line}",
          flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    from instance.app_loader import load_topology
    from instance.config import StreamsConfig
    from instance.runtime.kafka_streams import KafkaStreams
    from instance.runtime.metrics_http import MetricsServer
    from instance.runtime.restore import LoggingRestoreListener
    from instance.runtime.states import State
    from instance.server.health_http import start_health_server
    from instance.server.servicer import QueryServer
    from instance.startup_checks import check_advertised_endpoint, check_state_dir

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
    streams.restore_listener = LoggingRestoreListener(f"[{config.instance_id}]", say)
    server = QueryServer(streams, grpc_port)
    health_server = start_health_server(server.health, config.listen_host, config.health_port)  # kubelet probes
    metrics_server = (MetricsServer(streams.metrics, config.listen_host, config.metrics_port, config.security)
                      if config.metrics_port else None)
    done = threading.Event()

    def on_state(new: State, old: State) -> None:
        say(f"[{config.instance_id or config.application_id}] state {old.name} -> {new.name}")
        server.set_serving(new is State.RUNNING)
        if new in (State.ERROR, State.NOT_RUNNING):
            done.set()

    streams.set_state_listener(on_state)
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    server.start()
    try:
        check_advertised_endpoint(config)
    except ConfigException:
        server.stop()
        raise
    if metrics_server is not None:
        metrics_server.start()
    streams.start()
    say(f"[{config.instance_id}] serving queries on {config.application_server}")
    if metrics_server is not None:
        say(f"[{config.instance_id}] serving metrics on {config.listen_host}:{metrics_server.port}/metrics")
    while not done.wait(1.0):
        server.set_live(streams.is_live())
    failed = streams.state is State.ERROR
    if not streams.close(config.shutdown_timeout_ms / 1000):
        say(f"[{config.instance_id}] stopped after iqmesh.shutdown.timeout.ms={config.shutdown_timeout_ms} "
            "with its threads still closing: what they had not committed is redone by the next owner")
    server.stop()
    if health_server is not None:
        health_server.stop()
    if metrics_server is not None:
        metrics_server.stop()
    if failed:
        report_error("run", "STREAMS_ERROR", f"[{config.instance_id}] stopped: {streams.last_error}")
        return 2
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    from instance.app_loader import load_topology

    print(load_topology(args.app).describe(), end="", flush=True)
    return 0


def add_run_parser(command: CommandFactory) -> None:
    p = command("run", "run one instance of an application until SIGTERM")
    p.add_argument("app", help="application with build() -> Topology: a file (examples/wordcount.py) or an "
                   "importable module (examples.wordcount)")
    p.add_argument("--application-id", help="application.id: names the consumer group, internal topics and "
                   "state directory (required here or in --config/--config-file)")
    p.add_argument("--instance-id", help="client.id: this instance's name in the cluster metadata "
                   "(static membership is --config group.instance.id=NAME; default: application.server)")
    p.add_argument("--bootstrap", help="bootstrap.servers, HOST:PORT of the Kafka brokers (required here or "
                   "in --config/--config-file)")
    p.add_argument("--grpc-port", type=port_number, help="port of the query server (application.server port; "
                   "required unless application.server is set)")
    p.add_argument("--advertised-host", default="127.0.0.1", help="host part of application.server")
    p.add_argument("--state-dir", help="state.dir, where the RocksDB stores live (default: /tmp/iqmesh)")
    p.add_argument("--metrics-port", type=port_number, help="iqmesh.metrics.port: serve Prometheus /metrics (Kafka "
                   "Streams' metrics) over HTTP on this port, where the query server listens (default: off)")
    add_config_args(p)
    p.set_defaults(func=cmd_run)


def add_describe_parser(command: CommandFactory) -> None:
    p = command("describe", "print the topology of an application (file or module)")
    p.add_argument("app", help="a file (examples/wordcount.py) or an importable module (examples.wordcount)")
    p.set_defaults(func=cmd_describe)
