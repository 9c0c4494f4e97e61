"""``iqmesh snapshot``: the PySpark snapshot job (analytics/snapshot) with the same flags as under
spark-submit; PySpark is imported only when the command runs."""

from __future__ import annotations

import argparse

from iqmesh.options import CommandFactory


def cmd_snapshot(args: argparse.Namespace) -> int:
    from analytics.snapshot.job import run_from_args

    return run_from_args(args)


def add_parser(command: CommandFactory) -> None:
    from analytics.snapshot.options import add_arguments as snapshot_arguments  # stdlib only: no pyspark here

    p = command("snapshot", "PySpark job: a consistent snapshot of every store of an application "
                "as Parquet + manifest.json (needs the analytics extra and Java 17)")
    snapshot_arguments(p)
    p.set_defaults(func=cmd_snapshot)
