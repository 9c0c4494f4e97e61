"""What a scenario looks at through the instances' own answers: is every partition served by an
up-to-date active (the routing table), are the counts exact, how much was restored."""

from __future__ import annotations

import collections
import re
from collections.abc import Iterable
from pathlib import Path

import grpc

from router.client import QueryClient

_RESTORE_END = re.compile(r"restore-end store=(\S+) changelog=(\S+)\[(\d+)\] restored=(\d+)")


def unsettled(client: QueryClient, pods: Iterable[str], tasks: int) -> str | None:
    """None when every pod in ``pods`` is alive and RUNNING in the routing table, each of the
    ``tasks`` tasks active on exactly one of them and nothing restoring; else why not."""
    try:
        md = client.metadata()
    except grpc.RpcError as e:
        return f"Metadata failed: {e.code().name if isinstance(e, grpc.Call) else e}"
    seen = {i.instance_id: i for i in md.instances if i.alive}
    wanted = set(pods)
    not_running = sorted(p for p in wanted if p not in seen or seen[p].state != "RUNNING")
    if not_running:
        return f"not RUNNING: {not_running}"
    extra = sorted(set(seen) - wanted)
    if extra:
        return f"still in the table: {extra}"
    claims = collections.Counter(t for i in seen.values() for t in i.active_tasks)
    restoring = sorted(t for i in seen.values() for t in i.restoring_tasks)
    if len(claims) < tasks or any(n > 1 for n in claims.values()) or restoring:
        return f"active tasks {dict(claims)}, restoring {restoring}"
    return None


def read_counts(client: QueryClient, words: Iterable[str]) -> dict[str, int | None]:
    """word -> count from the active replicas (0 when missing, None when the query failed)."""
    out: dict[str, int | None] = {}
    for w in words:
        try:
            r = client.get("counts", w, timeout=5)
        except grpc.RpcError:
            out[w] = None
            continue
        out[w] = int(r.value) if r.found else 0
    return out


def restored(logs: Iterable[tuple[Path, int]]) -> int:
    """Changelog records restored, by the ``restore-end`` lines the logs gained after the offsets."""
    total = 0
    for path, start in logs:
        try:
            with open(path, "rb") as f:
                f.seek(start)
                text = f.read().decode(errors="replace")
        except OSError:
            continue
        total += sum(int(m.group(4)) for m in _RESTORE_END.finditer(text))
    return total
