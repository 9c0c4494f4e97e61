"""``iqmesh demo``: a broker, three word-count instances, sample text and the gateway
(instance/local/demo.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from iqmesh.options import CommandFactory, port_number


def cmd_demo(args: argparse.Namespace) -> int:
    from instance.local.demo import run_demo  # imported only for this subcommand

    return run_demo(Path(args.data_dir), lines=args.lines, exit_when_ready=args.exit_when_ready,
                    gateway_port=args.gateway_port, feed_rate=args.feed_rate)


def add_parser(command: CommandFactory) -> None:
    p = command("demo", "broker + 3 word-count instances + sample text + the REST gateway and "
                "dashboard; prints how to query")
    p.add_argument("--data-dir", default=".iqmesh/demo", help="broker data, instance state and logs")
    p.add_argument("--lines", type=int, default=2000, help="lines of sample text to count")
    p.add_argument("--exit-when-ready", action="store_true",
                   help="verify, print, stop what the demo started (default: keep running until Ctrl-C)")
    p.add_argument("--gateway-port", type=port_number, default=8080, help="of the dashboard (a free one if taken)")
    p.add_argument("--feed-rate", type=int, default=20, help="lines/s fed while the demo runs (0: none)")
    p.set_defaults(func=cmd_demo)
