"""``iqmesh broker start/stop/status``: a local broker, the dev broker (noida-db) or Apache Kafka
(instance/local)."""

from __future__ import annotations

import argparse
from pathlib import Path

from iqmesh.options import CommandFactory, HelpFormatter, port_number


def cmd_broker(args: argparse.Namespace) -> int:
    from instance.local import engines  # imported only for this subcommand

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


def add_parser(command: CommandFactory) -> None:
    p = command("broker", "a local broker: the embedded dev broker (noida-db) or Apache Kafka; start, stop, "
                "status")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action, what in (("start", "start the broker in the background (if not running) and print its "
                          "address"),
                         ("stop", "stop the broker of --data-dir (its data stays)"),
                         ("status", "say whether the broker of --data-dir runs (exit status 1 if not)")):
        a = actions.add_parser(action, help=what, description=what, formatter_class=HelpFormatter)
        if action == "start":
            a.add_argument("--port", type=port_number, help="Kafka port on 127.0.0.1 (default: a free one; with "
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
