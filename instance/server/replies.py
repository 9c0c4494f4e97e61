"""Parts of query replies: a local replica's answer with its read metadata, a scan's entries
(values as JSON text: kernel/serdes.value_to_json)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from instance.runtime.query.execute import ask
from instance.runtime.query.request import Query, StorePlacement
from kernel.instance_state import State
from kernel.local_read import LocalReplica
from kernel.options import QueryOptions
from kernel.rpc import iqmesh_pb2 as pb
from kernel.serdes import Serde, value_to_json
from kernel.tokens import PositionToken
from kernel.wire_enums import role_pb, state_pb

if TYPE_CHECKING:
    from instance.runtime.kafka_streams import KafkaStreams

R = TypeVar("R")


def ask_local(streams: KafkaStreams, placement: StorePlacement, query: Query[R], partition: int,
              options: QueryOptions) -> tuple[R, pb.ReadMetadata]:
    """``query`` answered by this instance's replica of ``partition`` (runtime/query/execute.py's
    :func:`ask`: UnavailableError when it may not answer), with its read metadata."""
    value, replica = ask(streams, placement, query, partition, options)
    return value, read_metadata(placement.store, replica, streams.instance_id, streams.config.application_server,
                                streams.state)

@functools.lru_cache(maxsize=4096)
def read_metadata(store: str, replica: LocalReplica, served_by: str, endpoint: str,
                  instance_state: State) -> pb.ReadMetadata:
    """Who answered from which replica and how fresh it is (stale: see LocalReplica.is_stale).
    ``forwarded`` stays false: the instance that forwarded the query marks the reply (router.client.forward),
    so a routing client that asks the replica itself sees an answer without a hop. Kept per
    replica state (a replica moves once per commit: most replies repeat the last one), so the
    message is shared: a reply takes a copy of it (``metadata=``), nobody changes it."""
    return pb.ReadMetadata(
        served_by=served_by, endpoint=endpoint, role=role_pb(replica.role), instance_state=state_pb(instance_state),
        partition=replica.partition, position=replica.position, end_offset=replica.end_offset, lag=replica.lag,
        stale=replica.is_stale(instance_state),
        position_token=PositionToken(store, replica.partition, replica.position).encode())


def scan_entry(value_serde: Serde, with_json: bool) -> Callable[[bytes, Any, Any, int], pb.ScanEntry]:
    """What a scan page's entries are built with: ``entry(key_bytes, key, value, partition)``
    (value None: a MULTI_GET key not found), JSON text too with ``with_json``."""
    vs = value_serde.serialize

    def entry(kb: bytes, key: Any, value: Any, partition: int) -> pb.ScanEntry:
        e = pb.ScanEntry(key=kb, partition=partition, found=value is not None)
        if value is not None:
            e.value = vs(value)  # type: ignore[assignment]
        if with_json:
            e.key_json = value_to_json(key)
            if value is not None:
                e.value_json = value_to_json(value)
        return e
    return entry
