"""``iqmesh gateway``: the REST gateway and dashboard over the instances of an application."""

from __future__ import annotations

import argparse

from instance.errors import ConfigException
from iqmesh.options import CommandFactory, add_config_args, build_properties, client_security, port_number


def cmd_gateway(args: argparse.Namespace) -> int:
    from kernel.kafka_clients import client_settings, is_client_setting
    from router.gateway import GatewayConfig, run_gateway
    from router.gateway.instances_topic import READER_KIND

    seeds = tuple(s.strip() for s in (args.seeds or "").split(",") if s.strip())
    security = client_security(args)
    # the instances-topic reader is a consumer like the instances' own: the same Kafka settings
    props = build_properties(args, {})
    extra = {k: str(v) for k, v in props.items() if is_client_setting(k)}
    client_settings(extra, READER_KIND)  # one it cannot use is refused now (INVALID_CONFIG), seeds or not
    try:
        config = GatewayConfig(seeds, args.bootstrap or "", args.application_id or "", args.timeout,
                               security=security, kafka=extra)
    except ValueError as e:
        raise ConfigException(str(e)) from e
    if args.bootstrap:
        _check_kafka_settings(args.bootstrap, extra)
    run_gateway(config, args.host, args.port)
    return 0


def _check_kafka_settings(bootstrap: str, extra: dict[str, str]) -> None:
    """Credentials or a certificate the brokers refuse stop the start (ConfigException), as for
    ``iqmesh run``; brokers that do not answer yet do not: the gateway shows the outage and finds
    the instances once they are back."""
    import logging

    from instance.errors import BrokerUnreachableException
    from instance.runtime.reachability import reached_admin
    from kernel.kafka_clients import client_config

    try:
        reached_admin(client_config(bootstrap, extra, "admin"), bootstrap)
    except BrokerUnreachableException as e:
        logging.getLogger(__name__).warning("%s; serving all the same", e)


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
