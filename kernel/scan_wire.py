"""Scans on the wire: the four request messages as one :class:`ScanQuery`, and a reply stream read
back into one page. Shared by the serving instance, its forwarding hop and the client."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from google.protobuf.message import Message

from kernel.query_keys import check_query_key
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_query import ScanKind, ScanQuery

ScanRequest = pb.MultiGetRequest | pb.RangeRequest | pb.PrefixScanRequest | pb.AllRequest

_METHODS: dict[type[Message], str] = {pb.MultiGetRequest: "MultiGet", pb.RangeRequest: "Range",
                                      pb.PrefixScanRequest: "PrefixScan", pb.AllRequest: "All"}

@dataclass(frozen=True)
class ParsedScan:
    """A scan request: what it asks (``query``), and how (the request's option messages)."""

    query: ScanQuery
    options: pb.QueryOptions
    scan: pb.ScanOptions
    forwarded: bool


def parse_request(request: ScanRequest, key_bytes: Callable[[str], bytes]) -> ParsedScan:
    """The query of any of the four requests; ``key_bytes`` serializes a key given as text with
    the store's key serde (it raises ValueError for a key the serde cannot parse)."""
    if not request.store:
        raise ValueError("store must be given")

    def key(k: pb.Key, what: str) -> bytes:
        which = k.WhichOneof("kind")
        if which == "raw":
            check_query_key(k.raw, what)
            return k.raw
        if which == "text":
            check_query_key(k.text, what)
            return key_bytes(k.text)
        raise ValueError(f"{what}: a key needs text or raw bytes")

    store = request.store
    if isinstance(request, pb.MultiGetRequest):
        if not request.keys:
            raise ValueError("MultiGet needs at least one key")
        query = ScanQuery.multi_get(store, (key(k, "keys") for k in request.keys))
    elif isinstance(request, pb.RangeRequest):
        start = key(request.from_key, "from_key") if request.HasField("from_key") else None
        end = key(request.to_key, "to_key") if request.HasField("to_key") else None
        query = ScanQuery(store, ScanKind.RANGE, start=start, end=end)
    elif isinstance(request, pb.PrefixScanRequest):
        if not request.HasField("prefix"):
            raise ValueError("PrefixScan needs a prefix")
        query = ScanQuery(store, ScanKind.PREFIX, prefix=key(request.prefix, "prefix"))
    else:
        query = ScanQuery(store, ScanKind.ALL)
    return ParsedScan(query, request.options, request.scan, request.forwarded)


def build_request(query: ScanQuery, options: pb.QueryOptions, scan: pb.ScanOptions,
                  forwarded: bool = False) -> ScanRequest:
    """The request message asking ``query`` (keys as raw bytes)."""
    common = {"store": query.store, "options": options, "scan": scan, "forwarded": forwarded}
    if query.kind is ScanKind.MULTI_GET:
        return pb.MultiGetRequest(keys=[pb.Key(raw=k) for k in query.keys], **common)  # type: ignore[arg-type]
    if query.kind is ScanKind.RANGE:
        return pb.RangeRequest(from_key=None if query.start is None else pb.Key(raw=query.start),
                               to_key=None if query.end is None else pb.Key(raw=query.end),
                               **common)  # type: ignore[arg-type]
    if query.kind is ScanKind.PREFIX:
        return pb.PrefixScanRequest(prefix=pb.Key(raw=query.prefix), **common)  # type: ignore[arg-type]
    return pb.AllRequest(**common)  # type: ignore[arg-type]


def method_of(request: Message) -> str:
    """The RPC that takes ``request`` (its method name on the InteractiveQuery stub)."""
    return _METHODS[type(request)]


@dataclass
class ReceivedPage:
    """One reply stream, read whole: header, partition statuses, entries, end."""

    header: pb.ScanHeader = field(default_factory=pb.ScanHeader)
    partitions: list[pb.PartitionStatus] = field(default_factory=list)
    entries: list[pb.ScanEntry] = field(default_factory=list)
    end: pb.ScanEnd | None = None


def read_stream(replies: Iterable[pb.ScanReply]) -> ReceivedPage:
    """Collect a reply stream; a stream without its end message raises ValueError (a peer that
    stopped mid-answer must not pass for a short page)."""
    page = ReceivedPage()
    for r in replies:
        part = r.WhichOneof("part")
        if part == "header":
            page.header = r.header
        elif part == "partition":
            page.partitions.append(r.partition)
        elif part == "entries":
            page.entries.extend(r.entries.entries)
        elif part == "end":
            page.end = r.end
    if page.end is None:
        raise ValueError("scan reply stream ended without its end message")
    return page
