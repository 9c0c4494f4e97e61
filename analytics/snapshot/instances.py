"""The instances source: Spark tasks scan the live stores through the mesh's All stream, one task
per store partition, each with the routing client (router/client: entry instances, the one that
cannot be reached passed over for the next, pages, TLS and the token), which routes the scan to
the partition's active, or a standby with ``--allow-stale``, exactly as for any client.

Each task reports who served its partition, in which role, at which position and lag: one status
row per partition, kept apart by the driver for the manifest. Each page's position token bounds
the next, so a partition never goes back in time between pages (it may move forward while the
scan pages through a store that keeps changing: the manifest then shows a ``first_position``
below ``position``). A refusal (REBALANCING, ...) or a mesh that cannot be reached is asked again,
from the first page, until the timeout.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import grpc
import pyarrow as pa

from analytics.snapshot.columns import Layout
from analytics.snapshot.mesh import MeshAccess, retryable
from kernel.wire_enums import role_of, state_of
from router.client.client_core import Backoff, Deadline
from router.client.scan_pages import Scan

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PAGE = 10_000  # the servers' maximum


class PartitionUnavailable(RuntimeError):
    pass


def scan_partition(access: MeshAccess, store: str, partition: int,
                   position: str) -> tuple[list[bytes], list[bytes], dict[str, Any]]:
    """(keys, values, status) of one partition, bounded below by ``position`` (a token, or "")."""
    deadline, backoff = Deadline.within(access.timeout_s), Backoff(0.2, 1.0)
    with access.client(partition) as client:
        while True:
            scan = client.scan_partition(store, partition, allow_stale=access.allow_stale, position=position,
                                         page_size=PAGE)
            try:
                keys, values = [], []
                for item in scan:
                    keys.append(item.key)
                    values.append(item.value)
                return keys, values, status_row(scan, store, partition)
            except grpc.RpcError as e:
                last = f"{e.code().name} {e.details() or ''}"
                if not retryable(e):
                    raise PartitionUnavailable(f"{store}[{partition}]: {last}") from None
                pause = backoff.pause(deadline)
                if pause is None:
                    raise PartitionUnavailable(f"{store}[{partition}] could not be read within "
                                               f"{access.timeout_s:g}s; last: {last}") from None
            time.sleep(pause)


def status_row(scan: Scan, store: str, partition: int) -> dict[str, Any]:
    """What the manifest records of a partition: who served it, where it stood on the first and
    the last page."""
    report = scan.reports.get(partition)
    if report is None:
        raise PartitionUnavailable(f"{store}[{partition}]: the mesh's answer did not report the partition")
    first, md = report.first.metadata, report.last.metadata
    role = role_of(md.role)  # the manifest is JSON: the names, as plain text
    return {"partition": partition, "served_by": md.served_by, "endpoint": md.endpoint,
            "role": "" if role is None else role.value, "instance_state": state_of(md.instance_state).value,
            "position": max(first.position, md.position),
            "first_position": min(first.position, md.position), "end_offset": md.end_offset, "lag": md.lag,
            "stale": first.stale or md.stale, "position_token": md.position_token, "pages": scan.pages,
            "asked": scan.asked}


def scan_partitions(batches: Iterator[pa.RecordBatch], *, access: MeshAccess, store: str, layout: Layout,
                    tokens: dict[int, str]) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: each input row is a partition; out come its rows and one status row."""
    for b in batches:
        for p in b.column("partition").to_pylist():
            keys, values, status = scan_partition(access, store, p, tokens.get(p, ""))
            n = len(keys)
            yield from layout.batches(p, keys, values, [None] * n, [None] * n)
            yield layout.status_batch(p, json.dumps(status))


def scan_frame(spark: SparkSession, access: MeshAccess, store: str, partitions: int, layout: Layout,
               tokens: dict[int, str]) -> DataFrame:
    """Rows and status rows of every partition; materialized once (a mesh scan is not repeatable)."""
    desc = spark.createDataFrame(spark.sparkContext.parallelize([(p,) for p in range(partitions)], partitions),
                                 "partition INT")
    fn = functools.partial(scan_partitions, access=access, store=store, layout=layout, tokens=tokens)
    return desc.mapInArrow(fn, layout.ddl()).localCheckpoint(eager=True)
