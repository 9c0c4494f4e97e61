"""The Python query client: call any instance; it routes the key to its owner, or scatters a
scan over every partition's owner and merges the answers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import grpc

from router.rpc import iqmesh_pb2 as pb
from router.rpc import iqmesh_pb2_grpc as pb_grpc
from router.scan_pages import Scan, ScanItem
from router.scan_wire import ScanRequest, method_of
from router.watch_client import Endpoints, Watch, watch_request

#: a key as the client takes it: text parsed with the store's key serde, the serialized bytes, or
#: any other value as its JSON text (numbers for int/long keys, objects for json keys)
KeyArg = str | bytes | int | float | dict[str, Any] | list[Any]


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


@dataclass(frozen=True)
class WindowsResult:
    """``windows``: (start ms, end ms, value decoded from JSON), as the store orders them."""

    windows: list[tuple[int, int, Any]]
    metadata: dict[str, Any]


def _windows(reply: pb.WindowFetchReply) -> WindowsResult:
    return WindowsResult([(w.start, w.end, json.loads(w.value_json)) for w in reply.windows],
                         metadata_to_dict(reply.metadata))


def metadata_to_dict(md: pb.ReadMetadata) -> dict[str, Any]:
    return {
        "served_by": md.served_by, "endpoint": md.endpoint, "role": md.role,
        "instance_state": md.instance_state, "partition": md.partition, "position": md.position,
        "end_offset": md.end_offset, "lag": md.lag, "stale": md.stale, "forwarded": md.forwarded,
        "position_token": md.position_token,
    }


def routing_table_to_dict(reply: pb.MetadataReply) -> dict[str, Any]:
    """The routing table as plain JSON: snake_case keys, numbers as numbers (protobuf's JSON mapping
    gives camelCase and int64 as strings), lists sorted."""
    return {
        "asked": reply.asked,
        "store_partitions": dict(sorted(reply.store_partitions.items())),
        "instances": [{
            "instance_id": i.instance_id, "endpoint": i.endpoint, "state": i.state, "alive": i.alive,
            "heartbeat_age_ms": i.heartbeat_age_ms, "active_tasks": sorted(i.active_tasks),
            "standby_tasks": sorted(i.standby_tasks), "restoring_tasks": sorted(i.restoring_tasks),
            "stores": [{"store": s.store, "partition": s.partition, "role": s.role, "position": s.position,
                        "end_offset": s.end_offset, "lag": s.lag}
                       for s in sorted(i.stores, key=lambda s: (s.store, s.partition, s.role))],
        } for i in reply.instances],
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
        req = pb.GetRequest(store=store, key=key, options=_options(allow_stale, max_lag, position))
        reply = self._pool.stub(self.target).Get(req, timeout=self.timeout)
        value = json.loads(reply.value_json) if reply.found else None
        return QueryResult(reply.found, value, metadata_to_dict(reply.metadata))

    def window_fetch(self, store: str, key: str, time_from: int, time_to: int, allow_stale: bool = False,
                     max_lag: int | None = None, position: str = "") -> WindowsResult:
        """The key's windows starting in ``[time_from, time_to]`` (ms) of a window store."""
        req = pb.WindowFetchRequest(store=store, key=key, time_from=time_from, time_to=time_to,
                                    options=_options(allow_stale, max_lag, position))
        return _windows(self._pool.stub(self.target).WindowFetch(req, timeout=self.timeout))

    def session_fetch(self, store: str, key: str, allow_stale: bool = False, max_lag: int | None = None,
                      position: str = "") -> WindowsResult:
        """The key's sessions of a session store."""
        req = pb.SessionFetchRequest(store=store, key=key, options=_options(allow_stale, max_lag, position))
        return _windows(self._pool.stub(self.target).SessionFetch(req, timeout=self.timeout))

    # -- scans: iterators over every partition of a store, paging transparently ----------------
    def multi_get(self, store: str, keys: Iterable[KeyArg], **opts: Any) -> Scan:
        """The values of ``keys`` (each once, in key-byte order; a missing key has found=False)."""
        return self._scan(pb.MultiGetRequest(store=store, keys=[_key(k) for k in keys]), **opts)

    def range(self, store: str, from_key: KeyArg | None = None, to_key: KeyArg | None = None,
              **opts: Any) -> Scan:
        """Entries with ``from_key <= key <= to_key`` by serialized key (None: unbounded)."""
        req = pb.RangeRequest(store=store)
        if from_key is not None:
            req.from_key.CopyFrom(_key(from_key))
        if to_key is not None:
            req.to_key.CopyFrom(_key(to_key))
        return self._scan(req, **opts)

    def prefix_scan(self, store: str, prefix: KeyArg, **opts: Any) -> Scan:
        """Entries whose serialized key starts with the serialized ``prefix``."""
        return self._scan(pb.PrefixScanRequest(store=store, prefix=_key(prefix)), **opts)

    def all(self, store: str, **opts: Any) -> Scan:
        """Every entry of ``store``."""
        return self._scan(pb.AllRequest(store=store), **opts)

    def _scan(self, request: ScanRequest, *, page_size: int = 0, limit: int | None = None,
              allow_stale: bool = False, max_lag: int | None = None, position: str = "",
              require_complete: bool = False, with_json: bool = False, page_token: str = "") -> Scan:
        """``page_size``: entries per call (0: the server's default); ``limit``: entries in all;
        ``page_token``: resume an earlier run of the same query (its ``Scan.next_page_token``);
        the read options as :meth:`get`; ``require_complete``: fail (UNAVAILABLE) rather than
        leave out partitions that cannot answer; ``with_json``: also the server's JSON text."""
        request.options.CopyFrom(_options(allow_stale, max_lag, position))
        request.scan.require_complete = require_complete
        request.scan.with_json = with_json
        method = getattr(self._pool.stub(self.target), method_of(request))
        return Scan(lambda r: method(r, timeout=self.timeout), request, page_size, limit, page_token)

    def watch(self, store: str, key: KeyArg | None = None, *, prefix: KeyArg | None = None, all_keys: bool = False,
              resume_token: str = "", from_beginning: bool = False, with_json: bool = False,
              timeout: float | None = None) -> Watch:
        """The committed changes of one key, a prefix or every key of ``store`` as they happen
        (router/watch_client.py); ``timeout``: stop after that many seconds (None: never)."""
        req = watch_request(store, None if key is None else _key(key), None if prefix is None else _key(prefix),
                            all_keys, resume_token, from_beginning, with_json)
        stub = self._pool.stub
        return Watch(lambda endpoint, r, left: stub(endpoint).Watch(r, timeout=left),
                     Endpoints(stub, [self.target], self.timeout), req, timeout)

    def metadata(self) -> pb.MetadataReply:
        return self._pool.stub(self.target).Metadata(pb.MetadataRequest(), timeout=self.timeout)

    def close(self) -> None:
        self._pool.close()

    def __enter__(self) -> QueryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _options(allow_stale: bool, max_lag: int | None, position: str) -> pb.QueryOptions:
    opts = pb.QueryOptions(allow_stale=allow_stale, position=position)
    if max_lag is not None and max_lag >= 0:
        opts.max_lag = max_lag
    return opts


def _key(k: KeyArg) -> pb.Key:
    if isinstance(k, bytes):
        return pb.Key(raw=k)
    if isinstance(k, str):
        return pb.Key(text=k)
    return pb.Key(text=json.dumps(k))


__all__ = ["ChannelPool", "QueryClient", "QueryResult", "Scan", "ScanItem", "Watch", "metadata_to_dict",
           "routing_table_to_dict"]
