"""The instances source: Spark tasks scan the live stores through the mesh's All stream, one task
per store partition, each asking any instance (which routes it to the partition's active, or a
standby with ``--allow-stale``, exactly as for any client).

Each task reports who served its partition, in which role, at which position and lag: one status
row per partition, kept apart by the driver for the manifest. The first page's position token
bounds the later pages, so a partition never goes back in time between pages (it may move
forward while the scan pages through a store that keeps changing: the manifest then shows a
``first_position`` below ``position``). A refusal (REBALANCING, ...) is retried until the
timeout; an instance that cannot be reached is skipped for the next one.
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
from router.core.scan_wire import read_stream
from router.core.status_details import refusal_of
from router.rpc import iqmesh_pb2 as pb
from router.rpc import iqmesh_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PAGE = 10_000  # the servers' maximum


class PartitionUnavailable(RuntimeError):
    pass


def scan_partition(store: str, partition: int, endpoints: list[str], allow_stale: bool, position: str,
                   timeout: float) -> tuple[list[bytes], list[bytes], dict[str, Any]]:
    """(keys, values, status) of one partition, asked of ``endpoints`` in turn."""
    if not endpoints:
        raise PartitionUnavailable(f"{store}[{partition}]: no live instance to ask")
    deadline = time.monotonic() + timeout
    order = endpoints[partition % len(endpoints):] + endpoints[:partition % len(endpoints)]
    last = ""
    while True:
        for ep in order:
            channel = grpc.insecure_channel(ep)
            try:
                return _pages(pb_grpc.InteractiveQueryStub(channel), store, partition, allow_stale, position,
                              timeout, ep)
            except grpc.RpcError as e:
                code, details = e.code(), e.details() or ""
                last = f"{ep}: {code.name} {details}"
                if code is grpc.StatusCode.UNAVAILABLE and refusal_of(e) is not None:
                    break  # the cluster's answer (REBALANCING...): the same from any entry; ask again later
                if code not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                    raise PartitionUnavailable(f"{store}[{partition}]: {last}") from None
            finally:
                channel.close()
        if time.monotonic() > deadline:
            raise PartitionUnavailable(f"{store}[{partition}] could not be read within {timeout}s; last: {last}")
        time.sleep(0.5)


def _pages(stub: pb_grpc.InteractiveQueryStub, store: str, partition: int, allow_stale: bool, position: str,
           timeout: float, asked: str) -> tuple[list[bytes], list[bytes], dict[str, Any]]:
    keys: list[bytes] = []
    values: list[bytes] = []
    token, bound, positions = "", position, []
    first: pb.ReadMetadata | None = None
    pages = 0
    while True:
        req = pb.AllRequest(store=store, options=pb.QueryOptions(allow_stale=allow_stale, position=bound),
                            scan=pb.ScanOptions(limit=PAGE, page_token=token, require_complete=True,
                                                partitions=[partition]))
        page = read_stream(stub.All(req, timeout=timeout))
        pages += 1
        md = next(s.metadata for s in page.partitions if s.partition == partition)
        first = first or md
        positions.append(md.position)
        if md.position_token and md.position >= 0:
            bound = md.position_token  # later pages: never older than this one
        for e in page.entries:
            keys.append(e.key)
            values.append(e.value)
        assert page.end is not None
        token = page.end.next_page_token
        if not token:
            break
    status = {"partition": partition, "served_by": md.served_by, "endpoint": md.endpoint, "role": md.role,
              "instance_state": md.instance_state, "position": max(positions), "first_position": min(positions),
              "end_offset": md.end_offset, "lag": md.lag, "stale": any([first.stale, md.stale]),
              "position_token": md.position_token, "pages": pages, "asked": asked}
    return keys, values, status


def scan_partitions(batches: Iterator[pa.RecordBatch], *, store: str, layout: Layout, endpoints: list[str],
                    allow_stale: bool, tokens: dict[int, str], timeout: float) -> Iterator[pa.RecordBatch]:
    """mapInArrow function: each input row is a partition; out come its rows and one status row."""
    for b in batches:
        for p in b.column("partition").to_pylist():
            keys, values, status = scan_partition(store, p, endpoints, allow_stale, tokens.get(p, ""), timeout)
            n = len(keys)
            yield from layout.batches(p, keys, list(values), [None] * n, [None] * n)
            yield layout.status_batch(p, json.dumps(status))


def scan_frame(spark: SparkSession, store: str, partitions: int, layout: Layout, endpoints: list[str],
               allow_stale: bool, tokens: dict[int, str], timeout: float) -> DataFrame:
    """Rows and status rows of every partition; materialized once (a mesh scan is not repeatable)."""
    desc = spark.createDataFrame(spark.sparkContext.parallelize([(p,) for p in range(partitions)], partitions),
                                 "partition INT")
    fn = functools.partial(scan_partitions, store=store, layout=layout, endpoints=endpoints,
                           allow_stale=allow_stale, tokens=tokens, timeout=timeout)
    return desc.mapInArrow(fn, layout.ddl()).localCheckpoint(eager=True)
