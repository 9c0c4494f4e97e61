"""The snapshot job on changelogs written here (no instances): real PySpark on local[2], the dev
broker, the metadata record an instance publishes. What a store holds is known exactly, so every
row, offset and decoded column is checked; and exactly-once: an open transaction at the cut, an
aborted one, the incremental merge and ``--at`` an earlier cut."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from analytics.snapshot import SnapshotError, SnapshotOptions
from analytics.snapshot.cut import Cut
from analytics.snapshot.job import run_snapshot
from kernel.metadata import StoreInfo
from kernel.partitioner import default_partition
from kernel.tokens import decode_json_token
from loadtest.snapshot import publish_app, write_changelog
from tests.analytics.helpers import int_cut, snapshot_rows, state_at

pytestmark = pytest.mark.integration
LONG = struct.Struct(">q").pack


def _high(bootstrap: str, topic: str, partitions: int, committed: bool) -> dict[int, int]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "t",
                  "isolation.level": "read_committed" if committed else "read_uncommitted"})
    try:
        return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions)}
    finally:
        c.close()


def test_latest_values_tombstones_decoding_split_ranges(spark: Any, bootstrap: str, tmp_path: Path,
                                                        unique: str) -> None:
    app = f"syn-{unique}"
    kv = StoreInfo("kv", f"{app}-kv-changelog", "string", "json", 3)
    nums = StoreInfo("nums", f"{app}-nums-changelog", "int", "long", 2)
    raw = StoreInfo("raw", f"{app}-raw-changelog", "string", "avro-custom", 1)
    unlogged = StoreInfo("cache", "", "string", "string", 3)
    publish_app(bootstrap, app, [kv, nums, raw, unlogged])

    # kv: 40 keys, every 4th deleted, every 6th written again after; offsets follow write order
    expected: dict[str, dict[tuple[int, bytes], tuple[bytes, int]]] = {"kv": {}, "nums": {}, "raw": {}}
    next_offset = {("kv", p): 0 for p in range(3)} | {("nums", p): 0 for p in range(2)} | {("raw", 0): 0}

    def records(store: StoreInfo, items: list[tuple[bytes, bytes | None]]) -> list[tuple[int, bytes, bytes | None]]:
        out = []
        for k, v in items:
            p = default_partition(k, store.partitions)
            o = next_offset[(store.store, p)]
            next_offset[(store.store, p)] = o + 1
            if v is None:
                expected[store.store].pop((p, k), None)
            else:
                expected[store.store][(p, k)] = (v, o)
            out.append((p, k, v))
        return out

    kv_items: list[tuple[bytes, bytes | None]] = [(b"k%02d" % i, json.dumps({"n": i, "tag": "a"}).encode())
                                                  for i in range(40)]
    kv_items += [(b"k%02d" % i, None) for i in range(0, 40, 4)]
    kv_items += [(b"k%02d" % i, json.dumps({"n": i * 100}).encode()) for i in range(0, 40, 6)]
    kv_items += [(b"bad-json", b"{not json")]
    write_changelog(bootstrap, kv.changelog, records(kv, kv_items))
    num_items: list[tuple[bytes, bytes | None]] = [(struct.pack(">i", -i), LONG(i * 1_000_000_000_000))
                                                   for i in range(20)]
    num_items += [(struct.pack(">i", -3), None)]
    write_changelog(bootstrap, nums.changelog, records(nums, num_items))
    write_changelog(bootstrap, raw.changelog, records(raw, [(b"r%d" % i, bytes([i, 0, 255])) for i in range(5)]))

    out = tmp_path / "snap"
    manifest = run_snapshot(SnapshotOptions(bootstrap, app, str(out), split_offsets=7), spark)

    assert sorted(manifest["stores"]) == ["kv", "nums", "raw"]  # the unlogged store has no changelog
    for info in (kv, nums, raw):
        cut = int_cut(manifest, info.store)
        assert cut == _high(bootstrap, info.changelog, info.partitions, True)
        want = {pk: v for pk, (v, _) in expected[info.store].items()}
        assert snapshot_rows(spark, out, info.store) == want == state_at(bootstrap, info.changelog, cut)
        doc = manifest["stores"][info.store]
        assert doc["rows"] == len(want) and doc["mode"] == "full"
        assert doc["rows_per_partition"] == {str(p): sum(1 for q, _ in want if q == p) for p in range(info.partitions)}
        offsets = {(r["partition"], bytes(r["key"])): r["offset"]
                   for r in spark.read.parquet(f"{out}/{info.store}").select("partition", "key", "offset").collect()}
        assert offsets == {pk: o for pk, (_, o) in expected[info.store].items()}
    assert Cut.from_json(decode_json_token("cut", manifest["cut_token"], frozenset({"a", "c"}), 1 << 20)["c"]) \
        == Cut.from_json(manifest["cut"])

    # decoded columns: typed where the serde has a Spark type, JSON also as VARIANT
    cols = spark.read.parquet(f"{out}/kv").columns
    assert cols == ["key", "value", "key_string", "value_json", "value_variant", "partition", "offset", "timestamp"]
    spark.read.parquet(f"{out}/kv").createOrReplaceTempView(f"kv_{unique}")
    got = {r["key_string"]: (r["n"], r["value_json"]) for r in spark.sql(
        f"SELECT key_string, value_variant:n::int AS n, value_json FROM kv_{unique}").collect()}
    assert got["k06"] == (600, '{"n": 600}') and got["k01"] == (1, '{"n": 1, "tag": "a"}')
    assert got["bad-json"] == (None, "{not json") and "k04" not in got
    nums_rows = {r["key_int"]: r["value_long"] for r in spark.read.parquet(f"{out}/nums").collect()}
    assert nums_rows == {-i: i * 1_000_000_000_000 for i in range(20) if i != 3}
    assert spark.read.parquet(f"{out}/raw").columns == ["key", "value", "key_string", "partition", "offset",
                                                         "timestamp"]
    ts = spark.read.parquet(f"{out}/raw").select("timestamp").collect()
    assert all(r["timestamp"] is not None for r in ts)


def test_exactly_once_cut_incremental_and_at(spark: Any, bootstrap: str, tmp_path: Path, unique: str) -> None:
    app = f"eos-{unique}"
    kv = StoreInfo("kv", f"{app}-kv-changelog", "string", "long", 2)
    publish_app(bootstrap, app, [kv])
    tx = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"tx-{unique}"})
    tx.init_transactions()

    def txn(items: list[tuple[bytes, bytes | None]], commit: bool | None) -> None:
        tx.begin_transaction()
        for k, v in items:
            tx.produce(kv.changelog, v, k, partition=default_partition(k, 2))
        tx.flush(30)
        if commit is True:
            tx.commit_transaction()
        elif commit is False:
            tx.abort_transaction()

    txn([(b"a%d" % i, LONG(i)) for i in range(10)], True)
    txn([(b"aborted-%d" % i, LONG(-1)) for i in range(5)] + [(b"a0", LONG(999))], False)
    txn([(b"open-%d" % i, LONG(7)) for i in range(4)], None)  # still open at the cut

    out1 = tmp_path / "s1"
    m1 = run_snapshot(SnapshotOptions(bootstrap, app, str(out1)), spark)
    cut1 = int_cut(m1, "kv")
    assert cut1 == _high(bootstrap, kv.changelog, 2, True)
    assert any(cut1[p] < h for p, h in _high(bootstrap, kv.changelog, 2, False).items())  # the open txn is beyond
    rows1 = snapshot_rows(spark, out1, "kv")
    assert {k for _, k in rows1} == {b"a%d" % i for i in range(10)} and rows1[(default_partition(b"a0", 2), b"a0")] \
        == LONG(0)
    assert rows1 == state_at(bootstrap, kv.changelog, cut1)

    tx.commit_transaction()  # the open transaction commits after the cut
    txn([(b"a1", None), (b"a2", None), (b"a3", LONG(333)), (b"n1", LONG(1))], True)
    txn([(b"a4", None), (b"aborted-x", LONG(5))], False)

    out2, out3, out4 = tmp_path / "s2", tmp_path / "s3", tmp_path / "s4"
    m2 = run_snapshot(SnapshotOptions(bootstrap, app, str(out2)), spark)
    rows2 = snapshot_rows(spark, out2, "kv")
    assert rows2 == state_at(bootstrap, kv.changelog, int_cut(m2, "kv"))
    assert {k for _, k in rows2} == ({b"a%d" % i for i in range(10)} - {b"a1", b"a2"}) | {
        b"open-%d" % i for i in range(4)} | {b"n1"}

    # incremental from s1 to s2's cut == the full s2, row for row (offsets and timestamps too)
    m3 = run_snapshot(SnapshotOptions(bootstrap, app, str(out3), at=(m2["cut_token"],), incremental=str(out1)), spark)
    assert m3["stores"]["kv"]["mode"] == "incremental" and m3["base"]["path"] == str(out1)
    assert m3["cut"] == m2["cut"]

    def full_rows(out: Path) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in spark.read.parquet(f"{out}/kv").drop("value_variant").collect())

    assert full_rows(out3) == full_rows(out2)

    # --at an earlier snapshot: the same rows as then, whatever came after
    m4 = run_snapshot(SnapshotOptions(bootstrap, app, str(out4), at=(str(out1),)), spark)
    assert m4["cut"] == m1["cut"] and full_rows(out4) == full_rows(out1)

    # replacing: an incremental onto itself (--incremental, no BASE), nothing new: the same rows
    m5 = run_snapshot(SnapshotOptions(bootstrap, app, str(out2), incremental=""), spark)
    assert m5["stores"]["kv"]["mode"] == "incremental" and full_rows(out2) == full_rows(out3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s1", "s2", "s3", "s4"]  # nothing left behind


def test_failed_run_leaves_the_previous_snapshot(spark: Any, bootstrap: str, tmp_path: Path, unique: str,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    app = f"fail-{unique}"
    a = StoreInfo("a", f"{app}-a-changelog", "string", "string", 1)
    b = StoreInfo("b", f"{app}-b-changelog", "string", "string", 1)
    publish_app(bootstrap, app, [a, b])
    write_changelog(bootstrap, a.changelog, [(0, b"x", b"1")])
    write_changelog(bootstrap, b.changelog, [(0, b"y", b"2")])
    out = tmp_path / "snap"
    run_snapshot(SnapshotOptions(bootstrap, app, str(out)), spark)
    before = (out / "manifest.json").read_text()

    import analytics.snapshot.job as job

    real = job._write

    def fail_on_b(sp: Any, df: Any, o: Any, info: StoreInfo) -> dict[str, Any]:
        if info.store == "b":
            raise RuntimeError("injected failure while writing b")
        return real(sp, df, o, info)

    monkeypatch.setattr(job, "_write", fail_on_b)
    write_changelog(bootstrap, a.changelog, [(0, b"x", b"changed")])
    with pytest.raises(RuntimeError, match="injected"):
        run_snapshot(SnapshotOptions(bootstrap, app, str(out)), spark)
    assert (out / "manifest.json").read_text() == before
    assert snapshot_rows(spark, out, "a") == {(0, b"x"): b"1"}
    assert [p.name for p in tmp_path.iterdir()] == ["snap"]  # no half snapshot anywhere

    not_a_snapshot = tmp_path / "data"
    not_a_snapshot.mkdir()
    (not_a_snapshot / "precious.txt").write_text("keep")
    with pytest.raises(SnapshotError, match="not a snapshot"):
        run_snapshot(SnapshotOptions(bootstrap, app, str(not_a_snapshot)), spark)
    assert (not_a_snapshot / "precious.txt").read_text() == "keep"


def test_clear_errors_before_spark_starts(bootstrap: str, tmp_path: Path, unique: str) -> None:
    """Nothing here starts a JVM: every error is found from the metadata and the broker."""
    app = f"err-{unique}"
    publish_app(bootstrap, app, [StoreInfo("kv", f"{app}-kv-changelog", "string", "long", 2),
                                 StoreInfo("mem", "", "string", "long", 2)])
    out = str(tmp_path / "snap")
    cases = {
        "no application 'nope-": SnapshotOptions(bootstrap, f"nope-{unique}", out),
        "has no store 'missing'; its stores: kv, mem": SnapshotOptions(bootstrap, app, out, stores=("missing",)),
        "have no changelog": SnapshotOptions(bootstrap, app, out, stores=("mem",)),
        "cannot reach the Kafka cluster at 127.0.0.1:1": SnapshotOptions("127.0.0.1:1", app, out, timeout_s=2),
        "neither a cut token": SnapshotOptions(bootstrap, app, out, at=("garbage",)),
        "names partition(s) [5]": SnapshotOptions(bootstrap, app, out, at=(_token("kv", 5, 0),)),
        "beyond its last stable offset": SnapshotOptions(bootstrap, app, out, at=(_token("kv", 0, 50),),
                                                         wait_stable_s=0.5),
    }
    for message, opts in cases.items():
        with pytest.raises(SnapshotError, match=_re(message)):
            run_snapshot(opts)
    with pytest.raises(SnapshotError, match="--incremental needs --source changelog"):
        SnapshotOptions(bootstrap, app, out, source="instances", incremental="")

    # the command: one line on stderr, exit status 2
    r = subprocess.run([sys.executable, "-m", "iqmesh", "snapshot", "--bootstrap", bootstrap,
                        "--application-id", app, "--out", out, "--stores", "missing"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip().splitlines()[-1].startswith(
        "iqmesh snapshot: error: SNAPSHOT_ERROR: application")


def _token(store: str, partition: int, offset: int) -> str:
    from kernel.tokens import PositionToken

    return PositionToken(store, partition, offset).encode()


def _re(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.timeout(300)
def test_spark_submit_runs_the_job_unchanged(spark: Any, bootstrap: str, tmp_path: Path, unique: str) -> None:
    """``spark-submit analytics/snapshot/job.py``: the file Spark ships to a cluster, on local[2]."""
    app = f"submit-{unique}"
    kv = StoreInfo("kv", f"{app}-kv-changelog", "string", "long", 2)
    publish_app(bootstrap, app, [kv])
    write_changelog(bootstrap, kv.changelog, [(default_partition(b"w%d" % i, 2), b"w%d" % i, LONG(i))
                                              for i in range(50)])
    submit = Path(sys.executable).parent / "spark-submit"
    job_file = Path(__file__).resolve().parents[2] / "analytics" / "snapshot" / "job.py"
    out = tmp_path / "snap"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "SPARK_LOCAL_IP": "127.0.0.1"}
    r = subprocess.run([str(submit), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
                        "--conf", "spark.driver.host=127.0.0.1", str(job_file), "--bootstrap", bootstrap,
                        "--application-id", app, "--out", str(out)],
                       capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["rows"] == {"kv": 50} and summary["source"] == "changelog"
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spark"]["master"] == "local[2]" and manifest["cut_token"] == summary["cut_token"]
    assert snapshot_rows(spark, out, "kv") == {(default_partition(b"w%d" % i, 2), b"w%d" % i): LONG(i)
                                               for i in range(50)}
