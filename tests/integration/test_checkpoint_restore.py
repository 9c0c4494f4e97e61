"""Checkpoints: a restart after a clean close restores only the changelog delta; without a
checkpoint the whole changelog is replayed."""

from __future__ import annotations

import re
import time
from pathlib import Path

import pytest

from instance.local.cluster import LocalCluster, ensure_topic, produce
from router.client.sync_client import QueryClient

pytestmark = pytest.mark.integration

APP = str(Path(__file__).resolve().parents[2] / "examples" / "wordcount.py")
KEYS = 20_000


def _restored(log: str) -> int:
    return sum(int(n) for n in re.findall(r"restore-end .* restored=(\d+)", log))


def _wait_count(cluster: LocalCluster, word: str, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    with QueryClient(cluster.instances[0].target, timeout=5) as q:
        while True:
            try:
                if q.get("counts", word).value == n:
                    return
            except Exception:
                pass
            assert time.monotonic() < deadline, cluster.logs()
            time.sleep(0.2)


def test_restart_after_clean_close_restores_only_the_delta(bootstrap: str, tmp_path: Path, unique: str) -> None:
    topic = f"ck-{unique}"
    ensure_topic(bootstrap, topic, 6)
    cluster = LocalCluster(bootstrap, APP, f"ck-{unique}", tmp_path, size=1,
                           extra_config=["commit.interval.ms=500"],
                           env={"WORDCOUNT_INPUT_TOPIC": topic, "WORDCOUNT_OUTPUT_TOPIC": f"ck-out-{unique}"})
    log_path = cluster.instances[0].log_path
    produce(bootstrap, topic, ((None, f"u{i} common".encode()) for i in range(KEYS)))
    cluster.start()
    try:
        _wait_count(cluster, "common", KEYS)
        cluster.signal(0)
        assert cluster.wait_exit(0, 60) == 0, cluster.logs()
        checkpoints = list(cluster.instances[0].state_dir.rglob(".checkpoint"))
        assert checkpoints, "a clean close writes .checkpoint files"

        produce(bootstrap, topic, ((None, f"v{i} common".encode()) for i in range(100)))
        before = len(log_path.read_text())
        cluster.start()
        _wait_count(cluster, "common", KEYS + 100)
        cluster.wait_running(120, expected=1)
        second_run = log_path.read_text()[before:]
        with QueryClient(cluster.instances[0].target) as q:
            assert q.get("counts", "u12345").value == 1  # state from before the restart is there
        assert _restored(second_run) < 1000, second_run

        # without checkpoints the same restart replays the whole changelog
        cluster.signal(0)
        assert cluster.wait_exit(0, 60) == 0
        for ck in cluster.instances[0].state_dir.rglob(".checkpoint"):
            ck.unlink()
        before = len(log_path.read_text())
        cluster.start()
        _wait_count(cluster, "common", KEYS + 100)
        cluster.wait_running(120, expected=1)  # every partition restored, not only "common"'s
        third_run = log_path.read_text()[before:]
        assert _restored(third_run) >= KEYS, third_run
    finally:
        cluster.stop()
