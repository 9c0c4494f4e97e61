"""Shared by the integration tests: word-count clusters on the session's broker."""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc

from instance.local.cluster import LocalCluster, ensure_topic
from router.client.sync_client import QueryClient

APP = str(Path(__file__).resolve().parents[2] / "examples" / "wordcount.py")


def wordcount_cluster(bootstrap: str, tmp_path: Path, unique: str, size: int, *config: str,
                      partitions: int = 6, kafka: Mapping[str, str] | None = None,
                      replication: int = 1) -> tuple[LocalCluster, str]:
    """A cluster of ``size`` word-count instances reading its own input topic ``lines-<unique>``
    (``kafka``: the client settings a secured broker needs, for the topic's creation)."""
    topic = f"lines-{unique}"
    ensure_topic(bootstrap, topic, partitions, kafka=kafka, replication=replication)
    cluster = LocalCluster(bootstrap, APP, f"wc-{unique}", tmp_path, size=size, extra_config=list(config),
                           env={"WORDCOUNT_INPUT_TOPIC": topic, "WORDCOUNT_OUTPUT_TOPIC": f"counts-{unique}"})
    return cluster, topic


def static_membership(cluster: LocalCluster) -> None:
    """Give every instance its own ``group.instance.id``, as a StatefulSet does (pod name)."""
    for inst in cluster.instances:
        cluster.per_instance_config[inst.instance_id] = [f"group.instance.id={inst.instance_id}"]


def word_counts(lines: list[str]) -> collections.Counter[str]:
    return collections.Counter(w for t in lines for w in re.split(r"\W+", t.lower()) if w)


def query_all(target: str, words: list[str], **opts: Any) -> dict[str, Any]:
    """word -> count (None when missing or unavailable)."""
    out: dict[str, Any] = {}
    with QueryClient(target, timeout=5) as q:
        for w in words:
            try:
                out[w] = q.get("counts", w, **opts).value
            except grpc.RpcError:
                out[w] = None
    return out


def wait_until(cond: Callable[[], Any], timeout: float, what: str, logs: Callable[[], str] = str) -> Any:
    """Poll ``cond`` until it returns something truthy; fail with ``what`` and the logs."""
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{logs()}")
        time.sleep(0.2)
