"""The snapshot job's parts that need neither Spark nor a broker: flags, cut tokens and ``--at``,
range planning, row layout and decoding, the store catalog."""

from __future__ import annotations

import argparse
import json
import struct
from pathlib import Path

import pytest

from analytics.snapshot.catalog import Catalog
from analytics.snapshot.changelog import ReadRange, plan_ranges
from analytics.snapshot.cut import Cut, parse_at, read_local_text
from analytics.snapshot.options import SnapshotError, SnapshotOptions, add_arguments, options_from_args
from kernel.instance_state import State
from kernel.metadata import InstanceInfo, StoreInfo
from kernel.tokens import PositionToken


def test_flags_to_options() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--bootstrap", "b:9092", "--application-id", "wc", "--out", "/o", "--stores", "a, b,",
                         "--at", "t1,t2", "--at", "t3", "--incremental", "--kafka-config", "security.protocol=SSL"])
    o = options_from_args(args)
    assert o.stores == ("a", "b") and o.at == ("t1", "t2", "t3") and o.incremental == ""
    assert o.kafka_config == {"security.protocol": "SSL"} and o.source == "changelog"
    assert options_from_args(p.parse_args(["--bootstrap", "b", "--application-id", "a", "--out", "o",
                                           "--incremental", "/base"])).incremental == "/base"
    with pytest.raises(SnapshotError, match="NAME=VALUE"):
        options_from_args(p.parse_args(["--bootstrap", "b", "--application-id", "a", "--out", "o",
                                        "--kafka-config", "novalue"]))
    with pytest.raises(SnapshotError, match="--split-offsets"):
        SnapshotOptions("b", "a", "o", split_offsets=0)


def test_cut_token_round_trip_and_at(tmp_path: Path) -> None:
    cut = Cut({"counts": {0: 10, 1: 0}, "other": {0: 5}})
    token = cut.token("wc")
    at = parse_at((token,), "wc", read_local_text)
    assert at.offsets == cut.offsets and at.cut_stores == {"counts", "other"} and not at.token_stores
    with pytest.raises(SnapshotError, match="application 'wc'"):
        parse_at((token,), "other-app", read_local_text)

    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "manifest.json").write_text(json.dumps({"application_id": "wc", "cut": cut.to_json()}))
    for ref in (str(tmp_path / "snap"), str(tmp_path / "snap") + "/", f"file://{tmp_path}/snap/manifest.json"):
        assert parse_at((ref,), "wc", read_local_text).offsets == cut.offsets

    # position tokens: the highest offset per partition wins, merged with a cut
    t1, t2 = PositionToken("counts", 0, 12).encode(), PositionToken("counts", 0, 11).encode()
    at = parse_at((token, t1, t2, PositionToken("counts", 3, 4).encode()), "wc", read_local_text)
    assert at.offsets["counts"] == {0: 12, 1: 0, 3: 4} and at.token_stores == {"counts"}
    with pytest.raises(SnapshotError, match="no changelog position"):
        parse_at((PositionToken("counts", 0, -1).encode(),), "wc", read_local_text)
    with pytest.raises(SnapshotError, match="neither a cut token"):
        parse_at(("not-a-token-nor-a-path",), "wc", read_local_text)
    with pytest.raises(ValueError):
        Cut.from_json({"counts": {"0": -1}})


def test_plan_ranges_splits_large_partitions() -> None:
    assert plan_ranges("t", {0: 0, 1: 5}, {0: 10, 1: 5, 2: 3}, 4) == [
        ReadRange("t", 0, 0, 4), ReadRange("t", 0, 4, 8), ReadRange("t", 0, 8, 10), ReadRange("t", 2, 0, 3)]
    assert plan_ranges("t", {}, {0: 3}, 1_000_000) == [ReadRange("t", 0, 0, 3)]


def test_layout_decodes_what_it_can() -> None:
    pa = pytest.importorskip("pyarrow", reason="pyarrow comes with pyspark[sql], the analytics extra: "
                             "pip install -e '.[analytics]'")
    from analytics.snapshot.columns import Layout

    layout = Layout("string", "long")
    assert [c for c, _, _ in layout.columns()] == ["key", "value", "key_string", "value_long", "partition", "offset",
                                                   "timestamp_ms"]
    keys = [b"a", b"\xff", b"c"]
    values = [struct.pack(">q", -5), struct.pack(">q", 7), None]
    (batch,) = list(layout.batches(2, keys, values, [1, 2, 3], [10, 20, 30]))
    assert batch.schema == layout.schema()
    assert batch.column("key_string").to_pylist() == ["a", None, "c"]  # not UTF-8: null, bytes kept
    assert batch.column("value_long").to_pylist() == [-5, 7, None]
    assert batch.column("partition").to_pylist() == [2, 2, 2]
    assert Layout("int", "json").json_sides() == ["value"]
    assert [c for c, _, _ in Layout("bytes", "my.avro.Serde").columns()][:3] == ["key", "value", "partition"]
    status = Layout("str", "integer", with_status=True).status_batch(4, '{"x": 1}')
    assert status.num_rows == 1 and status.column("status").to_pylist() == ['{"x": 1}']
    assert pa.types.is_int32(status.schema.field("value_int").type)


def test_catalog_selects_stores() -> None:
    kv = StoreInfo("kv", "a-kv-changelog", "string", "long", 2)
    mem = StoreInfo("mem", "", "string", "long", 2)
    cat = Catalog("a", {"kv": kv, "mem": mem}, {"i": InstanceInfo("i", "h:1", State.RUNNING, store_catalog=(kv, mem))})
    assert cat.select((), "changelog") == [kv]
    assert cat.select((), "instances") == [kv, mem]
    assert cat.select(("mem",), "instances") == [mem]
    with pytest.raises(SnapshotError, match="no changelog"):
        cat.select(("mem",), "changelog")
    with pytest.raises(SnapshotError, match="has no store 'x'; its stores: kv, mem"):
        cat.select(("x",), "changelog")
    assert cat.live_endpoints() == []  # heartbeat 0: not alive
