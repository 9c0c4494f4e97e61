"""Parts of every query reply: values as JSON text, and the read metadata of a local replica."""

from __future__ import annotations

import base64
import functools
import json
from collections.abc import Callable
from typing import Any

from router.core.instance_state import State
from router.core.local_read import LocalReplica
from router.core.serdes import Serde
from router.core.tokens import PositionToken
from router.rpc import iqmesh_pb2 as pb

_JSON = json.JSONEncoder(separators=(",", ":"), default=str)


def value_to_json(value: Any) -> str:
    """The reply's JSON value; bytes become a base64 string since JSON has no bytes."""
    if type(value) is int:  # the commonest value (counts), not bool
        return str(value)
    if isinstance(value, bytes | bytearray):
        return json.dumps(base64.b64encode(value).decode())
    return _JSON.encode(value)


@functools.lru_cache(maxsize=4096)
def read_metadata(store: str, replica: LocalReplica, served_by: str, endpoint: str,
                  instance_state: State) -> pb.ReadMetadata:
    """Who answered from which replica and how fresh it is (stale: see LocalReplica.is_stale).
    ``forwarded`` stays false: the instance that forwarded the query marks the reply (router.client.forward),
    so a routing client that asks the replica itself sees an answer without a hop. Kept per
    replica state (a replica moves once per commit: most replies repeat the last one), so the
    message is shared: a reply takes a copy of it (``metadata=``), nobody changes it."""
    return pb.ReadMetadata(
        served_by=served_by, endpoint=endpoint, role=replica.role.value, instance_state=instance_state.name,
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
