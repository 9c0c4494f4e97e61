"""The query client's one core, free of any transport: what a client knows between calls (seeds,
entry choice, routing table) and each of its calls written as *steps* (generators that yield
what they need done: a gRPC call, a pause, a refresh of the table under the client's lock).

A driver runs the steps: :class:`router.client.sync_client.QueryClient` with blocking gRPC calls,
:class:`router.client.async_client.AsyncQueryClient` (and the REST gateway through it) with grpc.aio. So
routing (candidates from :class:`router.client.query_router.QueryRouter`), retries, suspects and the
deadline are written once, and neither driver pays for the other's transport (a blocking Get
stays one blocking gRPC call).

A Get goes straight to the replica the routing table names (marked ``forwarded``: it answers or
refuses, it never passes the query on), so a fresh table costs no hop. A refusal the cluster's
movement explains or an instance that cannot be reached makes the client fetch the table again and
retry with backoff while the caller's deadline allows (router.client.client_core has the policy).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from kernel.application_guard import is_wrong_application
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_wire import ScanRequest, method_of
from kernel.unavailable import UnavailableError
from router.client.client_core import (
    MAX_TABLE_AGE_S,
    RETRY_REASONS,
    Backoff,
    ClientError,
    Deadline,
    Entries,
    KeyArg,
    QueryResult,
    Seeds,
    WindowsResult,
    get_request,
    global_exhausted,
    is_retryable,
    is_unreachable,
    learn_application,
    needs_refresh,
    result_of,
    routing_options,
    session_request,
    unavailable,
    window_request,
    windows_of,
)
from router.client.forward import direct, raise_refusal
from router.client.query_router import QueryRouter
from router.client.routing_table import RoutingTable

T = TypeVar("T")


@dataclass(frozen=True)
class Rpc:
    """Call ``method`` of the InteractiveQuery service at ``endpoint``; the reply is sent back
    (a server stream read whole, as a list, when ``stream``), a gRPC error thrown back."""

    endpoint: str
    method: str
    request: Message
    timeout: float
    stream: bool = False


@dataclass(frozen=True)
class Pause:
    """Wait ``seconds`` (between retries)."""

    seconds: float


@dataclass(frozen=True)
class Refresh:
    """Fetch the routing table again unless another call did since ``seen`` was read: the driver
    runs :meth:`ClientCore.refresh` under its lock, so one call fetches and the others use it."""

    seen: RoutingTable | None
    deadline: Deadline


@dataclass(frozen=True)
class Probe:
    """Whether nothing listens at any of ``endpoints`` (every TCP connection refused): the driver
    answers with kernel.probe.nothing_listens, off the event loop in the async client."""

    endpoints: tuple[str, ...]


Step = Rpc | Pause | Refresh | Probe
#: a call as steps: yields what it needs done, is sent each result, returns its answer
Steps = Generator[Step, Any, T]


class Application(Protocol):
    """Who learns the application id the calls are meant for (a channel pool)."""

    application_id: str


class ClientCore:
    """What a query client keeps between calls, and its calls as :data:`Steps`. ``target``: the
    seed instances (``"h1:p1,h2:p2"``, a list, or a function giving them each time);
    ``application``: learns the application id from the first Metadata reply."""

    def __init__(self, target: str | Sequence[str] | Callable[[], Sequence[str]], timeout: float,
                 max_table_age: float, application: Application) -> None:
        self.seeds = Seeds(target)
        self.timeout = timeout
        self.max_table_age = max_table_age
        self.entries = Entries(self.seeds)
        self.table: RoutingTable | None = None
        self.stale = False
        self._application = application

    def get(self, store: str, key: KeyArg, allow_stale: bool = False, max_lag: int | None = None,
            position: str = "", timeout: float | None = None) -> Steps[QueryResult]:
        """The value of ``key``, from its active (or, with ``allow_stale``, a standby) replica.
        Raises ``grpc.RpcError``: NOT_FOUND (unknown store), INVALID_ARGUMENT, UNAVAILABLE (a
        refusal, its reason in the typed details: kernel.status_details.refusal_of) once the
        deadline leaves no time to retry."""
        deadline = Deadline.within(self.timeout if timeout is None else timeout)
        request = get_request(store, key, allow_stale, max_lag, position)
        options = routing_options(request)
        backoff = Backoff()
        while True:
            table = yield from self.fresh_table(deadline)
            task = table.task_of(store, key) if table is not None and options is not None else None
            try:
                if table is not None and table.is_global(store):
                    reply, asked = yield from self._ask_global(store, request, table, deadline)
                elif table is None or task is None or options is None:
                    reply, asked = yield from self.on_entry("Get", request, deadline)
                else:
                    def ask(endpoint: str | None) -> Steps[tuple[pb.GetReply, str]]:
                        assert endpoint is not None  # a client holds no replica of its own
                        reply = yield from self.ask_direct(endpoint, request, deadline.attempt_timeout(allow_stale))
                        return reply, endpoint
                    reply, asked = yield from QueryRouter(table.view, None).route_steps(store, task, options, ask)
                return result_of(reply, table, store, asked)
            except UnavailableError as e:
                self.stale = True
                pause = backoff.pause(deadline) if e.reason in RETRY_REASONS else None
                if pause is None:
                    raise unavailable(e) from None
            except grpc.RpcError as e:
                refused = yield from self._refused_before_any_table(e, table)
                pause = backoff.pause(deadline) if is_retryable(e) and not refused else None
                if pause is None:
                    raise
                self.stale = True
            yield Pause(pause)

    def _refused_before_any_table(self, e: grpc.RpcError, table: RoutingTable | None) -> Steps[bool]:
        """Before any instance answered, another application's server at the seeds or nothing
        listening at any of them (each TCP connection refused): no retry changes that while the
        client knows no other instance, so a Get fails at once (as the scans do)."""
        if table is not None:
            return False
        if is_wrong_application(e):
            return True
        if e.code() is not grpc.StatusCode.UNAVAILABLE or not is_unreachable(e):
            return False
        nothing: bool = yield Probe(tuple(self.entries.order(None)))
        return nothing

    def ask_direct(self, endpoint: str, request: pb.GetRequest, timeout: float) -> Steps[pb.GetReply]:
        """``endpoint`` answers ``request`` from its own replica or refuses (UnavailableError, as
        router.client.forward reads it); other gRPC errors raise as they are (router.client.forward.ask_get's steps)."""
        try:
            reply: pb.GetReply = yield Rpc(endpoint, "Get", direct(request), timeout)
        except grpc.RpcError as e:
            raise_refusal(endpoint, e)
        return reply

    def _ask_global(self, store: str, request: pb.GetRequest, table: RoutingTable,
                    deadline: Deadline) -> Steps[tuple[pb.GetReply, str]]:
        """A Get of a global store: the first instance that answers from its own copy (entry
        order), and its endpoint; one still loading it, or unreachable, passes to the next."""
        refused: list[UnavailableError] = []
        endpoints = self.entries.order(table)
        for endpoint in endpoints:
            try:
                reply = yield from self.ask_direct(endpoint, request, deadline.attempt_timeout(True))
            except UnavailableError as e:
                refused.append(e)
                continue
            self.entries.answered(endpoint)
            return reply, endpoint
        raise global_exhausted(store, refused, endpoints)

    def window_fetch(self, store: str, key: str, time_from: int, time_to: int, allow_stale: bool = False,
                     max_lag: int | None = None, position: str = "") -> Steps[WindowsResult]:
        """The key's windows starting in ``[time_from, time_to]`` (ms) of a window store, asked of
        an entry instance, which routes the key."""
        req = window_request(store, key, time_from, time_to, allow_stale, max_lag, position)
        reply, _ = yield from self.on_entry("WindowFetch", req, Deadline.within(self.timeout))
        return windows_of(reply)

    def session_fetch(self, store: str, key: str, allow_stale: bool = False, max_lag: int | None = None,
                      position: str = "") -> Steps[WindowsResult]:
        """The key's sessions of a session store, asked of an entry instance."""
        req = session_request(store, key, allow_stale, max_lag, position)
        reply, _ = yield from self.on_entry("SessionFetch", req, Deadline.within(self.timeout))
        return windows_of(reply)

    def scan_page(self, request: ScanRequest) -> Steps[tuple[list[pb.ScanReply], str]]:
        """One page of a scan, asked of an entry instance (which scatters it over every
        partition's owner), and that entry's endpoint."""
        return (yield from self.on_entry(method_of(request), request, Deadline.within(self.timeout), stream=True))

    def metadata(self) -> Steps[pb.MetadataReply]:
        """The routing table as the entry instance (the first seed that answers) sees it."""
        reply, _ = yield from self.on_entry("Metadata", pb.MetadataRequest(), Deadline.within(self.timeout))
        return reply

    def describe(self) -> Steps[pb.DescribeReply]:
        """The topology as the entry instance runs it, and the processing lag of every input
        partition (the group's committed offset against the end offset)."""
        reply, _ = yield from self.on_entry("Describe", pb.DescribeRequest(), Deadline.within(self.timeout))
        return reply

    def fresh_table(self, deadline: Deadline) -> Steps[RoutingTable | None]:
        """The table, fetched again first when missing, too old or marked stale by a routing
        failure. An unreachable cluster leaves the old table (or None)."""
        table = self.table
        if needs_refresh(table, self.stale, self.max_table_age):
            yield Refresh(table, deadline)
        return self.table

    def refresh(self, deadline: Deadline) -> Steps[None]:
        """A Metadata call of an entry (what a driver runs for :class:`Refresh`); failing is no error."""
        try:
            yield from self.on_entry("Metadata", pb.MetadataRequest(), deadline)
        except grpc.RpcError:
            pass

    def on_entry(self, method: str, request: Message, deadline: Deadline,
                 stream: bool = False) -> Steps[tuple[Any, str]]:
        """``method`` on the first entry instance that can be reached, and its endpoint; a
        Metadata reply becomes the routing table. Raises the instance's gRPC error as it is, or
        the last transport error when none could be reached."""
        last: grpc.RpcError | None = None
        for endpoint in self.entries.order(self.table):
            try:
                result = yield Rpc(endpoint, method, request, deadline.remaining(), stream)
            except grpc.RpcError as e:
                if not is_unreachable(e) or deadline.remaining() <= 0:
                    raise
                self.entries.unreachable(endpoint)
                last = e
                continue
            self.entries.answered(endpoint)
            if isinstance(result, pb.MetadataReply):
                learn_application(self._application, result)
                self.table, self.stale = RoutingTable(result), False
            return result, endpoint
        if last is None:  # a seed function that gives none, and no table yet
            raise ClientError(grpc.StatusCode.UNAVAILABLE, "no instance known to ask")
        raise last


class Driver:
    """Where a driver is in its steps: send each result (or throw each error) and get the next
    step, until the steps return their answer (:class:`Done`)."""

    def __init__(self, steps: Steps[T]) -> None:
        self._steps = steps

    def first(self) -> Step | Done:
        return self.send(None)

    def send(self, result: Any) -> Step | Done:
        try:
            return self._steps.send(result)
        except StopIteration as stop:
            return Done(stop.value)

    def throw(self, error: BaseException) -> Step | Done:
        try:
            return self._steps.throw(error)
        except StopIteration as stop:
            return Done(stop.value)


@dataclass(frozen=True)
class Done:
    """The steps returned ``value``."""

    value: Any


__all__ = ["MAX_TABLE_AGE_S", "ClientCore", "Done", "Driver", "Pause", "Refresh", "Rpc", "Step", "Steps"]
