"""The differences the oracle found, shrunk, kept as regression scenarios; ``regressions.json``
holds what Kafka Streams 4.1.1 answered, and 4.4.0 answers the same (refresh it with
``python -m tests.oracle.regressions``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parent / "regressions.json"


def _r(topic: str, key: str | None, value: str | None, ts: int) -> dict[str, Any]:
    return {"topic": topic, "key": key, "value": value, "ts": ts}


def _w(**params: Any) -> dict[str, Any]:
    return {"template": "windowed", "params": {"suppress": "none", "caching": False, **params}}


#: id -> (what was wrong in iqmesh, scenario without id and keys)
SCENARIOS: dict[str, tuple[str, dict[str, Any]]] = {
    "session-aggregates-a-null-value": (
        "time and session windows aggregate a None value (only a None key is dropped)",
        {**_w(kind="session", op="aggregate", size=16, grace=10, emit="update"),
         "inputs": [_r("in", "a", None, 11)]}),
    "windowed-cogroup-aggregates-a-null-value": (
        "a windowed cogroup aggregates a None value",
        {"template": "cogroup", "params": {"size": 10, "grace": 6, "caching": False},
         "inputs": [_r("in", "c", None, 5)]}),
    "global-left-join-null-key": (
        "a left join with a global table joins a None lookup key with no table value (KIP-962)",
        {"template": "global_join", "params": {"mode": "left"}, "inputs": [_r("in", None, "1", 12)]}),
    "stream-table-left-join-null-key": (
        "a left stream-table join joins a None key with no table value (KIP-962)",
        {"template": "stream_table_join", "params": {"mode": "left", "history": 0, "grace": -1, "caching": True},
         "inputs": [_r("left", None, "2", 45)]}),
    "uncached-reduce-forwards-null-null": (
        "an uncached windowed reduce of a None value into a new window forwards Change(None, None)",
        {**_w(kind="hopping", op="reduce", size=20, advance=14, grace=2, emit="update", suppress="time_limit",
              limit=0), "inputs": [_r("in", "b", None, 59)]}),
    "emit-on-close-store-keeps-one-more-ms": (
        "an emit-on-close window store keeps a window while start >= stream time - retention",
        {**_w(kind="tumbling", op="aggregate", size=6, grace=12, emit="close", suppress="window_close"),
         "inputs": [_r("in", "a", "1", 67), _r("in", "c", None, 84)]}),
    "emit-on-close-skips-a-window-expired-before-closing": (
        "an uncached emit-on-close store does not emit a window stream time expired at once",
        {**_w(kind="tumbling", op="reduce", size=8, grace=2, emit="close"),
         "inputs": [_r("in", "b", "1", 36), _r("in", "b", "4", 68)]}),
    "emit-on-close-cached-emits-from-the-cache": (
        "a caching emit-on-close store still emits a window expired before closing",
        {**_w(kind="hopping", op="aggregate", size=11, advance=8, grace=10, emit="close", caching=True),
         "inputs": [_r("in", "b", None, 30), _r("in", "c", "2", 60)]}),
    "sliding-emit-on-close-expired": (
        "sliding windows: a window expired before closing is not emitted",
        {**_w(kind="sliding", op="count", size=5, grace=6, emit="close", caching=True),
         "inputs": [_r("in", "a", "4", 83), _r("in", "b", "2", 100)]}),
    "suppress-releases-ties-by-key-bytes": (
        "suppress releases records of one buffer time in the order of their key bytes",
        {**_w(kind="sliding", op="reduce", size=11, grace=11, emit="update", suppress="window_close"),
         "inputs": [_r("in", "b", "3", 8), _r("in", "a", "4", 7), _r("in", "a", "1", 44)]}),
    "sliding-updates-newest-window-first": (
        "sliding windows update (and forward) the newest window first",
        {**_w(kind="sliding", op="reduce", size=16, grace=3, emit="update"),
         "inputs": [_r("in", "b", "3", 3), _r("in", "b", "2", 13), _r("in", "b", "3", 16)]}),
    "session-past-retention-not-merged": (
        "a session past retention is neither merged nor served, though its segment is there",
        {**_w(kind="session", op="reduce", size=10, grace=0, emit="update"),
         "inputs": [_r("in", "k", "1", 0), _r("in", "k", "3", 20), _r("in", "k", "2", 10)]}),
    "sessions-close-by-end-start-key": (
        "sessions closing together are emitted by end, then start, then key",
        {**_w(kind="session", op="count", size=5, grace=0, emit="close"),
         "inputs": [_r("in", "e", "1", 194), _r("in", "e", "1", 196), _r("in", "b", "1", 196),
                    _r("in", "d", "1", 196), _r("in", "a", "1", 210)]}),
    "stream-table-grace-buffer-time": (
        "a stream-table join's grace buffer: only records it takes move its time, and it releases "
        "only when it takes one (a dropped None value and a late record do neither)",
        {"template": "stream_table_join", "params": {"mode": "left", "history": 100, "grace": 5},
         "inputs": [_r("right", "a", "1", 0), _r("left", "a", "2", 10), _r("left", "a", None, 20),
                    _r("left", "b", "3", 12), _r("left", "c", "4", 21), _r("left", "a", "0", 13)]}),
    "stream-table-grace-buffer-releases-ties-by-key-bytes": (
        "a stream-table join's grace buffer releases records of one timestamp by key bytes",
        {"template": "stream_table_join", "params": {"mode": "left", "history": 100, "grace": 12},
         "inputs": [_r("left", "c", "0", 7), _r("left", "b", "1", 7), _r("left", "a", "0", 27)]}),
    "versioned-latest-never-expires": (
        "a versioned lookup older than the history retention still finds the latest version",
        {"template": "stream_table_join", "params": {"mode": "inner", "history": 20, "grace": 14},
         "inputs": [_r("right", "c", "2", 25), _r("left", "c", "3", 29), _r("right", "a", None, 51),
                    _r("left", "c", "4", 48)]}),
    "stream-join-null-value-moves-no-store-time": (
        "a None value put into a stream-stream join's window store (duplicates kept) is a no-op "
        "that does not move the store's time, so it expires nothing",
        {"template": "stream_stream_join", "params": {"mode": "inner", "before": 1, "after": 4, "grace": 7},
         "inputs": [_r("right", "c", "1", 0), _r("right", "c", None, 12), _r("left", "c", "0", 0)]}),
    "versioned-lone-tombstone-bounds-an-older-put": (
        "a versioned table's tombstone with no earlier version still ends the validity of an "
        "out-of-order put older than it",
        {"template": "stream_table_join", "params": {"mode": "left", "history": 100, "grace": 1},
         "inputs": [_r("right", "a", None, 2), _r("right", "a", "0", 0), _r("left", "a", "4", 20),
                    _r("left", "a", "1", 49)]}),
    "cogroup-cached-window-expired-by-the-other-stream": (
        "a cogroup's caching window store serves a window the other stream's time expired",
        {"template": "cogroup", "params": {"size": 5, "grace": 10, "caching": True},
         "inputs": [_r("in", "c", None, 63), _r("in2", "a", "3", 83), _r("in", "c", "1", 62)]}),
}


def scenarios() -> list[dict[str, Any]]:
    keys = ["a", "b", "c", "d", "e", "k"]
    return [{"id": name, "keys": keys, **s} for name, (_, s) in SCENARIOS.items()]


def recorded() -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in json.loads(RECORDED.read_text())}


def main() -> None:
    from tests.oracle.kstreams import run_batch
    rows = [json.dumps(r, sort_keys=True) for r in run_batch(scenarios())]
    RECORDED.write_text("[\n" + ",\n".join(rows) + "\n]\n")


if __name__ == "__main__":
    main()
