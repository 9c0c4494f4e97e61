"""The oracle's templates (kstreams/src/main/java/iqmesh/oracle/Templates.java) built with
iqmesh's DSL, and a runner giving the oracle's output shape from iqmesh's TopologyTestDriver.

Same conventions as the Java side: String keys, input values Strings of small numbers or None;
aggregates are Longs (values parsed, None as 0) or Strings joined with '+'; join results are
"left|right" ("null" for a missing side); a windowed result's key is "key@start/end".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from instance.serde import LongSerde, Serde, StringSerde
from instance.state.versioned_store import Stores
from instance.testing import TopologyTestDriver
from instance.topology import (
    BufferConfig,
    EmitStrategy,
    Joined,
    JoinWindows,
    KTable,
    Materialized,
    SessionWindows,
    SlidingWindows,
    StreamJoined,
    StreamsBuilder,
    Suppressed,
    TimeWindows,
    Topology,
)

S: Serde = StringSerde()
L: Serde = LongSerde()
_MAX = 2**63 - 1


def num(v: str | None) -> int:
    return 0 if v is None else int(v)


def _s(v: Any) -> str:
    return "null" if v is None else str(v)


def cat(a: Any, b: Any) -> str:
    return f"{_s(a)}+{_s(b)}"


def pair(left: Any, right: Any) -> str:
    return f"{_s(left)}|{_s(right)}"


def window_key(wk: Any, _v: Any = None) -> str:
    return f"{wk.key}@{wk.window.start}/{wk.window.end}"


@dataclass
class Built:
    topology: Topology
    outputs: dict[str, Serde]
    stores: dict[str, str]  # name -> "kv" | "window" | "session"


def _m(name: str, p: dict[str, Any], value_serde: Serde | None = None, key_serde: Serde | None = None) -> Materialized:
    return Materialized(name=name, key_serde=key_serde, value_serde=value_serde,
                        caching_enabled=bool(p.get("caching", False)))


def _builder() -> StreamsBuilder:
    return StreamsBuilder(default_key_serde=S, default_value_serde=S)


def windowed(p: dict[str, Any]) -> Built:
    b = _builder()
    kind, op = p["kind"], p["op"]
    size, grace = int(p.get("size", 10)), int(p.get("grace", 0))
    g = b.stream("in", key_serde=S, value_serde=S).group_by_key(S, S)
    longs = op != "reduce"
    vs = L if longs else S
    m = _m("win-store", p, vs)
    w: Any
    if kind == "session":
        w = g.windowed_by(SessionWindows.of_inactivity_gap_and_grace(size, grace))
    elif kind == "sliding":
        w = g.windowed_by(SlidingWindows.of_time_difference_and_grace(size, grace))
    else:
        tw = TimeWindows.of_size_and_grace(size, grace)
        if kind == "hopping":
            tw = tw.advance_by(int(p["advance"]))
        w = g.windowed_by(tw)
    if p.get("emit") == "close":
        w = w.emit_strategy(EmitStrategy.on_window_close())
    table: KTable
    if op == "count":
        table = w.count(m)
    elif op == "reduce":
        table = w.reduce(cat, m)
    elif kind == "session":
        table = w.aggregate(lambda: 0, lambda k, v, agg: agg + num(v), lambda k, a, c: a + c, m)
    else:
        table = w.aggregate(lambda: 0, lambda k, v, agg: agg + num(v), m)
    suppress = p.get("suppress", "none")
    if suppress == "window_close":
        table = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    elif suppress == "time_limit":
        table = table.suppress(Suppressed.until_time_limit(int(p["limit"]), BufferConfig.unbounded()))
    table.to_stream().select_key(window_key).to("out", key_serde=S, value_serde=vs)
    return Built(b.build(), {"out": vs}, {"win-store": "session" if kind == "session" else "window"})


def count_suppress(p: dict[str, Any]) -> Built:
    b = _builder()
    (b.stream("in").group_by_key().count(_m("count-store", p))
     .suppress(Suppressed.until_time_limit(int(p["limit"]), BufferConfig.unbounded()))
     .to_stream().to("out", key_serde=S, value_serde=L))
    return Built(b.build(), {"out": L}, {"count-store": "kv"})


def stream_table_join(p: dict[str, Any]) -> Built:
    b = _builder()
    history, grace = int(p.get("history", 0)), int(p.get("grace", -1))
    stores: dict[str, str] = {}
    if history > 0:
        right = b.table("right", Materialized.as_(Stores.persistent_versioned_key_value_store("right-store", history)))
    else:
        right = b.table("right", _m("right-store", p))
        stores["right-store"] = "kv"
    joined = Joined.with_(S, S, S)
    if grace >= 0:
        joined = joined.with_grace_period(grace)
    left = b.stream("left")
    out = left.left_join(right, pair, joined) if p["mode"] == "left" else left.join(right, pair, joined)
    out.to("out", key_serde=S, value_serde=S)
    return Built(b.build(), {"out": S}, stores)


def table_table_join(p: dict[str, Any]) -> Built:
    b = _builder()
    left = b.table("left", _m("left-store", p))
    right = b.table("right", _m("right-store", p))
    m = _m("join-store", p, S, S)
    mode = p["mode"]
    joined = (left.left_join(right, pair, m) if mode == "left" else
              left.outer_join(right, pair, m) if mode == "outer" else left.join(right, pair, m))
    joined.to_stream().to("out", key_serde=S, value_serde=S)
    return Built(b.build(), {"out": S}, {"left-store": "kv", "right-store": "kv", "join-store": "kv"})


def stream_stream_join(p: dict[str, Any]) -> Built:
    b = _builder()
    w = JoinWindows.of_time_difference_and_grace(int(p["before"]), int(p["grace"])).after(int(p["after"]))
    left, right = b.stream("left"), b.stream("right")
    sj = StreamJoined.with_(S, S, S)
    mode = p["mode"]
    out = (left.left_join(right, pair, w, sj) if mode == "left" else
           left.outer_join(right, pair, w, sj) if mode == "outer" else left.join(right, pair, w, sj))
    out.to("out", key_serde=S, value_serde=S)
    return Built(b.build(), {"out": S}, {})


def table_groupby(p: dict[str, Any]) -> Built:
    b = _builder()
    table = b.table("in", _m("in-store", p))
    grouped = table.group_by(lambda k, v: (f"g{num(v) % 3}", v), S, S)
    m = _m("agg-store", p, L)
    agg = (grouped.count(m) if p.get("op") == "count" else
           grouped.aggregate(lambda: 0, lambda k, v, a: a + num(v), lambda k, v, a: a - num(v), m))
    agg.to_stream().to("out", key_serde=S, value_serde=L)
    return Built(b.build(), {"out": L}, {"in-store": "kv", "agg-store": "kv"})


def cogroup(p: dict[str, Any]) -> Built:
    b = _builder()
    one = b.stream("in").group_by_key()
    two = b.stream("in2").group_by_key()
    c = one.cogroup(lambda k, v, a: a + "a" + _s(v)).cogroup(two, lambda k, v, a: a + "b" + _s(v))
    size = int(p.get("size", 0))
    if size > 0:
        t = c.windowed_by(TimeWindows.of_size_and_grace(size, int(p.get("grace", 0)))).aggregate(
            lambda: "", _m("cogroup-store", p, S))
        t.to_stream().select_key(window_key).to("out", key_serde=S, value_serde=S)
        return Built(b.build(), {"out": S}, {"cogroup-store": "window"})
    c.aggregate(lambda: "", _m("cogroup-store", p, S)).to_stream().to("out", key_serde=S, value_serde=S)
    return Built(b.build(), {"out": S}, {"cogroup-store": "kv"})


def global_join(p: dict[str, Any]) -> Built:
    b = _builder()
    g = b.global_table("g", Materialized(name="g-store"))
    stream = b.stream("in")
    out = (stream.left_join(g, lambda k, v: k, pair) if p["mode"] == "left" else
           stream.join(g, lambda k, v: k, pair))
    out.to("out", key_serde=S, value_serde=S)
    return Built(b.build(), {"out": S}, {"g-store": "kv"})


def foreign_key(v: str) -> str | None:
    """The foreign key of a left value: "a", "b" or "c" by the number, none for "4"."""
    return None if v == "4" else "abc"[num(v) % 3]


def foreign_key_of(k: str, v: str) -> str | None:
    """The foreign key of a left row from its key and value: shifted by the key's place in "abc"."""
    return None if v == "4" else "abc"[(num(v) + "abc".index(k)) % 3]


def fk_join(p: dict[str, Any]) -> Built:
    b = _builder()
    left = b.table("left", _m("left-store", p))
    right = b.table("right", _m("right-store", p))
    m = _m("join-store", p, S, S)
    fk = foreign_key_of if p.get("extractor") == "key_value" else foreign_key
    joined = (left.left_join(right, fk, pair, m) if p["mode"] == "left" else left.join(right, fk, pair, m))
    joined.to_stream().to("out", key_serde=S, value_serde=S)
    return Built(b.build(), {"out": S}, {"left-store": "kv", "right-store": "kv", "join-store": "kv"})


TEMPLATES: dict[str, Callable[[dict[str, Any]], Built]] = {
    "windowed": windowed, "count_suppress": count_suppress, "stream_table_join": stream_table_join,
    "table_table_join": table_table_join, "stream_stream_join": stream_stream_join,
    "table_groupby": table_groupby, "cogroup": cogroup, "global_join": global_join, "fk_join": fk_join,
}


def _dump(driver: TopologyTestDriver, name: str, kind: str, keys: list[str]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    if kind == "kv":
        view = driver.get_timestamped_key_value_store(name)
        for k in keys:
            vt = view.get(k)
            if vt is not None:
                rows.append([k, vt.value, vt.timestamp])
    elif kind == "window":
        ws = driver.get_window_store(name)
        for k in keys:
            for start, (v, ts) in ws.fetch_timestamped_range(k, 0, _MAX):
                rows.append([k, start, v, ts])
    else:
        ss = driver.get_session_store(name)
        for k in keys:
            for wk, v in ss.fetch(k):
                rows.append([k, wk.window.start, wk.window.end, v])
    return rows


def _horizons(driver: TopologyTestDriver, built: Built) -> dict[str, list[Any]]:
    """Per window or session store: the oldest window time not expired (stream time - retention
    + 1), which the comparison needs where Kafka Streams' cache still serves expired windows."""
    out = {}
    for name, kind in built.stores.items():
        if kind != "kv":
            store: Any = driver.get_key_value_store(name)
            out[name] = [store.observed_stream_time - store.retention_ms + 1, kind]
    return out


def run_iqmesh(scenario: dict[str, Any]) -> dict[str, Any]:
    """One scenario through iqmesh's TopologyTestDriver, in the oracle's output shape."""
    result: dict[str, Any] = {"id": scenario["id"], "steps": [], "error": None}
    try:
        built = TEMPLATES[scenario["template"]](scenario["params"])
    except Exception as e:  # noqa: BLE001 - reported, compared with the oracle's
        result["error"] = f"build: {e!r}"
        return result
    keys = scenario["keys"]
    driver = TopologyTestDriver(built.topology, {"application.id": "oracle"})
    try:
        for rec in scenario["inputs"]:
            try:
                driver.pipe_raw(rec["topic"], S.serialize(rec["key"]), S.serialize(rec["value"]), rec["ts"])
            except Exception as e:  # noqa: BLE001
                result["error"] = f"pipe: {e!r}"
                return result
            outputs: dict[str, list[list[Any]]] = {}
            for topic, vs in sorted(built.outputs.items()):
                rows = outputs[topic] = []
                while (m := driver.read_output(topic)) is not None:
                    rows.append([S.deserialize(m.key()), vs.deserialize(m.value()), m.timestamp()[1]])
            stores = {name: _dump(driver, name, kind, keys) for name, kind in built.stores.items()}
            result["steps"].append({"outputs": outputs, "stores": stores})
            result.setdefault("horizons", []).append(_horizons(driver, built))
    finally:
        driver.close()
    return result
