"""The query client's policy, free of any transport call (its calls are
:mod:`router.client.client_steps`): results, requests, the caller's deadline, backoff, the seeds and the
choice of entry instance, and the errors raised.

A Get goes straight to the replica the routing table names (marked ``forwarded``: it answers or
refuses, it never passes the query on), so a fresh table costs no hop. A refusal the cluster's
movement explains (NOT_ACTIVE, REBALANCING, NOT_AVAILABLE) or an instance that cannot be reached
makes the client fetch the table again and retry with backoff while the caller's deadline
allows; NOT_UP_TO_BOUND and NO_REPLICA_WITHIN_LAG are the caller's own bounds and come back at
once. What the table cannot place (a store or serde it does not know, a malformed position
token) is asked of an entry instance, which routes it and answers with the precise error.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import grpc

from kernel.application_guard import is_wrong_application
from kernel.options import QueryOptions
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_wire import ScanRequest
from kernel.status_details import Trailer, refusal_of, refusal_status, refusal_text
from kernel.unavailable import FailureReason, UnavailableError
from kernel.wire_enums import role_of, state_of
from router.client.forward import FORWARD_TIMEOUT_S
from router.client.routing_table import RoutingTable, decode_value

#: a key as the client takes it: text parsed with the store's key serde, the serialized bytes, or
#: any other value as its JSON text (numbers for int/long keys, objects for json keys)
KeyArg = str | bytes | int | float | dict[str, Any] | list[Any]

#: refusals a fresher table or a little time can cure
RETRY_REASONS = frozenset({FailureReason.NOT_ACTIVE, FailureReason.REBALANCING,
                           FailureReason.NOT_AVAILABLE})
#: a table older than this is fetched again before use (it is also fetched after a routing failure)
MAX_TABLE_AGE_S = 30.0
#: an entry instance that could not be reached is asked after the others for this long
SUSPECT_S = 10.0


@dataclass(frozen=True)
class QueryResult:
    """``value`` decoded with the store's value serde; ``value_json`` the server's JSON text of it
    (bytes as base64), for printing."""

    found: bool
    value: Any
    metadata: dict[str, Any]
    value_json: str = ""
    #: the endpoint this client sent the call to (a routed Get goes straight to the key's owner)
    asked: str = ""

    @property
    def json_value(self) -> Any:
        """The value as JSON data (what the CLI and the REST gateway print)."""
        return json.loads(self.value_json) if self.found and self.value_json else None


def metadata_to_dict(md: pb.ReadMetadata) -> dict[str, Any]:
    """Read metadata as plain data; role and state as their enums (None: a role this version does
    not know), which JSON prints as their names."""
    return {
        "served_by": md.served_by, "endpoint": md.endpoint, "role": role_of(md.role),
        "instance_state": state_of(md.instance_state), "partition": md.partition, "position": md.position,
        "end_offset": md.end_offset, "lag": md.lag, "stale": md.stale, "forwarded": md.forwarded,
        "position_token": md.position_token,
    }


def routing_table_to_dict(reply: pb.MetadataReply) -> dict[str, Any]:
    """The routing table as plain JSON: snake_case keys, numbers as numbers (protobuf's JSON mapping
    gives camelCase and int64 as strings), lists sorted, states and roles as their enums (JSON prints
    their names)."""
    return {
        "asked": reply.asked,
        "store_partitions": dict(sorted(reply.store_partitions.items())),
        # every instance holds these whole and answers them itself (not in store_partitions)
        "global_stores": sorted(r.store for r in reply.store_routes if r.global_store),
        "instances": [{
            "instance_id": i.instance_id, "endpoint": i.endpoint, "state": state_of(i.state), "alive": i.alive,
            "heartbeat_age_ms": i.heartbeat_age_ms, "heartbeat_interval_ms": i.heartbeat_interval_ms,
            "session_timeout_ms": i.session_timeout_ms, "active_tasks": sorted(i.active_tasks),
            "standby_tasks": sorted(i.standby_tasks), "restoring_tasks": sorted(i.restoring_tasks),
            "stores": [{"store": s.store, "partition": s.partition, "role": role_of(s.role), "position": s.position,
                        "end_offset": s.end_offset, "lag": s.lag}
                       for s in sorted(i.stores, key=lambda s: (s.store, s.partition, s.role))],
        } for i in reply.instances],
    }


@dataclass(frozen=True)
class WindowsResult:
    """``windows``: (start ms, end ms, value decoded from JSON), as the store orders them."""

    windows: list[tuple[int, int, Any]]
    metadata: dict[str, Any]


def windows_of(reply: pb.WindowFetchReply) -> WindowsResult:
    return WindowsResult([(w.start, w.end, json.loads(w.value_json)) for w in reply.windows],
                         metadata_to_dict(reply.metadata))


def window_request(store: str, key: str, time_from: int, time_to: int, allow_stale: bool, max_lag: int | None,
                   position: str) -> pb.WindowFetchRequest:
    return pb.WindowFetchRequest(store=store, key=key, time_from=time_from, time_to=time_to,
                                 options=query_options(allow_stale, max_lag, position))


def session_request(store: str, key: str, allow_stale: bool, max_lag: int | None,
                    position: str) -> pb.SessionFetchRequest:
    return pb.SessionFetchRequest(store=store, key=key, options=query_options(allow_stale, max_lag, position))


def result_of(reply: pb.GetReply, table: RoutingTable | None, store: str, asked: str = "") -> QueryResult:
    serde = table.value_serde(store) if table is not None else None
    return QueryResult(reply.found, decode_value(reply, serde), metadata_to_dict(reply.metadata),
                       reply.value_json if reply.found else "", asked)


def key_text(key: KeyArg) -> str:
    """A non-bytes key as the text the store's key serde parses."""
    return key if isinstance(key, str) else json.dumps(key)


def key_message(k: KeyArg) -> pb.Key:
    return pb.Key(raw=k) if isinstance(k, bytes) else pb.Key(text=key_text(k))


def query_options(allow_stale: bool, max_lag: int | None, position: str) -> pb.QueryOptions:
    opts = pb.QueryOptions(allow_stale=allow_stale, position=position)
    if max_lag is not None and max_lag >= 0:
        opts.max_lag = max_lag
    return opts


def get_request(store: str, key: KeyArg, allow_stale: bool, max_lag: int | None,
                position: str) -> pb.GetRequest:
    options = query_options(allow_stale, max_lag, position)
    if isinstance(key, bytes):
        return pb.GetRequest(store=store, raw_key=key, options=options)
    return pb.GetRequest(store=store, key=key_text(key), options=options)


def routing_options(request: pb.GetRequest) -> QueryOptions | None:
    """The options routing needs; None when they do not parse (an instance then says why)."""
    o = request.options
    try:
        return QueryOptions.parse(request.store, o.allow_stale, o.max_lag if o.HasField("max_lag") else None,
                                  o.position)
    except ValueError:
        return None


def prepare_scan(request: ScanRequest, *, page_size: int = 0, limit: int | None = None, allow_stale: bool = False,
                 max_lag: int | None = None, position: str = "", require_complete: bool = False,
                 with_json: bool = False, page_token: str = "") -> tuple[int, int | None, str]:
    """Put a scan's options on ``request``; (page_size, limit, page_token) for its pages.

    ``page_size``: entries per call (0: the server's default); ``limit``: entries in all;
    ``page_token``: resume an earlier run of the same query (its ``Scan.next_page_token``); the
    read options as for a Get; ``require_complete``: fail (UNAVAILABLE) rather than leave out
    partitions that cannot answer; ``with_json``: also the server's JSON text."""
    request.options.CopyFrom(query_options(allow_stale, max_lag, position))
    request.scan.require_complete = require_complete
    request.scan.with_json = with_json
    return page_size, limit, page_token


S = TypeVar("S")


class ScanMethods(Generic[S]):
    """The scan methods both clients share: each builds its request, ``_scan`` runs it (each page
    one call to an entry instance, which scatters it over every partition's owner). The options
    are :func:`prepare_scan`'s."""

    def multi_get(self, store: str, keys: Iterable[KeyArg], **opts: Any) -> S:
        """The values of ``keys`` (each once, in key-byte order; a missing key has found=False)."""
        return self._scan(pb.MultiGetRequest(store=store, keys=[key_message(k) for k in keys]), opts)

    def range(self, store: str, from_key: KeyArg | None = None, to_key: KeyArg | None = None, **opts: Any) -> S:
        """Entries with ``from_key <= key <= to_key`` by serialized key (None: unbounded)."""
        req = pb.RangeRequest(store=store)
        if from_key is not None:
            req.from_key.CopyFrom(key_message(from_key))
        if to_key is not None:
            req.to_key.CopyFrom(key_message(to_key))
        return self._scan(req, opts)

    def prefix_scan(self, store: str, prefix: KeyArg, **opts: Any) -> S:
        """Entries whose serialized key starts with the serialized ``prefix``."""
        return self._scan(pb.PrefixScanRequest(store=store, prefix=key_message(prefix)), opts)

    def all(self, store: str, **opts: Any) -> S:
        """Every entry of ``store``."""
        return self._scan(pb.AllRequest(store=store), opts)

    def _scan(self, request: ScanRequest, opts: dict[str, Any]) -> S:
        raise NotImplementedError


def parse_seeds(target: str | Sequence[str]) -> tuple[str, ...]:
    """``"h1:p1,h2:p2"`` or a sequence of ``host:port``; at least one."""
    seeds = _distinct(target.split(",") if isinstance(target, str) else target)
    if not seeds:
        raise ValueError("a query client needs at least one seed endpoint (host:port)")
    return seeds


def _distinct(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s.strip() for s in items if s and s.strip()))


class Seeds:
    """The seed instances a client starts from: fixed (:func:`parse_seeds`: at least one), or a
    function asked each time they are wanted (the gateway's discovery, which may know none yet)."""

    def __init__(self, target: str | Sequence[str] | Callable[[], Sequence[str]]) -> None:
        self._find = target if callable(target) else None
        self._fixed = () if callable(target) else parse_seeds(target)

    def __call__(self) -> tuple[str, ...]:
        return self._fixed if self._find is None else _distinct(self._find())


class ClientError(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A status the client decided itself (no instance answered with one), shaped like the
    servers' errors (a refusal's reason and tried instance ids in the typed details its trailing
    metadata carries: kernel/status_details.py) and, like grpcio's own errors, a finished
    ``grpc.Call``."""

    def __init__(self, code: grpc.StatusCode, details: str, trailing_metadata: Trailer = ()) -> None:
        super().__init__(f"{code.name}: {details}")
        self._code = code
        self._details = details
        self._trailing = trailing_metadata

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> tuple[()]:
        return ()

    def trailing_metadata(self) -> Trailer:
        return self._trailing

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


def as_call(e: grpc.RpcError) -> grpc.RpcError:
    """``e`` as a finished ``grpc.Call`` (code, details and typed details kept): what blocking
    callers catch (a grpc.aio error is not one)."""
    if isinstance(e, grpc.Call):
        return e
    trailing = e.trailing_metadata() if hasattr(e, "trailing_metadata") else None
    return ClientError(e.code(), e.details() or "", tuple(trailing or ()))


def unavailable(e: UnavailableError) -> ClientError:
    """The refusal ``e`` as the status a server would have sent (text and typed details)."""
    status = refusal_status(e, refusal_text(e))
    return ClientError(status.code, status.details, status.trailing_metadata)


def global_exhausted(store: str, refused: list[UnavailableError], tried: list[str]) -> UnavailableError:
    """The error when none of the endpoints ``tried`` answered a Get of global store ``store``."""
    detail = "; ".join(str(e) for e in refused[:3]) or "no instance known"
    return UnavailableError(FailureReason.most_relevant(e.reason for e in refused),
                            f"no instance could answer global store {store!r}: {detail}", tried=tried)


def is_unreachable(e: grpc.RpcError) -> bool:
    """The transport failed (connection refused, reset, no answer in time, the call cut off by an
    instance shutting down), or a server of another application answered (the instance wanted is
    not there), as opposed to an instance answering with a status."""
    if is_wrong_application(e):
        return True
    code = e.code()
    if code in (grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.CANCELLED):
        return True
    return code is grpc.StatusCode.UNAVAILABLE and refusal_of(e) is None


def is_retryable(e: grpc.RpcError) -> bool:
    """An instance could not be reached, or refused for a reason time or a fresher table cures."""
    if is_unreachable(e):
        return True
    refused = refusal_of(e)
    return e.code() is grpc.StatusCode.UNAVAILABLE and refused is not None and refused.reason in RETRY_REASONS


def learn_application(pool: Any, reply: pb.MetadataReply) -> None:
    """The first Metadata reply names the application the client's later calls are meant for."""
    if not pool.application_id and reply.application_id:
        pool.application_id = reply.application_id


@dataclass(frozen=True)
class Deadline:
    """The caller's deadline (monotonic seconds), shared by every attempt of one call."""

    at: float

    @staticmethod
    def within(seconds: float) -> Deadline:
        return Deadline(time.monotonic() + seconds)

    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    def attempt_timeout(self, more_candidates: bool) -> float:
        """One call's share: all that is left, or at most FORWARD_TIMEOUT_S when other replicas
        could answer if this one hangs."""
        left = self.remaining()
        return min(left, FORWARD_TIMEOUT_S) if more_candidates else left


class Backoff:
    """Exponential pauses between attempts (with jitter, so clients do not retry in step)."""

    def __init__(self, first: float = 0.05, cap: float = 1.0) -> None:
        self._next = first
        self._cap = cap

    def pause(self, deadline: Deadline) -> float | None:
        """The next pause, or None when it would not leave time for another attempt."""
        p = self._next * random.uniform(0.8, 1.2)
        self._next = min(self._cap, self._next * 2)
        return p if deadline.remaining() > p + 0.01 else None


class Entries:
    """Instances to ask when no routing decides who (Metadata, scans, keys the table cannot
    place): the last one that answered, the seeds, then the live ones the table names; those
    that could not be reached lately go last."""

    def __init__(self, seeds: Callable[[], Sequence[str]]) -> None:
        self.seeds = seeds
        self._preferred = ""
        self._failed: dict[str, float] = {}

    def order(self, table: RoutingTable | None) -> list[str]:
        known = list(dict.fromkeys([self._preferred, *self.seeds(), *(table.endpoints() if table else ())]))
        now = time.monotonic()
        return sorted((e for e in known if e), key=lambda e: now - self._failed.get(e, -SUSPECT_S) < SUSPECT_S)

    def answered(self, endpoint: str) -> None:
        self._preferred = endpoint
        self._failed.pop(endpoint, None)

    def unreachable(self, endpoint: str) -> None:
        self._failed[endpoint] = time.monotonic()
        if self._preferred == endpoint:
            self._preferred = ""


def needs_refresh(table: RoutingTable | None, stale: bool, max_age: float) -> bool:
    return table is None or stale or table.age() > max_age
