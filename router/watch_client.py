"""A watch as the client sees it: the changes of a store, decoded with its serdes, for as long as
the caller iterates.

The instance serving the stream reads the store's changelog, so a rebalance does not interrupt it
(it sends a routing event instead). If that instance itself goes away, the iterator calls another
one (those the routing table lists) with the last resume token, so nothing is missed or repeated,
and yields a :class:`RoutingChange` saying so.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from router.rpc import iqmesh_pb2 as pb
from router.scan_pages import decode_serde

#: gRPC codes after which another instance is asked with the last token (the instance went away,
#: is shutting down, or serves as many watches as it may)
_RECONNECT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.RESOURCE_EXHAUSTED,
                        grpc.StatusCode.ABORTED})
RECONNECTED = "RECONNECTED"
OWNER_CHANGED = "OWNER_CHANGED"


@dataclass(frozen=True)
class Change:
    """One committed change: ``deleted`` (and ``value`` None) for a tombstone. ``resume_token``
    resumes right after it; ``key_json``/``value_json`` with ``with_json``."""

    key: Any
    value: Any
    deleted: bool
    partition: int
    offset: int
    timestamp_ms: int
    resume_token: str
    key_json: str = ""
    value_json: str = ""


@dataclass(frozen=True)
class RoutingChange:
    """OWNER_CHANGED: the active owner of ``partition`` changed (a rebalance); RECONNECTED: the
    instance serving the watch went away and ``owner`` (instance id at ``endpoint``) serves it now
    (``partition`` -1)."""

    reason: str
    partition: int
    previous_owner: str
    owner: str
    endpoint: str


WatchItem = Change | RoutingChange
#: opens the stream of ``request`` at ``endpoint`` with a deadline (None: none)
OpenCall = Callable[[str, pb.WatchRequest, float | None], Any]


class Watch:
    """Iterating yields :class:`Change` and :class:`RoutingChange` items until ``timeout`` seconds
    have passed (None: for ever), :meth:`close` is called, or an error the cluster answers
    (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION: ``grpc.RpcError``). If no instance can
    serve it for ``reconnect_timeout`` seconds, the last error is raised."""

    def __init__(self, open_call: OpenCall, endpoints: Callable[[], list[str]], request: pb.WatchRequest,
                 timeout: float | None = None, reconnect_timeout: float = 30.0) -> None:
        self._open = open_call
        self._endpoints = endpoints
        self._request = request
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._reconnect_timeout = reconnect_timeout
        self._call: Any = None
        self._closed = False
        #: resumes after the last item (a change, or progress the server reported); "" until the
        #: stream started
        self.resume_token = request.resume_token
        #: where this watch started (the request's token, else the first header's)
        self.start_token = request.resume_token
        self.served_by = ""
        self.endpoint = ""
        self.key_serde = ""
        self.value_serde = ""
        self.partitions: list[int] = []
        self._kd: Callable[[bytes], Any] = bytes
        self._vd: Callable[[bytes], Any] = bytes

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _left(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def __iter__(self) -> Iterator[WatchItem]:
        previous = ""
        failed_at: float | None = None
        last_error: grpc.RpcError | None = None
        tried: set[str] = set()
        while not self._closed:
            left = self._left()
            if left is not None and left <= 0:
                return
            endpoint = next((e for e in self._endpoints() if e not in tried), None)
            if endpoint is None:  # every one failed this round: wait a little, then again
                if failed_at is not None and time.monotonic() - failed_at > self._reconnect_timeout:
                    if last_error is not None:
                        raise last_error
                    raise ConnectionError(f"no instance could serve the watch for {self._reconnect_timeout}s")
                tried.clear()
                time.sleep(0.5)
                continue
            req = pb.WatchRequest()
            req.CopyFrom(self._request)
            req.resume_token = self.resume_token
            try:
                self._call = self._open(endpoint, req, left)
                if self._closed:  # closed while the call was being opened
                    self._call.cancel()
                for reply in self._call:
                    part = reply.WhichOneof("part")
                    if part == "header":
                        yield from self._header(reply.header, endpoint, previous)
                        failed_at, tried = None, set()
                    elif part == "changes":
                        yield from self._changes(reply.changes.changes)
                    elif part == "routing":
                        r = reply.routing
                        yield RoutingChange(OWNER_CHANGED, r.partition, r.previous_owner, r.owner, r.endpoint)
                    elif part == "progress":
                        self.resume_token = reply.progress.resume_token
                # a watch never ends on its own: the instance that ended it is going away
            except grpc.RpcError as e:
                code = e.code()
                if self._closed or code is grpc.StatusCode.DEADLINE_EXCEEDED:
                    return
                if code not in _RECONNECT:
                    raise
                last_error = e
            finally:
                self._call = None
            tried.add(endpoint)
            if failed_at is None:
                failed_at = time.monotonic()
            previous = self.served_by or previous

    def _header(self, h: pb.WatchHeader, endpoint: str, previous: str) -> Iterator[WatchItem]:
        first = not self.served_by
        self.served_by, self.endpoint = h.served_by, endpoint
        self.key_serde, self.value_serde = h.key_serde, h.value_serde
        self.partitions = list(h.partitions)
        self._kd = decode_serde(h.key_serde).deserialize
        self._vd = decode_serde(h.value_serde).deserialize
        if not self.resume_token:
            self.resume_token = self.start_token = h.resume_token
        if not first:
            yield RoutingChange(RECONNECTED, -1, previous, h.served_by, endpoint)

    def _changes(self, changes: Any) -> Iterator[Change]:
        kd, vd = self._kd, self._vd
        for c in changes:
            self.resume_token = c.resume_token
            yield Change(kd(c.key), None if c.deleted else vd(c.value), c.deleted, c.partition, c.offset,
                         c.timestamp_ms, c.resume_token, c.key_json, c.value_json)


def watch_request(store: str, key: pb.Key | None = None, prefix: pb.Key | None = None, all_keys: bool = False,
                  resume_token: str = "", from_beginning: bool = False, with_json: bool = False) -> pb.WatchRequest:
    """The request of a watch of exactly one of: ``key``, ``prefix``, ``all_keys``."""
    if (key is not None) + (prefix is not None) + bool(all_keys) != 1:
        raise ValueError("watch exactly one of: a key, a prefix, or all keys")
    req = pb.WatchRequest(store=store, resume_token=resume_token, from_beginning=from_beginning, with_json=with_json)
    if key is not None:
        req.key.CopyFrom(key)
    elif prefix is not None:
        req.prefix.CopyFrom(prefix)
    else:
        req.all = True
    return req


class Endpoints:
    """The instances a watch may ask: the ``seeds`` first, then every live instance the routing
    table of the first seed that answers lists (asked again each time the list is wanted, which is
    only when an instance went away)."""

    def __init__(self, stub: Callable[[str], Any], seeds: list[str], timeout: float = 5.0) -> None:
        self._stub = stub
        self._seeds = list(seeds)
        self._timeout = timeout
        self._known: list[str] = []

    def __call__(self) -> list[str]:
        for seed in [*self._seeds, *self._known]:
            try:
                md = self._stub(seed).Metadata(pb.MetadataRequest(), timeout=self._timeout)
            except grpc.RpcError:
                continue
            self._known = [i.endpoint for i in md.instances if i.alive and i.endpoint]
            break
        return list(dict.fromkeys([*self._seeds, *self._known]))
