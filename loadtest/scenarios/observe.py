"""What a scenario looks at through the instances' own answers: is every partition served by an
up-to-date active (the routing table), are the counts exact, how much was restored."""

from __future__ import annotations

import collections
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import grpc

from kernel.instance_state import State
from kernel.wire_enums import state_of
from router.client.sync_client import QueryClient

_RESTORE_END = re.compile(r"restore-end store=(\S+) changelog=(\S+)\[(\d+)\] restored=(\d+)")


@dataclass(frozen=True)
class Unsettled:
    """Why the cluster is not settled (``why``, for people) and whether a pod is rebalancing."""

    why: str
    rebalancing: bool = False

    def __str__(self) -> str:
        return self.why


def unsettled(client: QueryClient, pods: Iterable[str], tasks: int, spread: bool = False) -> Unsettled | None:
    """None when every pod in ``pods`` is alive and RUNNING in the routing table, each of the
    ``tasks`` tasks active on exactly one of them and nothing restoring (``spread``: and every pod
    holding one when there are enough; the streams protocol's assignor moves tasks to joiners a
    heartbeat or a warm-up later); else why not."""
    try:
        md = client.metadata()
    except grpc.RpcError as e:
        return Unsettled(f"Metadata failed: {e.code().name if isinstance(e, grpc.Call) else e}")
    seen = {i.instance_id: i for i in md.instances if i.alive}
    wanted = set(pods)
    states = {p: state_of(seen[p].state) for p in wanted if p in seen}
    not_running = {p: states[p].name if p in states else "absent" for p in sorted(wanted)
                   if states.get(p) is not State.RUNNING}
    if not_running:
        return Unsettled(f"not RUNNING: {not_running}", State.REBALANCING in states.values())
    extra = sorted(set(seen) - wanted)
    if extra:
        return Unsettled(f"still in the table: {extra}")
    claims = collections.Counter(t for i in seen.values() for t in i.active_tasks)
    restoring = sorted(t for i in seen.values() for t in i.restoring_tasks)
    if len(claims) < tasks or any(n > 1 for n in claims.values()) or restoring:
        return Unsettled(f"active tasks {dict(claims)}, restoring {restoring}")
    idle = sorted(p for p in wanted if not seen[p].active_tasks)
    if spread and len(claims) >= len(wanted) and idle:
        return Unsettled(f"pods without tasks yet: {idle}")
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


class Watcher(threading.Thread):
    """Samples the routing table every ``period`` s while the scenario runs: marks "rebalance"
    when some partition stops being served by an up-to-date active (and why), "served" when
    every one is again, and adds up the time spent unserved."""

    def __init__(self, client: QueryClient, pods: Callable[[], list[str]], tasks: int,
                 mark: Callable[[str, str], None], period: float = 0.5) -> None:
        super().__init__(name="watcher", daemon=True)
        self.client, self.pods, self.tasks, self.mark, self.period = client, pods, tasks, mark, period
        self.unserved_s = 0.0
        self.episodes = 0
        self._halt = threading.Event()

    def run(self) -> None:
        since: float | None = None
        while not self._halt.wait(self.period):
            why = unsettled(self.client, self.pods(), self.tasks)
            now = time.monotonic()
            if why is not None and since is None:
                since = now
                self.episodes += 1
                self.mark("rebalance" if why.rebalancing else "unserved", why.why[:120])
            elif why is None and since is not None:
                self.unserved_s += now - since
                since = None
                self.mark("served", "")
        if since is not None:
            self.unserved_s += time.monotonic() - since

    def stop(self) -> float:
        self._halt.set()
        self.join(30)
        return round(self.unserved_s, 1)
