"""Three real instance processes on the dev broker: every word answered through one instance,
then again by the two survivors after one instance is stopped."""

from __future__ import annotations

import collections
import re
import time
from pathlib import Path

import grpc
import pytest

from instance.local.cluster import LocalCluster, ensure_topic, produce, sample_lines
from kernel.local_read import Role
from router.client.sync_client import QueryClient

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parents[2] / "examples" / "wordcount.py")


def _topics(unique: str) -> dict[str, str]:
    return {"WORDCOUNT_INPUT_TOPIC": f"lines-{unique}", "WORDCOUNT_OUTPUT_TOPIC": f"counts-{unique}"}


def _truth(lines: list[str]) -> collections.Counter[str]:
    return collections.Counter(w for t in lines for w in re.split(r"\W+", t.lower()) if w)


def _wrong_answers(target: str, truth: collections.Counter[str]) -> list[str]:
    wrong = []
    with QueryClient(target, timeout=5) as q:
        for w, n in truth.items():
            try:
                if q.get("counts", w).value != n:
                    wrong.append(w)
            except grpc.RpcError:
                wrong.append(w)
    return wrong


def _wait_correct(target: str, truth: collections.Counter[str], timeout: float,
                  cluster: LocalCluster) -> None:
    deadline = time.monotonic() + timeout
    wrong = list(truth)
    while time.monotonic() < deadline:
        wrong = _wrong_answers(target, truth)
        if not wrong:
            return
        time.sleep(0.5)
    raise AssertionError(f"{len(wrong)} words wrong through {target}, e.g. {wrong[:5]}\n{cluster.logs()}")


def test_three_instances_answer_every_word_and_survive_one_leaving(bootstrap: str, tmp_path: Path,
                                                                    unique: str) -> None:
    topic = f"lines-{unique}"
    ensure_topic(bootstrap, topic, 6)
    cluster = LocalCluster(bootstrap, APP, f"wc-{unique}", tmp_path, size=3, env=_topics(unique))
    cluster.start()
    try:
        cluster.wait_running(120)
        lines = sample_lines(20_000, seed=11)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        truth = _truth(lines)
        _wait_correct(cluster.instances[0].target, truth, 120, cluster)

        # each instance owns some counts: the answers above crossed instances
        with QueryClient(cluster.instances[0].target) as q:
            served_by = {q.get("counts", w).metadata["served_by"] for w in truth}
        assert len(served_by) == 3

        # right away, as a user would: no waiting for a commit (at-least-once, default commit
        # interval); the survivors must still end exact
        cluster.signal(2)
        assert cluster.wait_exit(2, 60) == 0
        cluster.wait_running(120, expected=2)
        for inst in cluster.instances[:2]:
            _wait_correct(inst.target, truth, 60, cluster)
    finally:
        cluster.stop()


def test_missing_key_is_not_found_and_unknown_store_is_not_found_status(bootstrap: str, tmp_path: Path,
                                                                      unique: str) -> None:
    ensure_topic(bootstrap, f"lines-{unique}", 6)
    cluster = LocalCluster(bootstrap, APP, f"wc-{unique}", tmp_path, size=1, env=_topics(unique))
    cluster.start()
    try:
        cluster.wait_running(120)
        with QueryClient(cluster.instances[0].target) as q:
            r = q.get("counts", "no-such-word-ever-written")
            assert r.found is False and r.value is None
            assert r.metadata["role"] is Role.ACTIVE
            with pytest.raises(grpc.RpcError) as e:
                q.get("no-such-store", "x")
            assert e.value.code() is grpc.StatusCode.NOT_FOUND
            assert "no-such-store" in (e.value.details() or "")
    finally:
        cluster.stop()
