"""A watch as the client sees it: the changes of a store, decoded with its serdes, for as long as
the caller iterates.

The instance serving the stream reads the store's changelog, so a rebalance does not interrupt it
(it sends a routing event instead). If that instance itself goes away, the iterator calls another
one (those the routing table lists) with the last resume token, so nothing is missed or repeated,
and yields a :class:`RoutingChange` saying so. :class:`AsyncWatch` is the one loop that does it;
:class:`Watch` waits for it on the sync client's event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import grpc

from kernel.application_guard import is_wrong_application
from kernel.rpc import iqmesh_pb2 as pb
from router.client.client_core import KeyArg, as_call, key_message
from router.client.scan_pages import decode_serde

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


@dataclass(frozen=True)
class Started:
    """The watch started: what the first instance serving it said (its header)."""

    served_by: str
    endpoint: str
    key_serde: str
    value_serde: str
    partitions: tuple[int, ...]
    resume_token: str


@dataclass(frozen=True)
class Progress:
    """Nothing matched lately; the watch's position moved on to ``resume_token``."""

    resume_token: str


class WatchNotStarted(ConnectionError):
    """No instance started the watch in ``start_rounds`` rounds: ``failures`` lists each instance
    asked in the last round and its error (None: its stream ended before the header)."""

    def __init__(self, failures: list[tuple[str, grpc.RpcError | None]]) -> None:
        super().__init__("; ".join(f"{e}: {err.details() if err is not None else 'the watch did not start'}"
                                   for e, err in failures) or "no instance to ask")
        self.failures = failures


WatchItem = Change | RoutingChange
#: what :meth:`AsyncWatch.events` yields: the items, and the start and progress of the watch
WatchEvent = WatchItem | Started | Progress
#: opens the stream of ``request`` at ``endpoint`` with a deadline (None: none)
OpenCall = Callable[[str, pb.WatchRequest, float | None], Any]


class _WatchBase:
    """What a watch keeps between calls: the resume token, who serves it, the serdes, and which
    instances were tried; the loop (:class:`AsyncWatch`) only opens calls and moves items."""

    def __init__(self, request: pb.WatchRequest, timeout: float | None, reconnect_timeout: float,
                 start_timeout: float | None, start_rounds: int | None = None) -> None:
        self._request = request
        self._start_rounds = start_rounds
        self._rounds = 0
        #: the instances that failed this round and their errors
        self._failures: list[tuple[str, grpc.RpcError | None]] = []
        self._all_events = False
        began = time.monotonic()
        self._deadline = None if timeout is None else began + timeout
        self._reconnect_timeout = reconnect_timeout
        self._start_by = None if start_timeout is None else began + start_timeout
        self._call: Any = None
        self._closed = False
        #: resumes after the last item handed to the caller (a change, or progress the server
        #: reported); "" until the stream started
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
        self._previous = ""
        self._failed_at: float | None = None
        self._last_error: grpc.RpcError | None = None
        self._tried: set[str] = set()

    def close(self) -> None:
        self._closed = True
        if self._call is not None:
            self._call.cancel()

    def _left(self) -> float | None:
        return None if self._deadline is None else self._deadline - time.monotonic()

    def _next(self, endpoints: list[str]) -> tuple[str, pb.WatchRequest, float | None] | float | None:
        """What to do next: ``(endpoint, request, seconds left)`` to open, a pause in seconds
        (every instance failed this round), or None to stop (closed, or the timeout passed).
        Raises the last error once no instance served the watch for ``reconnect_timeout``, or
        when none could start it by ``start_timeout`` (or before the timeout ended it)."""
        left = self._left()
        if self._closed:
            return None
        start_over = self._start_by is not None and time.monotonic() >= self._start_by
        if not self.served_by and self._last_error is not None and (start_over or (left is not None and left <= 0)):
            raise self._last_error
        if left is not None and left <= 0:
            return None
        endpoint = next((e for e in endpoints if e not in self._tried), None)
        if endpoint is None:
            self._rounds += 1
            if not self.served_by and self._start_rounds is not None and self._rounds >= self._start_rounds:
                raise WatchNotStarted(self._failures)
            self._failures = []
            if self._failed_at is not None and time.monotonic() - self._failed_at > self._reconnect_timeout:
                if self._last_error is not None:
                    raise self._last_error
                raise ConnectionError(f"no instance could serve the watch for {self._reconnect_timeout}s")
            self._tried.clear()
            return 0.5
        req = pb.WatchRequest()
        req.CopyFrom(self._request)
        req.resume_token = self.resume_token
        return endpoint, req, left

    def _items(self, reply: Any, endpoint: str) -> list[WatchEvent]:
        part = reply.WhichOneof("part")
        if part == "header":
            self._failed_at, self._tried, self._failures = None, set(), []
            return self._header(reply.header, endpoint)
        if part == "changes":
            return self._changes(reply.changes.changes)
        if part == "routing":
            r = reply.routing
            return [RoutingChange(OWNER_CHANGED, r.partition, r.previous_owner, r.owner, r.endpoint)]
        if part == "progress":
            self.resume_token = reply.progress.resume_token
            if self._all_events:
                return [Progress(self.resume_token)]
        return []

    def _ended(self, endpoint: str, error: grpc.RpcError | None) -> bool:
        """The call to ``endpoint`` ended (a watch never ends on its own: the instance is going
        away); False: stop (closed, or the deadline passed). Raises what another instance would
        answer the same way (NOT_FOUND, INVALID_ARGUMENT, ...)."""
        if error is not None:
            code = error.code()
            if self._closed or code is grpc.StatusCode.DEADLINE_EXCEEDED:
                return False
            if code not in _RECONNECT and not is_wrong_application(error):
                raise error
            self._last_error = error
        self._tried.add(endpoint)
        self._failures.append((endpoint, error))
        if self._failed_at is None:
            self._failed_at = time.monotonic()
        self._previous = self.served_by or self._previous
        return True

    def _handed(self, item: WatchEvent) -> None:
        """``item`` goes to the caller now: the token resumes right after it."""
        if isinstance(item, Change):
            self.resume_token = item.resume_token

    def _header(self, h: pb.WatchHeader, endpoint: str) -> list[WatchEvent]:
        first = not self.served_by
        self.served_by, self.endpoint = h.served_by, endpoint
        self.key_serde, self.value_serde = h.key_serde, h.value_serde
        self.partitions = list(h.partitions)
        self._kd = decode_serde(h.key_serde).deserialize
        self._vd = decode_serde(h.value_serde).deserialize
        if not self.resume_token:
            self.resume_token = self.start_token = h.resume_token
        if not first:
            return [RoutingChange(RECONNECTED, -1, self._previous, h.served_by, endpoint)]
        if self._all_events:
            return [Started(h.served_by, endpoint, h.key_serde, h.value_serde, tuple(h.partitions), h.resume_token)]
        return []

    def _changes(self, changes: Any) -> list[WatchEvent]:
        kd, vd = self._kd, self._vd
        out: list[WatchEvent] = []
        for c in changes:  # the resume token moves as each is handed over (_handed)
            out.append(Change(kd(c.key), None if c.deleted else vd(c.value), c.deleted, c.partition, c.offset,
                              c.timestamp_ms, c.resume_token, c.key_json, c.value_json))
        return out


class AsyncWatch(_WatchBase):
    """Iterating (``async for``) yields :class:`Change` and :class:`RoutingChange` items until
    ``timeout`` seconds have passed (None: for ever), :meth:`close` is called, or an error the
    cluster answers (NOT_FOUND, INVALID_ARGUMENT, FAILED_PRECONDITION: ``grpc.RpcError``). If no
    instance can serve it for ``reconnect_timeout`` seconds, or none starts it within
    ``start_timeout`` (None: the reconnect timeout), the last error is raised; with
    ``start_rounds``, :class:`WatchNotStarted` once every instance failed to start it that many
    times. ``resume_token`` never runs ahead of the items handed over: stopping early loses
    nothing to a resume."""

    def __init__(self, open_call: OpenCall, endpoints: Callable[[], Awaitable[list[str]]],
                 request: pb.WatchRequest, timeout: float | None = None, reconnect_timeout: float = 30.0,
                 start_timeout: float | None = None, start_rounds: int | None = None) -> None:
        super().__init__(request, timeout, reconnect_timeout, start_timeout, start_rounds)
        self._open = open_call
        self._endpoints = endpoints
        self._refresh: asyncio.Future[list[str]] | None = None

    async def __aenter__(self) -> AsyncWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    def __aiter__(self) -> AsyncGenerator[WatchItem, None]:
        return cast(AsyncGenerator[WatchItem, None], self._run())

    def events(self) -> AsyncGenerator[WatchEvent, None]:
        """The items, and also when the watch started (:class:`Started`, first) and how far it
        read while nothing matched (:class:`Progress`): what a relay of the stream (the REST
        gateway's SSE) passes on."""
        self._all_events = True
        return self._run()

    async def _run(self) -> AsyncGenerator[WatchEvent, None]:
        while (step := self._next(await self._endpoints())) is not None:
            if isinstance(step, float):
                await asyncio.sleep(step)
                continue
            endpoint, req, left = step
            error = None
            try:
                self._call = self._open(endpoint, req, left)
                if self._closed:
                    self._call.cancel()
                async for reply in self._call:
                    if reply.WhichOneof("part") == "header":
                        # ask the instance now serving the watch whom else to ask should it go away:
                        # the list from before may be empty (its first Metadata may have failed),
                        # and then a watch whose only seed went away has nowhere to go on
                        self._refresh = asyncio.ensure_future(self._endpoints())
                    for item in self._items(reply, endpoint):
                        self._handed(item)
                        yield item
            except grpc.RpcError as e:
                error = e
            except asyncio.CancelledError:
                if not self._closed:
                    raise
            finally:
                self._call = None
            if not self._ended(endpoint, error):
                return


def watch_request(store: str, key: pb.Key | KeyArg | None = None, prefix: pb.Key | KeyArg | None = None,
                  all_keys: bool = False, resume_token: str = "", from_beginning: bool = False,
                  with_json: bool = False) -> pb.WatchRequest:
    """The request of a watch of exactly one of: ``key``, ``prefix``, ``all_keys``."""
    if (key is not None) + (prefix is not None) + bool(all_keys) != 1:
        raise ValueError("watch exactly one of: a key, a prefix, or all keys")
    req = pb.WatchRequest(store=store, resume_token=resume_token, from_beginning=from_beginning, with_json=with_json)
    if key is not None:
        req.key.CopyFrom(key if isinstance(key, pb.Key) else key_message(key))
    elif prefix is not None:
        req.prefix.CopyFrom(prefix if isinstance(prefix, pb.Key) else key_message(prefix))
    else:
        req.all = True
    return req


def watch_of(stub: Callable[[str], Any], seeds: Callable[[], Sequence[str]], start_timeout: float, store: str,
             key: KeyArg | None, prefix: KeyArg | None, all_keys: bool, resume_token: str, from_beginning: bool,
             with_json: bool, timeout: float | None) -> AsyncWatch:
    """A client's watch (both clients'): over aio ``stub``s, from the ``seeds`` and the live
    instances their routing table lists; the arguments are :func:`watch_request`'s."""
    req = watch_request(store, key, prefix, all_keys, resume_token, from_beginning, with_json)
    return AsyncWatch(lambda endpoint, r, left: stub(endpoint).Watch(r, timeout=left),
                      AsyncEndpoints(stub, seeds, start_timeout), req, timeout, start_timeout=start_timeout)


class AsyncEndpoints:
    """The instances a watch may ask: the ``seeds`` first, then every instance the routing table
    of the first seed that answers lists, the live ones first (asked again each time the list is
    wanted: when an instance went away, and when a watch starts on one). ``await endpoints()``."""

    def __init__(self, stub: Callable[[str], Any], seeds: Callable[[], Sequence[str]], timeout: float = 5.0) -> None:
        self._stub = stub
        self._seeds = seeds
        self._timeout = timeout
        self._known: list[str] = []

    async def __call__(self) -> list[str]:
        for seed in self._asked():
            try:
                md = await self._stub(seed).Metadata(pb.MetadataRequest(), timeout=self._timeout)
            except grpc.RpcError:
                continue
            # the live ones first, then the rest: "alive" is a heartbeat seen lately, and a busy
            # instance's may be late; asking one that is gone costs a refused connection
            self._known = [i.endpoint for i in sorted(md.instances, key=lambda i: not i.alive) if i.endpoint]
            break
        return list(dict.fromkeys(self._asked()))

    def _asked(self) -> list[str]:
        return [*self._seeds(), *self._known]


class Watch:
    """:class:`AsyncWatch` for callers without an event loop: iterating yields the same items,
    each waited for on the loop ``run`` runs coroutines on (the sync query client's own);
    :meth:`close` may be called from any thread; a gRPC error is a finished ``grpc.Call``, as the
    blocking calls raise. The watch's state (``resume_token``, ``served_by``...) is the async watch's."""

    def __init__(self, watch: AsyncWatch, run: Callable[[Coroutine[Any, Any, Any]], Any],
                 call_soon: Callable[[Callable[[], object]], None]) -> None:
        self._watch = watch
        self._run = run
        self._call_soon = call_soon

    def __getattr__(self, name: str) -> Any:
        if name in _STATE:
            return getattr(self._watch, name)
        raise AttributeError(name)

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._call_soon(self._watch.close)

    def __iter__(self) -> Iterator[WatchItem]:
        items = self._watch.__aiter__()
        try:
            while True:
                try:
                    item = self._run(_next(items))
                except StopAsyncIteration:
                    return
                except grpc.RpcError as e:
                    raise as_call(e) from None
                yield item
        finally:
            with contextlib.suppress(RuntimeError):  # the client's loop is closed already
                self._run(items.aclose())


async def _next(items: AsyncGenerator[WatchItem, None]) -> WatchItem:
    return await anext(items)


#: what a :class:`Watch` shows of its async watch
_STATE = frozenset({"resume_token", "start_token", "served_by", "endpoint", "key_serde", "value_serde", "partitions"})
