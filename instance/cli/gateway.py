"""``iqmesh gateway``: the REST gateway and dashboard over the instances of an application."""

from __future__ import annotations

import argparse

from instance.cli.options import CommandFactory, add_config_args, build_properties, client_security, port_number
from instance.errors import ConfigException


def cmd_gateway(args: argparse.Namespace) -> int:
    from instance.kafka_clients import client_settings, is_client_setting
    from router.gateway import GatewayConfig, run_gateway

    seeds = tuple(s.strip() for s in (args.seeds or "").split(",") if s.strip())
    security = client_security(args)
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


def add_parser(command: CommandFactory) -> None:
    p = command("gateway", "REST gateway and dashboard over the instances of an application")
    p.add_argument("--bootstrap", help="bootstrap.servers: find the instances in the application's instances topic")
    p.add_argument("--application-id", help="with --bootstrap: the application whose instances to serve")
    p.add_argument("--seeds", help="or HOST:PORT,... of instances to ask (the others are learned from them)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    p.add_argument("--port", type=port_number, default=8080, help="port to serve HTTP on")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds per call to an instance")
    add_config_args(p)
    p.set_defaults(func=cmd_gateway)
