"""Parts of every query reply: values as JSON text, and the read metadata of a local replica."""

from __future__ import annotations

import base64
import json
from typing import Any

from router.local_read import LocalReplica
from router.rpc import iqmesh_pb2 as pb
from router.tokens import PositionToken


def value_to_json(value: Any) -> str:
    """The reply's JSON value; bytes become a base64 string since JSON has no bytes."""
    if isinstance(value, bytes | bytearray):
        return json.dumps(base64.b64encode(value).decode())
    return json.dumps(value, separators=(",", ":"), default=str)


def read_metadata(store: str, replica: LocalReplica, served_by: str, endpoint: str,
                  instance_state: str) -> pb.ReadMetadata:
    """Who answered from which replica and how fresh it is (stale: see LocalReplica.is_stale).
    ``forwarded`` stays false: the instance that forwarded the query marks the reply (router.forward),
    so a routing client that asks the replica itself sees an answer without a hop."""
    return pb.ReadMetadata(
        served_by=served_by, endpoint=endpoint, role=replica.role.value, instance_state=instance_state,
        partition=replica.partition, position=replica.position, end_offset=replica.end_offset, lag=replica.lag,
        stale=replica.is_stale(instance_state),
        position_token=PositionToken(store, replica.partition, replica.position).encode())
