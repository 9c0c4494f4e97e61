"""A scan as the client sees it: its entries, decoded with the store's serdes, page after page.

Each page is one call; the end message's token asks for the next. What each partition reported is
kept, so a caller can tell an exact answer from one with holes: a partition that could not answer
on some page is in :attr:`Scan.missing` with its reason, even if it answered on another page.
A scan of one partition can keep to that partition's timeline (``follow_position``: each page is
bounded by the position the page before reported, so a replica behind it cannot answer).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_wire import ReceivedPage, ScanRequest, read_stream
from kernel.serdes import BytesSerde, Serde, serde_by_name
from kernel.unavailable import FailureReason
from kernel.wire_enums import reason_of, role_of, state_of


@dataclass(frozen=True)
class ScanItem:
    """One entry; ``found`` is False (and ``value`` None) only for a MultiGet key the store does
    not hold. ``key_json``/``value_json``: the server's JSON text, when asked for (``with_json``)."""

    key: Any
    value: Any
    partition: int
    found: bool = True
    key_json: str = ""
    value_json: str = ""


def status_to_dict(s: pb.PartitionStatus) -> dict[str, Any]:
    """A partition's status as plain data (read metadata when it answered, else the reason); role,
    state and reason as their enums, which JSON prints as their names."""
    if s.available:
        m = s.metadata
        return {"partition": s.partition, "available": True, "served_by": m.served_by, "role": role_of(m.role),
                "instance_state": state_of(m.instance_state), "position": m.position, "end_offset": m.end_offset,
                "lag": m.lag, "stale": m.stale, "forwarded": m.forwarded, "position_token": m.position_token}
    return {"partition": s.partition, "available": False, "reason": reason_of(s.reason), "message": s.message,
            "tried": list(s.tried)}


@dataclass(frozen=True)
class PartitionReport:
    """What a partition reported on the first and on the last page that asked it: whether, and
    how far, it moved while the scan paged through it."""

    first: pb.PartitionStatus
    last: pb.PartitionStatus


_MAX_INT32 = 2**31 - 1


class Scan:
    """Iterating runs the scan: pages of ``page_size`` (0: the server's default) until the store
    is exhausted or ``limit`` entries were returned. ``call`` sends one request and returns its
    reply stream; it raises ``grpc.RpcError`` as the server answers (INVALID_ARGUMENT,
    NOT_FOUND, UNAVAILABLE for a ``require_complete`` scan with partitions missing).
    ``raw``: keys and values as the store holds them (bytes), not decoded; ``follow_position``:
    a scan of the one partition ``request.scan.partitions`` names sends each later page the
    position token the page before reported, as its bound."""

    def __init__(self, call: Callable[[ScanRequest], Iterable[pb.ScanReply]], request: ScanRequest,
                 page_size: int = 0, limit: int | None = None, page_token: str = "", *, raw: bool = False,
                 follow_position: bool = False) -> None:
        if page_size < 0 or (limit is not None and limit < 0):
            raise ValueError("page_size and limit must not be negative")
        if follow_position and len(request.scan.partitions) != 1:
            raise ValueError("follow_position needs a scan of exactly one partition")
        self._call = call
        self._request = request
        self.page_size = page_size
        self.limit = limit
        #: decode nothing; the partition whose position bounds the next page (None: the request's bound)
        self.raw, self.followed = raw, (request.scan.partitions[0] if follow_position else None)
        #: where the scan starts: a ``next_page_token`` of an earlier run of the same query
        self.page_token = page_token
        #: resumes after the last entry returned ("" once the store is exhausted), so a caller that
        #: stops at ``limit`` (a REST page) can hand the rest of the scan to a later caller
        self.next_page_token = ""
        #: partition -> what it reported on the last page that asked it (status_to_dict)
        self.partitions: dict[int, dict[str, Any]] = {}
        #: partition -> reason, for partitions that could not answer on some page
        self.missing: dict[int, FailureReason] = {}
        #: partition -> its status on the first and the last page that asked it
        self.reports: dict[int, PartitionReport] = {}
        self.pages = 0
        #: the endpoint the last page was asked of (the entry that scattered it)
        self.asked = ""
        self.key_serde = ""
        self.value_serde = ""

    @property
    def complete(self) -> bool:
        """Every partition answered on every page (meaningful once iterated)."""
        return not self.missing

    @property
    def stale_partitions(self) -> set[int]:
        return {p for p, s in self.partitions.items() if s.get("stale")}

    def __iter__(self) -> Iterator[ScanItem]:
        pages = _Pages(self)
        while (req := pages.next_request()) is not None:
            yield from pages.take(read_stream(self._call(req)))

    def _next_size(self, returned: int) -> int:
        if self.limit is None:
            return self.page_size
        left = min(self.limit - returned, _MAX_INT32)  # the wire's limit is int32; the server caps pages anyway
        return left if self.page_size == 0 else min(self.page_size, left)


class AsyncScan(Scan):
    """A scan for grpc.aio: ``async for item in scan`` (``call`` is a coroutine function)."""

    def __init__(self, call: Callable[[ScanRequest], Awaitable[Iterable[pb.ScanReply]]], request: ScanRequest,
                 page_size: int = 0, limit: int | None = None, page_token: str = "", *, raw: bool = False,
                 follow_position: bool = False) -> None:
        super().__init__(lambda r: (), request, page_size, limit, page_token, raw=raw,
                         follow_position=follow_position)
        self._acall = call

    def __iter__(self) -> Iterator[ScanItem]:
        raise TypeError("an AsyncScan is iterated with 'async for'")

    async def __aiter__(self) -> AsyncIterator[ScanItem]:
        pages = _Pages(self)
        while (req := pages.next_request()) is not None:
            for item in pages.take(read_stream(await self._acall(req))):
                yield item


class _Pages:
    """One run of a scan, transport-free: the request of each page, and each page's items
    (recording statuses and the resume token on the scan as they come)."""

    def __init__(self, scan: Scan) -> None:
        self.scan = scan
        scan.partitions, scan.missing, scan.reports, scan.pages = {}, {}, {}, 0
        scan.next_page_token = ""
        self.returned, self.token, self.done = 0, scan.page_token, False
        self.bound = scan._request.options.position
        self.decode: tuple[Serde, Serde] | None = None

    def next_request(self) -> ScanRequest | None:
        scan = self.scan
        if self.done or (scan.limit is not None and self.returned >= scan.limit):
            return None
        req = type(scan._request)()
        req.CopyFrom(scan._request)
        req.scan.page_token = self.token
        req.scan.limit = scan._next_size(self.returned)
        req.options.position = self.bound
        return req

    def take(self, page: ReceivedPage) -> Iterator[ScanItem]:
        scan = self.scan
        scan.pages += 1
        if self.decode is None:
            scan.key_serde, scan.value_serde = page.header.key_serde, page.header.value_serde
            self.decode = ((BytesSerde(), BytesSerde()) if scan.raw
                           else (decode_serde(scan.key_serde), decode_serde(scan.value_serde)))
        for s in page.partitions:
            scan.partitions[s.partition] = status_to_dict(s)
            first = scan.reports[s.partition].first if s.partition in scan.reports else s
            scan.reports[s.partition] = PartitionReport(first, s)
            if not s.available:
                scan.missing.setdefault(s.partition, reason_of(s.reason))
            elif s.partition == scan.followed and s.metadata.position_token and s.metadata.position >= 0:
                self.bound = s.metadata.position_token  # later pages: never older than this one
        kd, vd = self.decode[0].deserialize, self.decode[1].deserialize
        for e in page.entries:
            if scan.limit is not None and self.returned >= scan.limit:
                self.done = True
                return
            self.returned += 1
            yield ScanItem(kd(e.key), vd(e.value) if e.found else None, e.partition, e.found,
                           e.key_json, e.value_json)
        assert page.end is not None
        self.token = scan.next_page_token = page.end.next_page_token
        self.done = not self.token



def decode_serde(name: str) -> Serde:
    """The serde of that name; a store's own custom serde is unknown here: its bytes as they are."""
    try:
        return serde_by_name(name)
    except ValueError:
        return BytesSerde()
