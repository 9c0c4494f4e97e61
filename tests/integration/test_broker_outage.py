"""The only broker stops while input flows and comes back: no instance dies, queries meanwhile are
answered stale-flagged or refused with a clear status, and the counts come out right afterwards.

Each test runs a broker of its own (the suite's engine: the dev broker, or Apache Kafka with
``IQMESH_BROKER=kafka``) in a data directory that survives its restart. ``IQMESH_OUTAGE_S`` sets the
outage (default 20 s; the longer ones of the issue, 90 s and 300 s, are the same test with that
variable set, e.g. ``IQMESH_OUTAGE_S=90 pytest tests/integration/test_broker_outage.py``). Without it a
5 s outage under exactly-once runs too: on the dev broker the hard case, as its restart forgets the
transactions open across it (tests/conformance/test_broker_restart.py).

The broker stops with work in flight whatever the machine's speed: the instances' commits are held
(Hold.COMMIT, instance/runtime/holds.py) until they have processed input no commit covers (under
exactly-once, until a transaction of theirs is open on the broker), released once it is gone.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import grpc
import pytest

from devtools.suite_broker import suite_engine
from instance.local import engines
from instance.local.cluster import produce, sample_lines
from instance.runtime.holds import Hold
from router.client.sync_client import QueryClient
from tests.integration.helpers import hold_commits_mid_run, wait_until, word_counts, wordcount_cluster
from tests.integration.test_crash_recovery import wait_for_counts, wait_positions_right

pytestmark = pytest.mark.integration

OUTAGE_S = float(os.environ.get("IQMESH_OUTAGE_S", "20"))
LINES = 6_000
#: (guarantee, outage seconds); by default also a 5 s outage under exactly-once, shorter than the
#: producer's transaction timeout: its transaction is still open when the broker comes back
#: Apache Kafka, exactly-once, 5 s, with the transactions open when the broker stops (held so since
#: this stop): in 1 of the runs so far (CI under two CPU burners) both instances were RUNNING 2 min
#: after the restart yet no Get answered; one instance's instances-topic reader had last logged
#: NOT_LEADER_FOR_PARTITION and never "works again". Not diagnosed yet: a known defect, not a
#: test that races the machine.
_KAFKA_EOS_5S = pytest.mark.xfail(suite_engine() == "kafka", strict=False,
                                  reason="known defect: after a 5 s outage with open transactions on Apache "
                                         "Kafka an instance's routing view can stay broken (not diagnosed)")
CASES = [("at_least_once", OUTAGE_S), ("exactly_once_v2", OUTAGE_S),
         *([] if "IQMESH_OUTAGE_S" in os.environ else [pytest.param("exactly_once_v2", 5.0, marks=_KAFKA_EOS_5S)])]


@pytest.mark.parametrize(("guarantee", "outage_s"), CASES)
def test_broker_stops_and_comes_back(tmp_path: Path, unique: str, guarantee: str, outage_s: float) -> None:
    engine = suite_engine()
    if os.environ.get("IQMESH_BOOTSTRAP"):
        pytest.skip("stops and restarts a broker of its own; IQMESH_BOOTSTRAP names one it cannot restart")
    broker_dir = tmp_path / "broker"
    handle = engines.start(engine, broker_dir)
    bootstrap = handle.bootstrap
    port = int(bootstrap.rsplit(":", 1)[1])
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, f"processing.guarantee={guarantee}",
                                       "commit.interval.ms=500")
    lines = sample_lines(LINES, seed=11)
    truth = word_counts(lines)
    words = sorted(truth)
    quarter, half = LINES // 4, LINES // 2
    eos = guarantee == "exactly_once_v2"
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[:quarter]))
        target = cluster.instances[0].target
        with QueryClient(target, timeout=5) as q:
            wait_until(lambda: (q.get("counts", words[0], allow_stale=True).value or 0) > 0, 90,
                       "the first input to be counted", cluster.logs)
        # the next quarter while commits are held: the broker goes with work in flight
        hold_commits_mid_run(cluster, [0, 1], bootstrap, eos,
                             lambda: produce(bootstrap, topic, ((None, t.encode()) for t in lines[quarter:half])))

        engines.stop(broker_dir)
        cluster.release(Hold.COMMIT)  # the commits due meet the outage
        answered = refused = 0
        errors: list[BaseException] = []
        outage_end = time.monotonic() + outage_s
        stop_querying = threading.Event()

        def query_during_outage() -> None:
            nonlocal answered, refused
            try:
                with QueryClient(target, timeout=3) as q:
                    while not stop_querying.is_set():
                        try:
                            r = q.get("counts", words[0], allow_stale=True)
                            answered += 1
                            assert r.value is not None
                        except grpc.RpcError as e:
                            assert e.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED), e
                            refused += 1
                        stop_querying.wait(0.5)
            except BaseException as e:  # an assertion above fails the test, not only this thread
                errors.append(e)

        querier = threading.Thread(target=query_during_outage, daemon=True)
        querier.start()
        while time.monotonic() < outage_end:  # the outage itself: nothing to wait for
            dead = [i.instance_id for i in cluster.instances if i.proc is None or i.proc.poll() is not None]
            assert not dead, f"{dead} exited while the broker was away\n{cluster.logs()}"
            time.sleep(0.5)
        stop_querying.set()
        querier.join(10)
        if errors:
            raise errors[0]
        assert answered + refused > 0

        engines.start(engine, broker_dir, port=port)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines[half:]))
        wait_for_counts(target, truth, cluster, exact=True)
        wait_positions_right(bootstrap, cluster)
        dead = [i.instance_id for i in cluster.instances if i.proc is None or i.proc.poll() is not None]
        assert not dead, f"{dead} exited after the broker came back\n{cluster.logs()}"
    finally:
        cluster.stop()
        engines.stop(broker_dir)
