"""What a chaos run looks at: the routing table, the counts, restore lines and changelog offsets."""

from __future__ import annotations

import collections
import re
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

import grpc
from confluent_kafka import Consumer, TopicPartition

from examples.wordcount import STORE
from instance.state.checkpoint import read_checkpoint
from kernel.instance_state import State
from kernel.local_read import Role
from kernel.wire_enums import role_of, state_of
from loadtest.chaos.traffic import Clients

_RESTORE_END = re.compile(r"restore-end store=(\S+) changelog=(\S+)\[(\d+)\] restored=(\d+)")


def settle_problem(live: Mapping[str, str], tasks: set[str], clients: Clients) -> str | None:
    """``None`` when every live instance's Metadata RPC shows every live instance RUNNING, each
    task in ``tasks`` active on exactly one live RUNNING instance and nothing restoring; else why not."""
    for asked, target in sorted(live.items()):
        try:
            md = clients(target).metadata()
        except grpc.RpcError as e:
            return f"{asked}: Metadata RPC failed ({e.code().name})"
        seen = {i.instance_id: i for i in md.instances if i.alive}
        not_running = sorted(i for i in live if i not in seen or state_of(seen[i].state) is not State.RUNNING)
        if not_running:
            states = {i: (state_of(seen[i].state).name if i in seen else "absent/dead") for i in not_running}
            return f"{asked} sees {states}"
        claims = collections.Counter(t for i in seen.values() for t in i.active_tasks)
        owned = {t for iid, i in seen.items() if iid in live for t in i.active_tasks}
        unowned = sorted(tasks - owned)
        twice = sorted(t for t, n in claims.items() if n > 1)
        restoring = sorted(t for i in seen.values() for t in i.restoring_tasks)
        if unowned or twice or restoring:
            return f"{asked} sees tasks unowned {unowned}, claimed twice {twice}, restoring {restoring}"
    return None


def active_tasks(live: Mapping[str, str], clients: Clients) -> dict[str, list[str]]:
    """instance id -> its active tasks, as the first live instance that answers sees it."""
    for target in live.values():
        try:
            md = clients(target).metadata()
        except grpc.RpcError:
            continue
        return {i.instance_id: list(i.active_tasks) for i in md.instances if i.alive}
    return {}


def active_store_partitions(live: Mapping[str, str], clients: Clients) -> dict[str, list[int]]:
    """instance id -> partitions of the word-count store it holds as ACTIVE."""
    for target in live.values():
        try:
            md = clients(target).metadata()
        except grpc.RpcError:
            continue
        return {i.instance_id: sorted(s.partition for s in i.stores
                                      if s.store == STORE and role_of(s.role) is Role.ACTIVE)
                for i in md.instances if i.alive}
    return {}


def read_counts(target: str, words: Iterable[str], clients: Clients) -> dict[str, int | None]:
    """word -> count from the active replicas (0 when missing, None when the query failed)."""
    out: dict[str, int | None] = {}
    client = clients(target)
    for w in words:
        try:
            r = client.get(STORE, w)
        except grpc.RpcError:
            out[w] = None
            continue
        out[w] = int(r.value) if r.found else 0
    return out


def restores_after(logs: Mapping[str, tuple[Path, int]], changelog: str,
                   partitions: set[int]) -> tuple[int, int]:
    """(records restored into ``partitions`` of ``changelog``, into any partition) by the
    ``restore-end`` lines each log gained after its byte offset."""
    mine = every = 0
    for path, start in logs.values():
        try:
            with open(path, "rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        for m in _RESTORE_END.finditer(text):
            if m.group(2) != changelog:
                continue
            n = int(m.group(4))
            every += n
            if int(m.group(3)) in partitions:
                mine += n
    return mine, every


def changelog_offsets(bootstrap: str, topic: str, partitions: Iterable[int],
                      read_committed: bool) -> dict[int, int]:
    """partition -> end offset (the last stable offset with ``read_committed``)."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-probe-{uuid.uuid4().hex[:8]}",
                  "enable.auto.commit": False,
                  "isolation.level": "read_committed" if read_committed else "read_uncommitted"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        c.close()


def checkpointed(state_dir: Path, changelog: str, partitions: Iterable[int]) -> dict[int, int]:
    """partition -> changelog offset in the ``.checkpoint`` files under ``state_dir`` (any task dir)."""
    found: dict[int, int] = {}
    wanted = set(partitions)
    for task_dir in state_dir.glob("*/*"):
        for (topic, p), offset in read_checkpoint(task_dir).items():
            if topic == changelog and p in wanted:
                found[p] = offset
    return found
