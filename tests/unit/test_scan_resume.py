"""A scan stopped at its limit hands the rest to a later caller through ``next_page_token``
(the REST gateway's pages): resuming returns every key once, in order, and ends with no token."""

from __future__ import annotations

from instance.serde import StringSerde
from router.client.scan_pages import Scan
from router.core.scan_query import ScanKind, ScanQuery
from router.core.scan_wire import build_request
from router.rpc import iqmesh_pb2 as pb
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
