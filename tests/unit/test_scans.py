"""Scans without a cluster: query bounds, page tokens, one partition's page from a store, the
scatter/merge of pages, and paging through a whole store from the client side."""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from instance.runtime.query.scan_page import read_page
from instance.serde import JsonSerde, LongSerde, Serde, StringSerde
from instance.server.replies import scan_entry
from instance.server.scans import page_limit, replies
from kernel.page_token import MAX_PAGE_TOKEN_CHARS, PageToken, resume_after
from kernel.partitioner import default_partition
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_query import ScanKind, ScanQuery, prefix_end
from kernel.scan_wire import build_request, parse_request, read_stream
from kernel.tokens import encode_json_token
from kernel.unavailable import FailureReason as R
from kernel.unavailable import UnavailableError
from router.client.scan_pages import Scan
from router.client.scatter import PartitionFailure, PartitionPage, incomplete_error, merge, scatter

STORE = "counts"
N = 4


class FakeStore:
    """The query side of a store: typed keys, ``query_range`` inclusive by serialized key, key-byte order."""

    def __init__(self, serde: Serde, data: dict[Any, Any]) -> None:
        self.serde = serde
        self.data = {serde.serialize(k): (k, v) for k, v in data.items()}

    def query_range(self, start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        sb = None if start is None else self.serde.serialize(start)
        eb = None if end is None else self.serde.serialize(end) + b"\x00"  # type: ignore[operator]
        for kb in sorted(self.data):  # type: ignore[type-var]
            if (sb is None or kb >= sb) and (eb is None or kb < eb):  # type: ignore[operator]
                yield self.data[kb]

    def query_get(self, key: Any) -> Any:
        hit = self.data.get(self.serde.serialize(key))
        return None if hit is None else hit[1]


def partition_of(kb: bytes) -> int:
    return default_partition(kb, N)


def cluster_of(serde: Serde, data: dict[Any, Any]) -> list[FakeStore]:
    """``data`` split over N partitions the way the runtime splits keys."""
    parts: list[dict[Any, Any]] = [{} for _ in range(N)]
    for k, v in data.items():
        kb = serde.serialize(k)
        assert kb is not None
        parts[partition_of(kb)][k] = v
    return [FakeStore(serde, p) for p in parts]


def page_of(stores: list[FakeStore], serde: Serde, query: ScanQuery, after: bytes | None, limit: int,
            down: Iterable[int] = ()) -> Any:
    """One merged page, as ScanService builds it (without the routing)."""
    def read(p: int) -> PartitionPage[pb.ScanEntry, str]:
        if p in down:
            raise UnavailableError(R.NOT_ACTIVE, f"partition {p} down", tried=("x",))
        entries, more = read_page(stores[p], serde, query, after, p, limit, partition_of,
                                  scan_entry(LongSerde(), False))
        return PartitionPage(p, entries, more, f"meta{p}")
    return merge(scatter(range(N), read), limit)


def scan_all(stores: list[FakeStore], serde: Serde, query: ScanQuery, limit: int) -> list[Any]:
    """Every entry of ``query``, page after page through page tokens."""
    out: list[Any] = []
    after = None
    for _ in range(10_000):
        page = page_of(stores, serde, query, after, limit)
        out += [serde.deserialize(e.key) for e in page.entries]
        if page.resume_after is None:
            return out
        after = resume_after(PageToken(query.fingerprint(), page.resume_after).encode(), query)
    raise AssertionError("the scan did not end")


WORDS = {w: i for i, w in enumerate(
    "a ab abc abd abz ac b ba bab c user001 user010 user011 user1 user100 user2 zz é éa".split())}


def expected(pred: Any) -> list[str]:
    return sorted((w for w in WORDS if pred(w)), key=str.encode)


# --- query bounds ------------------------------------------------------------------------------


def test_prefix_end() -> None:
    assert prefix_end(b"ab") == b"ac"
    assert prefix_end(b"a\xff") == b"b"
    assert prefix_end(b"a\xff\xff") == b"b"
    assert prefix_end(b"\xff") is None
    assert prefix_end(b"") is None


def test_intervals() -> None:
    assert ScanQuery(STORE, ScanKind.ALL).interval() == (b"", None)
    assert ScanQuery(STORE, ScanKind.RANGE, start=b"b", end=b"d").interval() == (b"b", b"d\x00")
    assert ScanQuery(STORE, ScanKind.RANGE, start=b"b", end=b"d").interval(b"c") == (b"c\x00", b"d\x00")
    assert ScanQuery(STORE, ScanKind.RANGE, start=b"b", end=b"d").interval(b"a") == (b"b", b"d\x00")
    assert ScanQuery(STORE, ScanKind.PREFIX, prefix=b"us").interval() == (b"us", b"ut")
    q = ScanQuery.multi_get(STORE, [b"c", b"a", b"c"])
    assert q.keys == (b"a", b"c") and q.interval() == (b"a", b"c\x00")
    assert q.keys_after(b"a") == (b"c",) and q.keys_after(None) == (b"a", b"c") and q.keys_after(b"c") == ()


def test_fingerprint_tells_queries_apart() -> None:
    queries = [ScanQuery(STORE, ScanKind.ALL), ScanQuery("other", ScanKind.ALL),
               ScanQuery(STORE, ScanKind.RANGE), ScanQuery(STORE, ScanKind.RANGE, end=b""),
               ScanQuery(STORE, ScanKind.RANGE, start=b"a"), ScanQuery(STORE, ScanKind.RANGE, end=b"a"),
               ScanQuery(STORE, ScanKind.PREFIX, prefix=b"a"), ScanQuery.multi_get(STORE, [b"a"]),
               ScanQuery.multi_get(STORE, [b"a", b"b"]), ScanQuery.multi_get(STORE, [b"ab"])]
    prints = [q.fingerprint() for q in queries]
    assert len(set(prints)) == len(prints)
    same = ScanQuery.multi_get(STORE, [b"b", b"a"]), ScanQuery.multi_get(STORE, [b"a", b"b"])
    assert same[0].fingerprint() == same[1].fingerprint()


# --- page tokens -------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [b"", b"kafka", b"\x00\xff\x80", bytes(range(256)) * 40])
def test_page_token_round_trip(key: bytes) -> None:
    q = ScanQuery(STORE, ScanKind.ALL)
    assert resume_after(PageToken(q.fingerprint(), key).encode(), q) == key


PRINT = ScanQuery(STORE, ScanKind.ALL).fingerprint()
MALFORMED_PAGE_TOKENS = {
    "garbage": "garbage!",
    "not json": "bm90IGpzb24",
    "position token": encode_json_token({"s": STORE, "p": 1, "o": 3}),
    "extra field": encode_json_token({"q": PRINT, "a": "", "x": 1}),
    "fingerprint not a string": encode_json_token({"q": 7, "a": ""}),
    "fingerprint not hex": encode_json_token({"q": "z" * 16, "a": ""}),
    "fingerprint too short": encode_json_token({"q": PRINT[:8], "a": ""}),
    "key not base64": encode_json_token({"q": PRINT, "a": "***"}),
    "key not a string": encode_json_token({"q": PRINT, "a": [1]}),
    "too long": "A" * (MAX_PAGE_TOKEN_CHARS + 1),
}


@pytest.mark.parametrize("token", list(MALFORMED_PAGE_TOKENS.values()), ids=list(MALFORMED_PAGE_TOKENS))
def test_malformed_page_token_raises_value_error(token: str) -> None:
    with pytest.raises(ValueError, match="page token"):
        resume_after(token, ScanQuery(STORE, ScanKind.ALL))


def test_page_token_of_another_query_is_refused() -> None:
    token = PageToken(ScanQuery(STORE, ScanKind.RANGE, start=b"a").fingerprint(), b"b").encode()
    with pytest.raises(ValueError, match="another query"):
        resume_after(token, ScanQuery(STORE, ScanKind.ALL))
    assert resume_after("", ScanQuery(STORE, ScanKind.ALL)) is None


def test_page_limit() -> None:
    assert page_limit(0) == 1000 and page_limit(5) == 5 and page_limit(10**9) == 10_000
    with pytest.raises(ValueError):
        page_limit(-1)


# --- one partition's page ----------------------------------------------------------------------


def keys_of(entries: list[pb.ScanEntry]) -> list[bytes]:
    return [e.key for e in entries]


def test_read_page_bounds_limit_and_more() -> None:
    s = StringSerde()
    store = FakeStore(s, WORDS)
    every = [w.encode() for w in expected(lambda w: True)]

    def page(q: ScanQuery, after: bytes | None = None, limit: int = 100) -> tuple[list[bytes], bool]:
        entries, more = read_page(store, s, q, after, 0, limit, lambda kb: 0, scan_entry(LongSerde(), False))
        return keys_of(entries), more

    assert page(ScanQuery(STORE, ScanKind.ALL)) == (every, False)
    assert page(ScanQuery(STORE, ScanKind.ALL), limit=3) == (every[:3], True)
    assert page(ScanQuery(STORE, ScanKind.ALL), after=every[2], limit=3) == (every[3:6], True)
    assert page(ScanQuery(STORE, ScanKind.ALL), after=every[-1]) == ([], False)
    assert page(ScanQuery(STORE, ScanKind.ALL), limit=len(every)) == (every, False)
    assert page(ScanQuery(STORE, ScanKind.RANGE, start=b"ab", end=b"b")) == (
        [b"ab", b"abc", b"abd", b"abz", b"ac", b"b"], False)
    assert page(ScanQuery(STORE, ScanKind.RANGE, start=b"abb", end=b"abz")) == ([b"abc", b"abd", b"abz"], False)
    assert page(ScanQuery(STORE, ScanKind.RANGE, start=b"c", end=b"b")) == ([], False)
    assert page(ScanQuery(STORE, ScanKind.PREFIX, prefix=b"ab")) == ([b"ab", b"abc", b"abd", b"abz"], False)
    assert page(ScanQuery(STORE, ScanKind.PREFIX, prefix=b"user1")) == ([b"user1", b"user100"], False)
    # a prefix whose successor is not UTF-8 (no typed upper bound): still exact
    assert page(ScanQuery(STORE, ScanKind.PREFIX, prefix="é".encode())) == (["é".encode(), "éa".encode()], False)
    assert page(ScanQuery(STORE, ScanKind.PREFIX, prefix=b"\xc3")) == (["é".encode(), "éa".encode()], False)
    assert page(ScanQuery(STORE, ScanKind.PREFIX, prefix=b"q")) == ([], False)


def test_read_page_values_and_json() -> None:
    s = StringSerde()
    entries, _ = read_page(FakeStore(s, {"k": 7}), s, ScanQuery(STORE, ScanKind.ALL), None, 2, 10, lambda kb: 2,
                           scan_entry(LongSerde(), True))
    (e,) = entries
    assert (e.key, LongSerde().deserialize(e.value), e.found, e.partition) == (b"k", 7, True, 2)
    assert (e.key_json, e.value_json) == ('"k"', "7")


def test_read_page_multi_get_reports_missing_keys_of_its_partition_only() -> None:
    s = StringSerde()
    store = FakeStore(s, {"a": 1, "c": 3})
    q = ScanQuery.multi_get(STORE, [b"a", b"b", b"c", b"d"])
    mine = {b"a", b"b", b"c"}
    mine_only = scan_entry(LongSerde(), False)
    entries, more = read_page(store, s, q, None, 0, 10, lambda kb: 0 if kb in mine else 1, mine_only)
    assert [(e.key, e.found) for e in entries] == [(b"a", True), (b"b", False), (b"c", True)] and not more
    entries, more = read_page(store, s, q, b"a", 0, 1, lambda kb: 0 if kb in mine else 1, mine_only)
    assert [(e.key, e.found) for e in entries] == [(b"b", False)] and more


def test_read_page_long_keys_resume_after_a_token_key() -> None:
    """A page token's bound (a key plus 0x00) is no long; the key itself bounds the range."""
    ls = LongSerde()
    data = {k: k for k in (-5, -1, 0, 1, 2, 300, 2**40)}
    store = FakeStore(ls, data)
    calls: list[tuple[Any, Any]] = []
    real_range = store.query_range

    def spy(start: Any, end: Any) -> Iterator[tuple[Any, Any]]:
        calls.append((start, end))
        return real_range(start, end)
    store.query_range = spy  # type: ignore[method-assign]
    q = ScanQuery(STORE, ScanKind.ALL)
    after = ls.serialize(1)
    entries, _ = read_page(store, ls, q, after, 0, 2, lambda kb: 0, scan_entry(ls, False))
    assert [ls.deserialize(e.key) for e in entries] == [2, 300]
    assert calls == [(1, None)]  # started at the token's key, not at the first key


def test_read_page_json_keys_with_non_canonical_raw_bounds() -> None:
    """A raw bound that is not the serde's own encoding of a key bounds nothing typed, but the
    answer is exact (every entry is checked in bytes)."""
    js = JsonSerde()
    data = {"a": 1, "b": 2, "c": 3}
    store = FakeStore(js, data)
    q = ScanQuery(STORE, ScanKind.RANGE, start=b' "b"', end=b'"b" ')  # spaces: valid JSON, not canonical
    entries, _ = read_page(store, js, q, None, 0, 10, lambda kb: 0, scan_entry(js, False))
    assert [e.key for e in entries] == [b'"a"', b'"b"']  # b' "b"' < b'"a"' < b'"b"' < b'"b" '


# --- scatter and merge -------------------------------------------------------------------------


def pp(p: int, keys: list[bytes], more: bool = False) -> PartitionPage[pb.ScanEntry, str]:
    return PartitionPage(p, [pb.ScanEntry(key=k, partition=p) for k in keys], more, f"m{p}")


def test_merge_orders_by_key_bytes_and_cuts_at_the_limit() -> None:
    pages = [pp(1, [b"b", b"d"]), pp(0, [b"a", b"e"]), pp(2, [b"c"])]
    m = merge(pages, 10)
    assert keys_of(m.entries) == [b"a", b"b", b"c", b"d", b"e"] and m.resume_after is None and m.complete
    assert [o.partition for o in m.outcomes] == [0, 1, 2]
    m = merge(pages, 3)
    assert keys_of(m.entries) == [b"a", b"b", b"c"] and m.resume_after == b"c"


def test_merge_resumes_when_a_partition_has_more() -> None:
    m = merge([pp(0, [b"a", b"b"], more=True), pp(1, [b"c"])], 3)
    assert keys_of(m.entries) == [b"a", b"b", b"c"] and m.resume_after == b"c"


def test_merge_reports_failures() -> None:
    f = PartitionFailure(1, R.REBALANCING, "moving", ("i1",))
    m = merge([pp(0, [b"a"]), f], 5)
    assert keys_of(m.entries) == [b"a"] and m.failures == [f] and not m.complete and m.resume_after is None
    with pytest.raises(ValueError):
        merge([], 0)


def test_scatter_turns_refusals_into_failures_and_passes_other_errors() -> None:
    def read(p: int) -> PartitionPage[pb.ScanEntry, str]:
        if p == 2:
            raise UnavailableError(R.NOT_ACTIVE, "standby only", tried=("b",))
        return pp(p, [bytes([p])])
    with ThreadPoolExecutor(4) as ex:
        out = scatter([3, 0, 2, 1, 0], read, ex)
    assert [o.partition for o in out] == [0, 1, 2, 3]
    assert out[2] == PartitionFailure(2, R.NOT_ACTIVE, "standby only", ("b",))

    def broken(p: int) -> PartitionPage[pb.ScanEntry, str]:
        raise KeyError("bug")
    with pytest.raises(KeyError):
        scatter([0, 1], broken)


def test_incomplete_error_names_the_most_relevant_reason_and_every_partition() -> None:
    e = incomplete_error(STORE, [PartitionFailure(1, R.NOT_AVAILABLE, "gone", ("a",)),
                                 PartitionFailure(4, R.NO_REPLICA_WITHIN_LAG, "lag 9 > 1", ("b", "a"))])
    assert e.reason is R.NO_REPLICA_WITHIN_LAG and e.tried == ("a", "b")
    assert "partition 1: NOT_AVAILABLE (gone)" in str(e) and "partition 4" in str(e)


# --- whole scans, page after page --------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8, 1000])
def test_paging_returns_every_key_once_in_order(limit: int) -> None:
    s = StringSerde()
    stores = cluster_of(s, WORDS)
    assert sum(1 for st in stores if st.data) > 1
    asked = ["zz", "a", "nope", "user1"]
    cases = [(ScanQuery(STORE, ScanKind.ALL), lambda w: True),
             (ScanQuery(STORE, ScanKind.RANGE, start=b"ab", end=b"user011"), lambda w: "ab" <= w <= "user011"),
             (ScanQuery(STORE, ScanKind.PREFIX, prefix=b"user"), lambda w: w.startswith("user")),
             (ScanQuery.multi_get(STORE, [w.encode() for w in asked]), lambda w: w in asked)]
    for q, pred in cases:
        want = expected(pred) if q.kind is not ScanKind.MULTI_GET else sorted(asked)
        assert scan_all(stores, s, q, limit) == want, (q.kind, limit)


def test_paging_random_stores_and_bounds() -> None:
    rnd = random.Random(11)
    ls, ss = LongSerde(), StringSerde()
    for _ in range(30):
        longs = {rnd.randint(-1000, 1000): 1 for _ in range(rnd.randint(0, 60))}
        lo, hi = sorted(rnd.sample(range(-1200, 1200), 2))
        q = ScanQuery(STORE, ScanKind.RANGE, start=ls.serialize(lo), end=ls.serialize(hi))
        want = sorted((k for k in longs if ls.serialize(lo) <= ls.serialize(k) <= ls.serialize(hi)),  # type: ignore[operator]
                      key=ls.serialize)  # type: ignore[arg-type]
        assert scan_all(cluster_of(ls, longs), ls, q, rnd.randint(1, 7)) == want
        words = {"".join(rnd.choice("ab\xe9") for _ in range(rnd.randint(0, 4))): 1 for _ in range(40)}
        prefix = "".join(rnd.choice("ab") for _ in range(rnd.randint(0, 2)))
        q = ScanQuery(STORE, ScanKind.PREFIX, prefix=prefix.encode())
        assert scan_all(cluster_of(ss, words), ss, q, rnd.randint(1, 7)) == expected_in(words, prefix)


def expected_in(words: dict[str, int], prefix: str) -> list[str]:
    return sorted((w for w in words if w.encode().startswith(prefix.encode())), key=str.encode)


# --- the wire and the client's pages -----------------------------------------------------------


def serve(stores: list[FakeStore], down: set[int]) -> Any:
    """A ``call`` for Scan: the server's page and reply stream over ``stores``, without routing."""
    s = StringSerde()
    calls: list[pb.ScanReply] = []

    def call(request: Any) -> list[pb.ScanReply]:
        parsed = parse_request(request, lambda text: text.encode())
        limit = page_limit(parsed.scan.limit)
        after = resume_after(parsed.scan.page_token, parsed.query)
        m = page_of(stores, s, parsed.query, after, limit, down)
        m = type(m)(m.entries, [o if isinstance(o, PartitionFailure) else PartitionPage(
            o.partition, o.entries, o.more, pb.ReadMetadata(served_by=f"i{o.partition}", stale=o.partition == 0))
            for o in m.outcomes], m.resume_after)
        token = "" if m.resume_after is None else PageToken(parsed.query.fingerprint(), m.resume_after).encode()
        header = pb.ScanHeader(store=STORE, key_serde="string", value_serde="long", partitions=N)
        calls.append(request)
        return list(replies(header, m, token))
    call.calls = calls  # type: ignore[attr-defined]
    return call


def test_client_scan_pages_decodes_and_keeps_partition_statuses() -> None:
    stores = cluster_of(StringSerde(), WORDS)
    call = serve(stores, down={3})
    request = build_request(ScanQuery(STORE, ScanKind.ALL), pb.QueryOptions(), pb.ScanOptions())
    scan = Scan(call, request, page_size=2)
    got = list(scan)
    missing_keys = {k for k in WORDS if partition_of(k.encode()) == 3}
    assert [i.key for i in got] == [k for k in expected(lambda w: True) if k not in missing_keys]
    assert all(i.value == WORDS[i.key] and i.found for i in got)
    assert scan.pages == len(call.calls) == -(-len(got) // 2)
    assert scan.missing == {3: R.NOT_ACTIVE} and not scan.complete
    assert scan.partitions[3]["tried"] == ["x"] and scan.partitions[1]["served_by"] == "i1"
    assert scan.stale_partitions == {0}
    assert (scan.key_serde, scan.value_serde) == ("string", "long")

    limited = Scan(serve(stores, set()), request, page_size=3, limit=4)
    assert [i.key for i in limited] == expected(lambda w: True)[:4] and limited.complete
    assert [r.scan.limit for r in limited._call.calls] == [3, 1]  # type: ignore[attr-defined]


def test_read_stream_needs_the_end_message() -> None:
    with pytest.raises(ValueError, match="end message"):
        read_stream([pb.ScanReply(header=pb.ScanHeader(store=STORE))])


def test_parse_request_and_build_request_agree() -> None:
    queries = [ScanQuery(STORE, ScanKind.ALL), ScanQuery(STORE, ScanKind.RANGE, start=b"a"),
               ScanQuery(STORE, ScanKind.RANGE, end=b"z"), ScanQuery(STORE, ScanKind.RANGE, start=b"", end=b""),
               ScanQuery(STORE, ScanKind.PREFIX, prefix=b"us"), ScanQuery.multi_get(STORE, [b"b", b"a"])]
    for q in queries:
        parsed = parse_request(build_request(q, pb.QueryOptions(), pb.ScanOptions(), forwarded=True), bytes.fromhex)
        assert parsed.query == q and parsed.forwarded
    text = pb.RangeRequest(store=STORE, from_key=pb.Key(text="61"), to_key=pb.Key(raw=b"z"))
    assert parse_request(text, bytes.fromhex).query == ScanQuery(STORE, ScanKind.RANGE, start=b"a", end=b"z")
    for bad in (pb.AllRequest(), pb.MultiGetRequest(store=STORE), pb.PrefixScanRequest(store=STORE),
                pb.RangeRequest(store=STORE, from_key=pb.Key())):
        with pytest.raises(ValueError):
            parse_request(bad, bytes.fromhex)


def test_replies_batch_entries_by_count_and_size() -> None:
    small = [pb.ScanEntry(key=b"%05d" % i) for i in range(600)]
    big = [pb.ScanEntry(key=b"%05d" % i, value=b"v" * 300_000) for i in range(10)]
    for entries, batches in ((small, [256, 256, 88]), (big, [4, 4, 2])):
        m = merge([PartitionPage(0, entries, False, pb.ReadMetadata())], 1000)
        out = list(replies(pb.ScanHeader(), m, ""))
        assert [len(r.entries.entries) for r in out if r.WhichOneof("part") == "entries"] == batches
        assert read_stream(out).entries == entries
