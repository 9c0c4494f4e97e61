"""The cut: for every changelog partition of every selected store, the offset a snapshot stands at.

A snapshot holds exactly the records below its cut (the latest value per key, tombstones drop the
key), so it is the state as of the cut whatever the cluster does while the job runs. The cut is
taken at the start from the end offsets a ``read_committed`` client sees, which are the *last stable
offsets*: under exactly-once nothing of an open transaction is below them, and aborted records are
skipped when read. ``--at`` stands elsewhere:

- a cut token printed by an earlier run, or that run's directory / ``manifest.json``: the same cut
  (for a store it names, all of its partitions);
- position tokens from query replies (``position_token``): that partition at that position, the
  other partitions at the current end, so a snapshot shows at least what a dashboard showed. An
  exactly-once active may answer from a transaction not yet committed: the job then waits (at most
  ``--wait-stable`` seconds) for the last stable offset to pass the token.

An old cut is exact only while compaction has not cleaned past it (``min.compaction.lag.ms``
bounds that): compaction may drop a value below the cut that a later record replaced.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import Consumer, KafkaException, TopicPartition

from analytics.snapshot.catalog import kafka_config
from analytics.snapshot.options import SnapshotError
from kernel.metadata import StoreInfo
from kernel.tokens import PositionToken, decode_json_token, encode_json_token

#: store -> partition -> offset
Offsets = dict[str, dict[int, int]]
_CUT_FIELDS = frozenset({"a", "c"})
_MAX_CUT_TOKEN = 1 << 20


@dataclass(frozen=True)
class Cut:
    """End offset (exclusive) per store and changelog partition."""

    offsets: Offsets

    def token(self, application_id: str) -> str:
        return encode_json_token({"a": application_id, "c": self.to_json()})

    def to_json(self) -> dict[str, dict[str, int]]:
        return {s: {str(p): o for p, o in sorted(ps.items())} for s, ps in sorted(self.offsets.items())}

    @staticmethod
    def from_json(doc: object) -> Cut:
        if not isinstance(doc, dict):
            raise ValueError("a cut is an object of stores")
        out: Offsets = {}
        for store, parts in doc.items():
            if not isinstance(store, str) or not isinstance(parts, dict):
                raise ValueError("a cut maps store names to objects of partitions")
            out[store] = {}
            for p, o in parts.items():
                if not (isinstance(o, int) and not isinstance(o, bool) and o >= 0):
                    raise ValueError(f"offset of {store}/{p} is not a non-negative integer")
                out[store][int(p)] = o
        return Cut(out)


def _consumer(bootstrap: str, extra: dict[str, str]) -> Consumer:
    return Consumer(kafka_config(bootstrap, extra, {"group.id": f"iqmesh-snapshot-{uuid.uuid4().hex[:8]}",
                                                      "enable.auto.commit": False,
                                                      "isolation.level": "read_committed"}))


def watermarks(consumer: Consumer, topic: str, partitions: int, timeout: float) -> dict[int, tuple[int, int]]:
    """(low, last stable offset) per partition (a read_committed client's high watermark)."""
    out = {}
    for p in range(partitions):
        try:
            out[p] = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)
        except KafkaException as e:
            raise SnapshotError(f"end offsets of {topic}[{p}] unavailable: {e.args[0]}") from None
    return out


@dataclass(frozen=True)
class Bounds:
    """Where each changelog partition starts (log start offset) and where the snapshot cuts it."""

    cut: Cut
    low: Offsets
    #: how the cut was chosen, for the manifest
    taken_from: str


def take_cut(bootstrap: str, extra: dict[str, str], stores: list[StoreInfo], at: tuple[str, ...],
             read_text: Callable[[str], str], application_id: str, wait_stable_s: float = 60.0,
             timeout: float = 30.0) -> Bounds:
    """The cut of this run: the current last stable offsets, or what ``at`` names (see module doc)."""
    c = _consumer(bootstrap, extra)
    try:
        marks = {s.store: watermarks(c, s.changelog, s.partitions, timeout) for s in stores}
        low = {s: {p: lo for p, (lo, _) in ps.items()} for s, ps in marks.items()}
        offsets = {s: {p: hi for p, (_, hi) in ps.items()} for s, ps in marks.items()}
        if not at:
            return Bounds(Cut(offsets), low, "end offsets (last stable, read_committed) at the start")
        named = parse_at(at, application_id, read_text)
        selected = {s.store for s in stores}
        if named.token_stores - selected:
            raise SnapshotError(f"--at position tokens name store(s) {sorted(named.token_stores - selected)}, "
                                f"which are not selected")
        for info in stores:
            given = named.offsets.get(info.store)
            if given is None:
                continue
            bad = sorted(p for p in given if not 0 <= p < info.partitions)
            if bad:
                raise SnapshotError(f"--at names partition(s) {bad} of {info.store!r}, which has {info.partitions}")
            if info.store in named.cut_stores and len(given) != info.partitions:
                raise SnapshotError(f"the cut given with --at has {len(given)} partition(s) of {info.store!r}, which "
                                    f"has {info.partitions} (the store was repartitioned since)")
            offsets[info.store].update(given)
        for info in stores:
            _check_reachable(c, info, offsets[info.store], low[info.store], wait_stable_s, timeout)
        return Bounds(Cut(offsets), low, "--at " + ", ".join(_shorten(a) for a in at))
    finally:
        c.close()


@dataclass(frozen=True)
class AtOffsets:
    offsets: Offsets
    #: stores named by cut tokens or manifests (every partition), and by position tokens (some)
    cut_stores: frozenset[str]
    token_stores: frozenset[str]


def parse_at(values: tuple[str, ...], application_id: str, read_text: Callable[[str], str]) -> AtOffsets:
    """The offsets named by cut tokens, snapshot paths and position tokens (the highest offset wins
    when several name one partition)."""
    out: Offsets = {}
    cut_stores: set[str] = set()
    token_stores: set[str] = set()

    def put(store: str, partition: int, offset: int) -> None:
        parts = out.setdefault(store, {})
        parts[partition] = max(offset, parts.get(partition, offset))

    for v in values:
        t = _position_token(v)
        if t is not None:
            if t.offset < 0:
                raise SnapshotError(f"position token {_shorten(v)} names no changelog position (store not logged)")
            put(t.store, t.partition, t.offset)
            token_stores.add(t.store)
            continue
        app, cut = _cut_of(v, read_text)
        if app != application_id:
            raise SnapshotError(f"--at {_shorten(v)} is a cut of application {app!r}, not {application_id!r}")
        for store, parts in cut.offsets.items():
            cut_stores.add(store)
            for p, o in parts.items():
                put(store, p, o)
    return AtOffsets(out, frozenset(cut_stores), frozenset(token_stores))


def _position_token(v: str) -> PositionToken | None:
    """``v`` as a query reply's position token (kernel/tokens.py), or None when it is not one."""
    try:
        return PositionToken.decode(v)
    except ValueError:
        return None


def _cut_of(v: str, read_text: Callable[[str], str]) -> tuple[str, Cut]:
    try:
        doc = decode_json_token("cut token", v, _CUT_FIELDS, _MAX_CUT_TOKEN)
        return str(doc["a"]), Cut.from_json(doc["c"])
    except ValueError:
        pass
    path = v if v.endswith(".json") else v.rstrip("/") + "/manifest.json"
    try:
        text = read_text(path)
    except Exception as e:  # noqa: BLE001 - any failure to read means: not a snapshot we can use
        raise SnapshotError(f"--at {_shorten(v)} is neither a cut token, a position token nor a readable snapshot "
                            f"({path}: {e})") from None
    try:
        manifest = json.loads(text)
        return str(manifest["application_id"]), Cut.from_json(manifest["cut"])
    except (ValueError, KeyError, TypeError) as e:
        raise SnapshotError(f"{path} is not a snapshot manifest: {e}") from None


def _check_reachable(c: Consumer, info: StoreInfo, offsets: dict[int, int], low: dict[int, int],
                     wait_stable_s: float, timeout: float) -> None:
    """Every cut offset within [log start, last stable offset]; waits for open transactions below it."""
    deadline = time.monotonic() + wait_stable_s
    for p, o in sorted(offsets.items()):
        if o < low[p]:
            raise SnapshotError(f"cut {o} of {info.changelog}[{p}] is below its log start offset {low[p]}: the "
                                f"changelog no longer holds the state at that cut")
        while True:
            _, stable = c.get_watermark_offsets(TopicPartition(info.changelog, p), timeout=timeout)
            if stable >= o:
                break
            if time.monotonic() > deadline:
                raise SnapshotError(f"cut {o} of {info.changelog}[{p}] is beyond its last stable offset {stable} "
                                    f"after {wait_stable_s}s (a transaction still open, or a cut of another cluster)")
            time.sleep(0.2)


def _shorten(v: str) -> str:
    return v if len(v) <= 48 else v[:45] + "..."


def read_local_text(path: str) -> str:
    """Reads a local path (``file:`` or none); others need Spark's file systems (see output.py)."""
    if path.startswith("file:"):
        path = path[len("file:"):]
        while path.startswith("//"):
            path = path[1:]
    return Path(path).read_text()
