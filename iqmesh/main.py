"""The ``iqmesh`` command: run, get, range, prefix, all, watch, metadata, gateway, snapshot, describe, broker,
topic, produce, consume, reset, demo.

One style for every command: results are JSON on stdout with snake_case keys and numbers as
numbers; an error is one line on stderr, ``iqmesh COMMAND: error: CODE: message`` (CODE a gRPC
status name for query errors), exit status 2, as argparse reports a bad command line.
"""

from __future__ import annotations

import argparse
import logging
import sys

from iqmesh import broker, demo, gateway, kafka, query, reset, run, snapshot
from iqmesh.errors import run_command
from iqmesh.options import HelpFormatter

DESCRIPTION = """Kafka Streams in Python, with stores that answer queries across the cluster.
Start with `iqmesh demo`; `iqmesh COMMAND --help` describes each command."""


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="iqmesh", description=DESCRIPTION, formatter_class=HelpFormatter)
    ap.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING or ERROR")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=help, description=help, formatter_class=HelpFormatter)

    # in the order `iqmesh --help` lists them
    run.add_run_parser(command)
    query.add_parsers(command)
    gateway.add_parser(command)
    snapshot.add_parser(command)
    run.add_describe_parser(command)
    broker.add_parser(command)
    kafka.add_parsers(command, HelpFormatter)
    reset.add_parser(command)
    demo.add_parser(command)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_command(args)


if __name__ == "__main__":
    sys.exit(main())
