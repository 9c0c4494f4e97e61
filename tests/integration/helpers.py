"""Shared by the integration tests: word-count clusters on the session's broker."""

from __future__ import annotations

import collections
import os
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc
from confluent_kafka import Consumer, TopicPartition

from instance.local.cluster import LocalCluster, ensure_topic
from instance.runtime.group_admin import GroupAdminError, list_transactions
from instance.runtime.holds import Hold
from instance.runtime.membership import owned_by
from instance.runtime.streams_group.group_config import standbys_on_the_group
from kernel.local_read import Role
from kernel.wire_enums import role_of
from router.client.sync_client import QueryClient

APP = str(Path(__file__).resolve().parents[2] / "examples" / "wordcount.py")
#: ``IQMESH_GROUP_PROTOCOL=streams`` runs every word-count cluster of the tests under that protocol
#: (CI runs the scans, watches and the gateway's tests so on Apache Kafka 4.4, beside classic)
GROUP_PROTOCOL = os.environ.get("IQMESH_GROUP_PROTOCOL", "")


def wordcount_cluster(bootstrap: str, tmp_path: Path, unique: str, size: int, *config: str,
                      partitions: int = 6, kafka: Mapping[str, str] | None = None,
                      replication: int = 1) -> tuple[LocalCluster, str]:
    """A cluster of ``size`` word-count instances reading its own input topic ``lines-<unique>``
    (``kafka``: the client settings a secured broker needs, for the topic's creation)."""
    topic = f"lines-{unique}"
    ensure_topic(bootstrap, topic, partitions, kafka=kafka, replication=replication)
    if GROUP_PROTOCOL and not any(c.startswith("group.protocol=") for c in config):
        config = (*config, f"group.protocol={GROUP_PROTOCOL}")
        standbys_on_the_group(bootstrap, f"wc-{unique}", dict(c.split("=", 1) for c in config), kafka)
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


def own_metadata(target: str) -> Any:
    """The instance at ``target`` as its own Metadata reply describes it (None: no answer)."""
    try:
        with QueryClient(target, timeout=5) as q:
            md = q.metadata()
    except grpc.RpcError:
        return None
    return next((i for i in md.instances if i.instance_id == md.asked), None)


def transaction_open(bootstrap: str, application_id: str, instance_id: str) -> bool:
    """Whether the broker lists a transaction of instance ``instance_id`` as Ongoing (ListTransactions):
    it has written records that are neither committed nor aborted (False when it does not answer)."""
    mine = owned_by(application_id, instance_id)
    try:
        return any(mine(tid) for tid, _, _ in list_transactions(bootstrap, ("Ongoing",)))
    except GroupAdminError:
        return False


def hold_commits_mid_run(cluster: LocalCluster, which: list[int], bootstrap: str, exactly_once: bool,
                         feed: Callable[[], object], timeout: float = 120.0) -> None:
    """Catch instances ``which`` in mid-run, whatever the machine's speed: hold their commits
    (Hold.COMMIT; the caller releases it), ``feed`` them input, and wait until one of them has
    processed records since the hold (work no commit covers: the processing came after any
    commit under way when the hold began, on the same thread) and, under exactly-once, has a
    transaction the broker lists as Ongoing. A crash or an outage from then on finds that work
    in flight."""
    cluster.hold(Hold.COMMIT, which)
    targets = {i: cluster.instances[i].target for i in which}

    def processed() -> dict[int, int] | None:
        got = {i: own_metadata(t) for i, t in targets.items()}
        if any(m is None for m in got.values()):
            return None
        return {i: m.counters.records_processed for i, m in got.items()}
    base = wait_until(processed, timeout, "the held instances' counters", cluster.logs)
    feed()

    def in_flight() -> bool:
        for i, t in targets.items():
            m = own_metadata(t)
            if m is None or m.counters.records_processed <= base[i]:
                continue
            if not exactly_once or transaction_open(bootstrap, cluster.application_id, m.instance_id):
                return True
        return False
    wait_until(in_flight, timeout, f"instances {which} to process records with their commits held"
               + (" and a transaction of theirs open" if exactly_once else ""), cluster.logs)


def changelog_position_problems(bootstrap: str, cluster: LocalCluster) -> list[str]:
    """Where an active store's position (what its instance counted while writing its changelog:
    records, and under exactly-once one commit marker per transaction) differs from the end offset
    the broker gives its changelog partition; empty when every one matches (an idle cluster)."""
    problems: list[str] = []
    wanted: dict[tuple[str, int], tuple[str, int]] = {}
    for inst in cluster.running():
        md = own_metadata(inst.target)
        if md is None:
            return [f"{inst.instance_id}: no metadata"]
        for s in md.stores:
            if role_of(s.role) is Role.ACTIVE:
                wanted[(f"{cluster.application_id}-{s.store}-changelog", s.partition)] = (inst.instance_id, s.position)
    if not wanted:
        return ["no active store partition"]
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"positions-{time.monotonic_ns()}"})
    try:
        for (topic, partition), (iid, position) in sorted(wanted.items()):
            end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
            if end != position:
                problems.append(f"{topic}[{partition}] on {iid}: position {position}, end offset {end}")
    finally:
        consumer.close()
    return problems
