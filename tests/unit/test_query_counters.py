"""Query counters: every thread counts into its own slot and none of its counts is lost; the
totals travel in the published InstanceInfo."""

from __future__ import annotations

import threading

from instance.runtime.query_counters import QueryCounters
from kernel.instance_state import State
from kernel.metadata import InstanceCounters, InstanceInfo


def test_threads_count_without_losing_updates() -> None:
    counters = QueryCounters()
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        for _ in range(20_000):
            slot = counters.local.slot  # the servicer's read: made and registered on a thread's first
            slot.gets_local += 1
            slot.get_seconds += 0.5
        slot.errors["NOT_FOUND" if i % 2 else "UNAVAILABLE"] += 3
        slot.scans += 1
        slot.scan_entries += i

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    got = counters.totals(records_processed=7, dropped_records={"late-or-invalid": 2, "processing-error": 0})
    assert got == InstanceCounters(records_processed=7, gets_local=160_000, get_seconds=80_000.0, scans=8,
                                   scan_entries=28, query_errors=(("NOT_FOUND", 12), ("UNAVAILABLE", 12)),
                                   dropped_records=(("late-or-invalid", 2),))
    assert got.queries_answered == 160_008


def test_counters_travel_in_the_instance_info() -> None:
    c = InstanceCounters(records_processed=5, gets_local=1, gets_routed=2, gets_forwarded=3, get_seconds=0.25,
                         scans=4, scan_entries=40, query_errors=(("INVALID_ARGUMENT", 1),),
                         dropped_records=(("deserialization-error", 3),))
    info = InstanceInfo("i0", "h:1", State.RUNNING, counters=c)
    assert InstanceInfo.from_json(info.to_json()).counters == c
    # an instance of an older version publishes no counters: zeros
    old = b'{"instance_id": "i0", "endpoint": "h:1", "state": "RUNNING"}'
    assert InstanceInfo.from_json(old).counters == InstanceCounters()
