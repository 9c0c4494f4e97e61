"""A scan stopped at its limit hands the rest to a later caller through ``next_page_token``
(the REST gateway's pages): resuming returns every key once, in order, and ends with no token."""

from __future__ import annotations

import pytest

from instance.serde import StringSerde
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_query import ScanKind, ScanQuery
from kernel.scan_wire import build_request
from router.client.scan_pages import Scan
from tests.unit.test_scans import STORE, WORDS, cluster_of, expected, serve


def test_a_limited_scan_resumes_from_its_next_page_token() -> None:
    call = serve(cluster_of(StringSerde(), WORDS), set())
    request = build_request(ScanQuery(STORE, ScanKind.ALL), pb.QueryOptions(), pb.ScanOptions())
    got: list[str] = []
    token, pages = "", 0
    while True:
        scan = Scan(call, request, limit=5, page_token=token)
        got += [i.key for i in scan]
        pages += 1
        token = scan.next_page_token
        if not token:
            break
    assert got == expected(lambda w: True)
    assert pages == -(-len(WORDS) // 5)


def test_a_one_partition_scan_follows_its_position_and_reports_first_and_last_page() -> None:
    """The snapshot job's scan: raw bytes, each page bounded by the position the page before
    reported, and where the partition stood on its first and last page."""
    inner = serve(cluster_of(StringSerde(), WORDS), set())
    positions = iter(range(10, 1000, 10))
    bounds: list[str] = []

    def call(request: pb.AllRequest) -> list[pb.ScanReply]:
        bounds.append(request.options.position)
        replies = inner(request)
        for r in replies:
            if r.WhichOneof("part") == "partition" and r.partition.partition == 2:
                pos = next(positions)
                r.partition.metadata.position, r.partition.metadata.position_token = pos, f"tok{pos}"
        return replies  # type: ignore[no-any-return]

    request = build_request(ScanQuery(STORE, ScanKind.ALL), pb.QueryOptions(position="given"),
                            pb.ScanOptions(partitions=[2]))
    scan = Scan(call, request, page_size=1, raw=True, follow_position=True)
    items = list(scan)
    assert items and all(isinstance(i.key, bytes) and isinstance(i.value, bytes) for i in items)
    assert scan.pages == len(bounds) > 2
    assert bounds == ["given"] + [f"tok{10 * n}" for n in range(1, scan.pages)]
    report = scan.reports[2]
    assert (report.first.metadata.position, report.last.metadata.position) == (10, 10 * scan.pages)
    with pytest.raises(ValueError, match="exactly one partition"):
        Scan(call, build_request(ScanQuery(STORE, ScanKind.ALL), pb.QueryOptions(), pb.ScanOptions()),
             follow_position=True)
