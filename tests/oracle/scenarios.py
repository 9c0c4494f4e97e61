"""Scenarios for the differential tests: Hypothesis strategies per template (small key domain so
joins and merges happen; null keys and values, tombstones, out-of-order and late records), drawn
in bulk so one JVM runs a whole batch, and the comparison with the oracle, which shrinks a
failing scenario one JVM call per round."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from tests.oracle.kstreams import run_batch
from tests.oracle.templates import run_iqmesh

KEYS = ["a", "b", "c"]
VALUES = ["0", "1", "2", "3", "4"]

#: a template's topics and whether its inputs may have null keys
TOPICS: dict[str, list[str]] = {
    "windowed": ["in"], "count_suppress": ["in"], "stream_table_join": ["left", "right"],
    "table_table_join": ["left", "right"], "stream_stream_join": ["left", "right"],
    "table_groupby": ["in"], "cogroup": ["in", "in2"], "global_join": ["in", "g"],
    "fk_join": ["left", "right"],
}


@st.composite
def records(draw: st.DrawFn, topics: list[str], null_keys: bool = True, max_records: int = 25) -> list[dict]:
    """Mostly advancing timestamps, some out of order or late (up to 30 ms behind)."""
    n = draw(st.integers(1, max_records))
    cursor = 0
    out = []
    for _ in range(n):
        cursor += draw(st.integers(0, 8))
        late = draw(st.integers(1, 30)) if draw(st.integers(0, 9)) >= 7 else 0
        key = None if null_keys and draw(st.integers(0, 19)) == 0 else draw(st.sampled_from(KEYS))
        value = None if draw(st.integers(0, 6)) == 0 else draw(st.sampled_from(VALUES))
        out.append({"topic": draw(st.sampled_from(topics)), "key": key, "value": value,
                    "ts": max(0, cursor - late)})
    return out


def _windowed_params(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["tumbling", "hopping", "sliding", "session"]))
    size = draw(st.integers(3, 20))
    p: dict[str, Any] = {"kind": kind, "op": draw(st.sampled_from(["count", "reduce", "aggregate"])),
                         "size": size, "grace": draw(st.integers(0, 15)),
                         "emit": draw(st.sampled_from(["update", "close"])), "caching": draw(st.booleans()),
                         "suppress": draw(st.sampled_from(["none", "none", "window_close", "time_limit"]))}
    if kind == "session" and p["emit"] == "update":
        # Kafka Streams' caching session store merges a record into a session retention passed
        # while its cache still holds it (a driver's cache never evicts): an artifact of the
        # cache's size, not followed (docs/architecture.md, "Kafka Streams as the oracle")
        p["caching"] = False
    if kind == "hopping":
        p["advance"] = draw(st.integers(1, size))
    if p["suppress"] == "time_limit":
        p["limit"] = draw(st.integers(0, 20))
    return p


def _params(template: str, draw: st.DrawFn) -> dict[str, Any]:
    mode2 = st.sampled_from(["inner", "left"])
    mode3 = st.sampled_from(["inner", "left", "outer"])
    if template == "windowed":
        return _windowed_params(draw)
    if template == "count_suppress":
        return {"limit": draw(st.integers(0, 20)), "caching": draw(st.booleans())}
    if template == "stream_table_join":
        history = draw(st.sampled_from([0, 20, 100, 100]))
        grace = draw(st.integers(0, 15)) if history and draw(st.integers(0, 2)) else -1
        return {"mode": draw(mode2), "history": history, "grace": grace, "caching": draw(st.booleans())}
    if template == "table_table_join":
        return {"mode": draw(mode3), "caching": draw(st.booleans())}
    if template == "stream_stream_join":
        return {"mode": draw(mode3), "before": draw(st.integers(0, 10)), "after": draw(st.integers(0, 10)),
                "grace": draw(st.integers(0, 10))}
    if template == "table_groupby":
        return {"op": draw(st.sampled_from(["aggregate", "count"])), "caching": draw(st.booleans())}
    if template == "cogroup":
        return {"size": draw(st.sampled_from([0, 0, 5, 10])), "grace": draw(st.integers(0, 10)),
                "caching": draw(st.booleans())}
    if template == "global_join":
        return {"mode": draw(mode2)}
    if template == "fk_join":
        return {"mode": draw(mode2), "caching": draw(st.booleans()),
                "extractor": draw(st.sampled_from(["value", "key_value"]))}
    raise ValueError(f"unknown template {template}")


def null_keys_allowed(template: str, params: dict[str, Any]) -> bool:
    # Kafka Streams (4.1.1, 4.4.0) fails with a NullPointerException ("key cannot be null") when a
    # stream-table join with a grace period buffers a null-key record: not a behaviour to copy
    return not (template == "stream_table_join" and params.get("grace", -1) >= 0)


@st.composite
def scenario(draw: st.DrawFn, template: str) -> dict[str, Any]:
    params = _params(template, draw)
    inputs = draw(records(TOPICS[template], null_keys_allowed(template, params)))
    keys = KEYS + (["g0", "g1", "g2"] if template == "table_groupby" else [])
    return {"template": template, "params": params, "keys": keys, "inputs": inputs}


def draw_scenarios(template: str, n: int, seed: int | None = None) -> list[dict[str, Any]]:
    """``n`` scenarios drawn by Hypothesis (deterministic unless ``seed`` is given)."""
    out: list[dict[str, Any]] = []

    @settings(max_examples=n, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck), derandomize=seed is None)
    @given(scenario(template))
    def collect(s: dict[str, Any]) -> None:
        out.append(s)

    if seed is not None:
        collect = hypothesis_seed(seed)(collect)
    collect()
    for i, s in enumerate(out):
        s["id"] = f"{template}-{i}"
    return out


def _unexpired(step: dict[str, Any], horizons: dict[str, list[Any]]) -> dict[str, Any]:
    """``step`` without the expired windows Kafka Streams' caching window and session stores still
    serve from their cache (it merges its cache, not bounded by retention, with the bounded
    store): an artifact of the cache's contents, not a result (docs/architecture.md). A window
    store row is ``[key, start, value, ts]`` and expires by its start; a session store row
    ``[key, start, end, value]`` by its end."""
    stores = dict(step["stores"])
    for name, (horizon, kind) in horizons.items():
        at = 2 if kind == "session" else 1
        stores[name] = [r for r in stores.get(name, []) if r[at] >= horizon]
    return {**step, "stores": stores}


def first_difference(scenario: dict[str, Any], expected: dict[str, Any], actual: dict[str, Any]) -> str | None:
    """None when iqmesh matched Kafka Streams; else what differs first, with the inputs up to it."""
    if (expected["error"] is None) != (actual["error"] is None):
        return f"error: Kafka Streams {expected['error']!r}, iqmesh {actual['error']!r}"
    if expected["error"] is not None:
        return None
    for i, (e, a) in enumerate(zip(expected["steps"], actual["steps"], strict=False)):
        if scenario["params"].get("caching"):
            e = _unexpired(e, actual["horizons"][i])
        if e != a:
            inputs = "\n".join(f"  {r}" for r in scenario["inputs"][:i + 1])
            return (f"after input #{i}:\n{inputs}\n Kafka Streams: {json.dumps(e, sort_keys=True)}\n"
                    f" iqmesh:        {json.dumps(a, sort_keys=True)}")
    if len(expected["steps"]) != len(actual["steps"]):
        return f"steps: Kafka Streams {len(expected['steps'])}, iqmesh {len(actual['steps'])}"
    return None


def shrink(scenario: dict[str, Any], rounds: int = 40,
           oracle: Callable[[list[dict[str, Any]]], list[dict[str, Any]]] = run_batch) -> dict[str, Any]:
    """A smaller failing scenario: drop one input record at a time while the difference stays;
    every round's candidates go to the oracle in one batch."""
    current = scenario
    for _ in range(rounds):
        inputs = current["inputs"]
        if len(inputs) <= 1:
            break
        candidates = [dict(current, id=f"{current['id']}-s{i}", inputs=inputs[:i] + inputs[i + 1:])
                      for i in range(len(inputs))]
        expected = oracle(candidates)
        for cand, exp in zip(candidates, expected, strict=True):
            if first_difference(cand, exp, run_iqmesh(cand)) is not None:
                current = cand
                break
        else:
            break
    return current
