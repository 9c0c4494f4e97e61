"""The Python query client: call any instance; it routes the key to its owner."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from typing import Any

import grpc

from router.rpc import iqmesh_pb2 as pb
from router.rpc import iqmesh_pb2_grpc as pb_grpc


@dataclass(frozen=True)
class QueryResult:
    found: bool
    value: Any
    metadata: dict[str, Any]


class ChannelPool:
    """One gRPC channel per endpoint, shared by threads (channels are thread-safe)."""

    def __init__(self) -> None:
        self._stubs: dict[str, pb_grpc.InteractiveQueryStub] = {}
        self._channels: dict[str, grpc.Channel] = {}
        self._lock = threading.Lock()

    def stub(self, endpoint: str) -> pb_grpc.InteractiveQueryStub:
        s = self._stubs.get(endpoint)
        if s is None:
            with self._lock:
                s = self._stubs.get(endpoint)
                if s is None:
                    ch = grpc.insecure_channel(endpoint)
                    self._channels[endpoint] = ch
                    s = pb_grpc.InteractiveQueryStub(ch)
                    self._stubs[endpoint] = s
        return s

    def close(self) -> None:
        with self._lock:
            for ch in self._channels.values():
                ch.close()
            self._channels.clear()
            self._stubs.clear()


def metadata_to_dict(md: pb.ReadMetadata) -> dict[str, Any]:
    return {
        "served_by": md.served_by, "endpoint": md.endpoint, "role": md.role,
        "instance_state": md.instance_state, "partition": md.partition, "position": md.position,
        "end_offset": md.end_offset, "lag": md.lag, "stale": md.stale, "forwarded": md.forwarded,
        "position_token": md.position_token,
    }


class QueryClient:
    """``QueryClient("127.0.0.1:50051").get("counts", "kafka")``."""

    def __init__(self, target: str, timeout: float = 10.0) -> None:
        self.target = target
        self.timeout = timeout
        self._pool = ChannelPool()

    def get(self, store: str, key: str, allow_stale: bool = False, max_lag: int | None = None,
            position: str = "") -> QueryResult:
        """Raises ``grpc.RpcError``: NOT_FOUND (unknown store), UNAVAILABLE (details start with the
        reason: REBALANCING, NOT_ACTIVE, NOT_UP_TO_BOUND, NO_REPLICA_WITHIN_LAG, NOT_AVAILABLE)."""
        opts = pb.QueryOptions(allow_stale=allow_stale, position=position)
        if max_lag is not None and max_lag >= 0:
            opts.max_lag = max_lag
        req = pb.GetRequest(store=store, key=key, options=opts)
        reply = self._pool.stub(self.target).Get(req, timeout=self.timeout)
        value = json.loads(reply.value_json) if reply.found else None
        return QueryResult(reply.found, value, metadata_to_dict(reply.metadata))

    def metadata(self) -> pb.MetadataReply:
        return self._pool.stub(self.target).Metadata(pb.MetadataRequest(), timeout=self.timeout)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> QueryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
