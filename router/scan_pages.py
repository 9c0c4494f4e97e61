"""A scan as the client sees it: its entries, decoded with the store's serdes, page after page.

Each page is one call; the end message's token asks for the next. What each partition reported is
kept, so a caller can tell an exact answer from one with holes: a partition that could not answer
on some page is in :attr:`Scan.missing` with its reason, even if it answered on another page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from instance.serde import BytesSerde, Serde, serde_by_name
from router.rpc import iqmesh_pb2 as pb
from router.scan_wire import ScanRequest, read_stream


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
    """A partition's status as plain data (read metadata when it answered, else the reason)."""
    if s.available:
        m = s.metadata
        return {"partition": s.partition, "available": True, "served_by": m.served_by, "role": m.role,
                "instance_state": m.instance_state, "position": m.position, "end_offset": m.end_offset,
                "lag": m.lag, "stale": m.stale, "forwarded": m.forwarded, "position_token": m.position_token}
    return {"partition": s.partition, "available": False, "reason": s.reason, "message": s.message,
            "tried": list(s.tried)}


class Scan:
    """Iterating runs the scan: pages of ``page_size`` (0: the server's default) until the store
    is exhausted or ``limit`` entries were returned. ``call`` sends one request and returns its
    reply stream; it raises ``grpc.RpcError`` as the server answers (INVALID_ARGUMENT,
    NOT_FOUND, UNAVAILABLE for a ``require_complete`` scan with partitions missing)."""

    def __init__(self, call: Callable[[ScanRequest], Iterable[pb.ScanReply]], request: ScanRequest,
                 page_size: int = 0, limit: int | None = None, page_token: str = "") -> None:
        if page_size < 0 or (limit is not None and limit < 0):
            raise ValueError("page_size and limit must not be negative")
        self._call = call
        self._request = request
        self.page_size = page_size
        self.limit = limit
        #: where the scan starts: a ``next_page_token`` of an earlier run of the same query
        self.page_token = page_token
        #: resumes after the last entry returned ("" once the store is exhausted), so a caller that
        #: stops at ``limit`` (a REST page) can hand the rest of the scan to a later caller
        self.next_page_token = ""
        #: partition -> what it reported on the last page that asked it (status_to_dict)
        self.partitions: dict[int, dict[str, Any]] = {}
        #: partition -> reason, for partitions that could not answer on some page
        self.missing: dict[int, str] = {}
        self.pages = 0
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
        self.partitions, self.missing, self.pages = {}, {}, 0
        returned, token = 0, self.page_token
        self.next_page_token = ""
        decode: tuple[Serde, Serde] | None = None
        while self.limit is None or returned < self.limit:
            req = type(self._request)()
            req.CopyFrom(self._request)
            req.scan.page_token = token
            req.scan.limit = self._next_size(returned)
            page = read_stream(self._call(req))
            self.pages += 1
            if decode is None:
                self.key_serde, self.value_serde = page.header.key_serde, page.header.value_serde
                decode = decode_serde(self.key_serde), decode_serde(self.value_serde)
            for s in page.partitions:
                self.partitions[s.partition] = status_to_dict(s)
                if not s.available:
                    self.missing.setdefault(s.partition, s.reason)
            kd, vd = decode[0].deserialize, decode[1].deserialize
            for e in page.entries:
                if self.limit is not None and returned >= self.limit:
                    return
                returned += 1
                yield ScanItem(kd(e.key), vd(e.value) if e.found else None, e.partition, e.found,
                               e.key_json, e.value_json)
            assert page.end is not None
            token = self.next_page_token = page.end.next_page_token
            if not token:
                return

    def _next_size(self, returned: int) -> int:
        if self.limit is None:
            return self.page_size
        left = self.limit - returned
        return left if self.page_size == 0 else min(self.page_size, left)


def decode_serde(name: str) -> Serde:
    """The serde of that name; a store's own custom serde is unknown here: its bytes as they are."""
    try:
        return serde_by_name(name)
    except ValueError:
        return BytesSerde()
