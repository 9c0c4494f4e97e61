"""Cluster-wide scans on three word-count instances (num.standby.replicas=1), asked through one.

Range, PrefixScan, All and MultiGet return exactly the counts computed here from the input, in
key-byte order, across many small pages; malformed requests are INVALID_ARGUMENT / NOT_FOUND.
Then one instance stops answering: a scan within a short deadline still returns in time (the
deadline crossed the hop) and reports that instance's partitions with a reason; once it is
killed, allow_stale answers completely with those partitions flagged stale (their standbys),
without it they are reported missing, and require_complete fails with UNAVAILABLE.

session.timeout.ms is long so the survivors do not take the dead instance's tasks over while the
test looks, and the stopped instance stays a member (the takeover is test_standby_failover's
subject): the windows the test looks into stay open until it kills the instance and ends.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import grpc
import pytest

from instance.local.cluster import produce, sample_lines
from kernel.local_read import Role
from kernel.rpc import iqmesh_pb2 as pb
from kernel.scan_wire import method_of
from kernel.status_details import refusal_of
from kernel.unavailable import FailureReason
from kernel.wire_enums import role_of
from router.client.forward import FORWARD_TIMEOUT_S
from router.client.scan_pages import Scan
from router.client.sync_client import QueryClient
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration

STORE = "counts"
PAGE = 7  # small: every scan below crosses several page boundaries
DEADLINE_S = 3.0  # of the scan while an instance is silent; below FORWARD_TIMEOUT_S (5 s)


def _lines() -> list[str]:
    lines = sample_lines(2000, seed=5)
    lines += [f"user{i:03d} item{i % 17} user{i % 7:03d}" for i in range(200)]
    return lines


def _pairs(scan: Scan) -> list[tuple[Any, Any]]:
    return [(i.key, i.value) for i in scan]


def _code(fn: Any) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as e:
        fn()
    return e.value.code()  # type: ignore[no-any-return]


@pytest.mark.timeout(240)
def test_scans_over_three_instances(bootstrap: str, tmp_path: Path, unique: str) -> None:
    t_start = time.monotonic()
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 3, "num.standby.replicas=1",
                                       "commit.interval.ms=200", "session.timeout.ms=120000")
    lines = _lines()
    truth = word_counts(lines)
    ordered = sorted(truth.items(), key=lambda kv: kv[0].encode())
    cluster.start()
    try:
        cluster.wait_running(90)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        target = cluster.instances[0].target
        with QueryClient(target, timeout=10) as q:
            def all_counted() -> bool:
                try:
                    return _pairs(q.all(STORE, page_size=100)) == ordered
                except grpc.RpcError:
                    return False
            wait_until(all_counted, 90, "All to return every count", cluster.logs)

            # --- exact answers across page boundaries --------------------------------------
            scan = q.all(STORE, page_size=PAGE)
            assert _pairs(scan) == ordered
            assert scan.pages == -(-len(ordered) // PAGE) and scan.complete
            assert sorted(scan.partitions) == list(range(6))
            assert all(s["available"] and s["role"] is Role.ACTIVE and not s["stale"] for s in scan.partitions.values())
            owners = {s["served_by"] for s in scan.partitions.values()}
            assert len(owners) == 3, owners  # the answer crossed instances

            rng = q.range(STORE, "item", "user050", page_size=PAGE)
            assert _pairs(rng) == [(k, v) for k, v in ordered if "item" <= k <= "user050"]
            assert _pairs(q.range(STORE, to_key="commit", page_size=PAGE)) == [(k, v) for k, v in ordered
                                                                                 if k <= "commit"]
            assert _pairs(q.range(STORE, from_key="user190", page_size=PAGE)) == [(k, v) for k, v in ordered
                                                                                    if k >= "user190"]
            prefixed = [(k, v) for k, v in ordered if k.startswith("user1")]
            assert len(prefixed) == 100
            assert _pairs(q.prefix_scan(STORE, "user1", page_size=PAGE)) == prefixed
            assert _pairs(q.all(STORE, limit=10, page_size=3)) == ordered[:10]

            wanted = ["stream", "user007", "no-such-word", "kafka", "stream"]
            got = [(i.key, i.found, i.value) for i in q.multi_get(STORE, wanted, page_size=2)]
            assert got == sorted([(w, w in truth, truth[w] if w in truth else None) for w in set(wanted)],
                                 key=lambda t: t[0].encode())

            one = q.range(STORE, "kafka", "kafka", with_json=True)
            items = list(one)
            assert [(i.key_json, i.value_json) for i in items] == [('"kafka"', str(truth["kafka"]))], one.partitions

            cli = _cli("prefix", "--target", target, "--store", STORE, "--prefix", "user1", "--page-size", "9")
            assert [(d["key"], d["value"]) for d in cli[:-1]] == prefixed
            assert cli[-1]["complete"] is True and len(cli[-1]["partitions"]) == 6
            cli = _cli("range", "--target", target, "--store", STORE, "--from", "b", "--to", "d", "--limit", "3")
            assert [(d["key"], d["value"]) for d in cli[:-1]] == [(k, v) for k, v in ordered if "b" <= k <= "d"][:3]

            # --- malformed requests: INVALID_ARGUMENT / NOT_FOUND, never INTERNAL -----------
            stub = q._pool.stub(target)
            bad: dict[str, Any] = {
                "garbage page token": pb.AllRequest(store=STORE, scan=pb.ScanOptions(page_token="garbage")),
                "token of another query": pb.AllRequest(store=STORE, scan=pb.ScanOptions(
                    page_token=_first_token(stub.Range(pb.RangeRequest(store=STORE, scan=pb.ScanOptions(limit=1)))))),
                "negative limit": pb.AllRequest(store=STORE, scan=pb.ScanOptions(limit=-1)),
                "partition out of range": pb.AllRequest(store=STORE, scan=pb.ScanOptions(partitions=[6])),
                "forwarded without partitions": pb.AllRequest(store=STORE, forwarded=True),
                "no store": pb.AllRequest(),
                "key not utf-8": pb.MultiGetRequest(store=STORE, keys=[pb.Key(raw=b"\xff\xfe")]),
                "empty key": pb.MultiGetRequest(store=STORE, keys=[pb.Key()]),
                "no keys": pb.MultiGetRequest(store=STORE),
                "no prefix": pb.PrefixScanRequest(store=STORE),
                "bad position": pb.AllRequest(store=STORE, options=pb.QueryOptions(position="x")),
            }
            for what, req in bad.items():
                method = getattr(stub, method_of(req))
                assert _code(lambda m=method, r=req: list(m(r, timeout=5))) is grpc.StatusCode.INVALID_ARGUMENT, what
            assert _code(lambda: list(q.all("nope"))) is grpc.StatusCode.NOT_FOUND

            # --- one instance stops answering, then dies --------------------------------------
            wait_until(lambda: _standbys_warm(q), 60, "every partition to have a caught-up standby", cluster.logs)
            dead_id = cluster.instances[2].instance_id
            probe = q.all(STORE, page_size=PAGE)
            partition_of = {i.key: i.partition for i in probe}
            dead_parts = {p for p, s in probe.partitions.items() if s["served_by"] == dead_id}
            assert dead_parts, "instance 2 owns no partition"
            lost = [(k, v) for k, v in ordered if partition_of[k] not in dead_parts]

            cluster.signal(2, signal.SIGSTOP)  # alive in everyone's view (session.timeout.ms), silent
            cluster.wait_stopped(2)
            with QueryClient(target, timeout=DEADLINE_S) as q2:
                q2.metadata()  # the routing table first: the call timed below is the scan's page alone
                t0 = time.monotonic()
                hung = q2.all(STORE, page_size=1000)
                assert _pairs(hung) == lost  # answered at all: within DEADLINE_S, gRPC's deadline
            elapsed = time.monotonic() - t0
            assert hung.pages == 1
            # a hop without the caller's deadline would have waited FORWARD_TIMEOUT_S for the
            # silent instance (and the call failed with DEADLINE_EXCEEDED); what is above the
            # caller's DEADLINE_S is the client's own work on a busy machine
            assert elapsed < FORWARD_TIMEOUT_S, f"the hop did not get the caller's deadline ({elapsed:.2f}s)"
            assert set(hung.missing) == dead_parts, hung.partitions
            print(f"\nsilent instance: answered in {elapsed:.2f}s, missing {hung.missing}")
            cluster.signal(2, signal.SIGKILL)
            cluster.wait_exit(2, 30)

            stale = q.all(STORE, allow_stale=True, page_size=PAGE)
            assert _pairs(stale) == ordered and stale.complete
            assert stale.stale_partitions == dead_parts, stale.partitions
            assert all(stale.partitions[p]["role"] is Role.STANDBY and stale.partitions[p]["served_by"] != dead_id
                       for p in dead_parts)

            strict = q.all(STORE, page_size=PAGE)
            assert _pairs(strict) == lost
            assert set(strict.missing) == dead_parts
            print(f"dead instance: missing {strict.missing}")
            # PartitionStatus.reason: a field of its own, QueryRefusal.Reason (FailureReason's mirror)
            assert set(strict.missing.values()) <= {
                FailureReason.REBALANCING, FailureReason.NOT_AVAILABLE}, strict.missing
            assert all(strict.partitions[p]["message"] for p in dead_parts)

            with pytest.raises(grpc.RpcError) as e:
                list(q.all(STORE, require_complete=True))
            assert e.value.code() is grpc.StatusCode.UNAVAILABLE
            refusal = refusal_of(e.value)
            assert refusal is not None and refusal.reason in (
                FailureReason.REBALANCING, FailureReason.NOT_AVAILABLE), e.value
            assert _pairs(q.prefix_scan(STORE, "user1", allow_stale=True, require_complete=True,
                                        page_size=PAGE)) == prefixed
    finally:
        cluster.signal(2, signal.SIGKILL)
        cluster.stop()
    print(f"\ntest_scans: {time.monotonic() - t_start:.1f}s")


def _cli(*args: str) -> list[dict[str, Any]]:
    """``iqmesh ARGS``: its JSON lines."""
    out = subprocess.run([sys.executable, "-m", "iqmesh", *args], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def _first_token(replies: Any) -> str:
    return next(r.end.next_page_token for r in replies if r.WhichOneof("part") == "end")


def _standbys_warm(q: QueryClient) -> bool:
    """Every store partition has a standby at (or past) its active's position."""
    md = q.metadata()
    active = {s.partition: s.position for i in md.instances for s in i.stores if role_of(s.role) is Role.ACTIVE}
    standby = {s.partition: s.position for i in md.instances for s in i.stores if role_of(s.role) is Role.STANDBY}
    return len(active) == 6 and all(standby.get(p, -1) >= pos for p, pos in active.items())
