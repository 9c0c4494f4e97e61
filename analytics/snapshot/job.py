"""The snapshot job. The same flags three ways::

    iqmesh snapshot --bootstrap B --application-id A --out DIR [...]
    python -m analytics.snapshot --bootstrap B --application-id A --out DIR [...]
    spark-submit --master URL analytics/snapshot/job.py --bootstrap B --application-id A --out DIR [...]

Order matters for consistency: the application's metadata and the cut are read before Spark starts
(start-up takes seconds), so the cut is the state when the command was given; then every store is
read and written under a temporary directory, the manifest last, and the whole moved into place.
Progress: Spark's console progress bar, plus one line per step on stderr; the summary (with the
cut token a later ``--at`` takes) is one JSON line on stdout.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import sys
import time
from typing import TYPE_CHECKING, Any

from analytics.snapshot.options import SnapshotError, SnapshotOptions, add_arguments, options_from_args

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from analytics.snapshot.columns import Layout
    from analytics.snapshot.cut import Bounds
    from analytics.snapshot.mesh import MeshAccess
    from analytics.snapshot.output import SnapshotDir
    from kernel.metadata import StoreInfo

FORMAT = "iqmesh-snapshot/1"


def log(msg: str) -> None:
    print(f"[snapshot] {msg}", file=sys.stderr, flush=True)


def build_session(master: str | None = None, conf: dict[str, str] | None = None,
                  app_name: str = "iqmesh-snapshot") -> SparkSession:
    """A SparkSession on ``master``; none given: spark-submit's, else ``local[*]``. Local masters
    stay on loopback and run the Python workers with this interpreter (its packages)."""
    try:
        from pyspark import SparkConf
        from pyspark.sql import SparkSession
    except ImportError:
        raise SnapshotError("pyspark is not installed: pip install 'iqmesh[analytics]'") from None
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise SnapshotError("Spark needs Java 17 or newer: none found (install openjdk-17-jre-headless or set "
                            "JAVA_HOME)")
    sc = SparkConf().setAppName(app_name)
    if master is None and "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit, which sets it
        master = "local[*]"
    if master is not None:
        sc.setMaster(master)
    if master is not None and master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        sc.setIfMissing("spark.driver.host", "127.0.0.1")
        sc.setIfMissing("spark.driver.bindAddress", "127.0.0.1")
    sc.setIfMissing("spark.ui.showConsoleProgress", "true")
    sc.setIfMissing("spark.sql.session.timeZone", "UTC")
    for k, v in (conf or {}).items():
        sc.set(k, v)
    return SparkSession.builder.config(conf=sc).getOrCreate()


class _Session:
    """The session the job uses: the caller's, or one built on first use (and stopped at the end)."""

    def __init__(self, spark: SparkSession | None, master: str | None) -> None:
        self._spark, self._master, self.owned = spark, master, False
        self.start_s = 0.0

    def get(self) -> SparkSession:
        if self._spark is None:
            t = time.monotonic()
            self._spark = build_session(self._master)
            self.owned = True
            self.start_s = time.monotonic() - t
            log(f"Spark {self._spark.version} started on {self._spark.sparkContext.master} in {self.start_s:.1f}s")
        return self._spark

    def close(self) -> None:
        if self.owned and self._spark is not None:
            self._spark.stop()


def _is_local(path: str) -> bool:
    return "://" not in path or path.startswith("file:")


def run_snapshot(opts: SnapshotOptions, spark: SparkSession | None = None) -> dict[str, Any]:
    """Write the snapshot ``opts`` asks for; returns its manifest. ``spark``: a session to use (not
    stopped here); without one, one is built and stopped."""
    from analytics.snapshot.catalog import read_catalog
    from analytics.snapshot.cut import read_local_text, take_cut
    from analytics.snapshot.output import MANIFEST, SnapshotDir, read_text

    started = time.monotonic()
    created_at = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    session = _Session(spark, opts.master)

    def read_any(path: str) -> str:
        return read_local_text(path) if _is_local(path) else read_text(session.get(), path)

    try:
        catalog = read_catalog(opts.bootstrap, opts.application_id, opts.kafka_config, opts.timeout_s)
        stores = catalog.select(opts.stores, opts.source)
        log(f"{opts.application_id}: store(s) {', '.join(s.store for s in stores)} ({opts.source} source)")
        bounds: Bounds | None = None
        if opts.source == "changelog":
            bounds = take_cut(opts.bootstrap, opts.kafka_config, stores, opts.at, read_any, opts.application_id,
                              opts.wait_stable_s, opts.timeout_s)
            log(f"cut: {bounds.cut.token(opts.application_id)}")
        else:
            if opts.at and not all(_position_token(a) for a in opts.at):
                raise SnapshotError("--source instances takes only position tokens with --at (as read bounds)")
            from analytics.snapshot.mesh import check_access

            check_access(_mesh_access(opts, catalog.live_endpoints()))  # its TLS settings and token, before Spark
        sp = session.get()
        out = SnapshotDir(sp, opts.out)
        try:
            base = _base_manifest(opts, read_any, MANIFEST) if opts.incremental is not None else None
            docs: dict[str, Any] = {}
            served: dict[str, Any] = {}
            for info in stores:
                t = time.monotonic()
                if bounds is not None:
                    docs[info.store] = _changelog_store(sp, opts, info, bounds, base, out)
                else:
                    # read again: Spark took seconds to start, heartbeats seen before are stale by now
                    endpoints = read_catalog(opts.bootstrap, opts.application_id, opts.kafka_config,
                                             opts.timeout_s).live_endpoints()
                    docs[info.store], served[info.store] = _instances_store(sp, _mesh_access(opts, endpoints),
                                                                            opts, info, out)
                log(f"{info.store}: {docs[info.store]['rows']} rows in {time.monotonic() - t:.1f}s")
            manifest = _manifest(opts, created_at, bounds, base, docs, served, sp, time.monotonic() - started)
            out.write_text(MANIFEST, json.dumps(manifest, indent=2) + "\n")
            out.commit()
        except BaseException:
            out.abort()
            raise
        return manifest
    finally:
        session.close()


def _position_token(v: str) -> bool:
    from kernel.tokens import PositionToken

    try:
        PositionToken.decode(v)
        return True
    except ValueError:
        return False


def _base_manifest(opts: SnapshotOptions, read_any: Any, manifest_name: str) -> dict[str, Any]:
    base_dir = (opts.incremental or opts.out).rstrip("/")
    try:
        doc: dict[str, Any] = json.loads(read_any(f"{base_dir}/{manifest_name}"))
    except SnapshotError:
        raise
    except Exception as e:  # noqa: BLE001 - missing or unreadable: the user's base is not usable
        raise SnapshotError(f"--incremental: no snapshot to build on at {base_dir} ({e})") from None
    if doc.get("format") != FORMAT or doc.get("source") != "changelog":
        raise SnapshotError(f"--incremental: {base_dir} is not a changelog snapshot of this format")
    if doc.get("application_id") != opts.application_id:
        raise SnapshotError(f"--incremental: {base_dir} is a snapshot of {doc.get('application_id')!r}")
    doc["_dir"] = base_dir
    return doc


def _layout(opts: SnapshotOptions, info: StoreInfo, with_status: bool = False) -> Layout:
    from analytics.snapshot.columns import Layout

    if "avro" in (info.key_serde, info.value_serde) and not opts.registry:
        log(f"{info.store}: its Avro records stay bytes: give --config schema.registry.url=... to decode them")
    return Layout(info.key_serde, info.value_serde, with_status=with_status, registry=opts.registry)


def final_columns(layout: Layout) -> list[str]:
    """Column order of a dataset: bytes, decoded, variant, then where the value came from."""
    names = [n for n, _, _ in layout.columns() if n not in ("partition", "offset", "timestamp_ms", "status")]
    for side in layout.json_sides():
        names.insert(names.index(f"{side}_json") + 1, f"{side}_variant")
    return names + ["partition", "offset", "timestamp"]


def _finish(df: DataFrame, layout: Layout) -> DataFrame:
    """Executor rows -> dataset rows: timestamp as TIMESTAMP, VARIANT columns for JSON serdes."""
    from pyspark.sql import functions as F

    if "timestamp_ms" in df.columns:
        df = df.withColumn("timestamp", F.timestamp_millis("timestamp_ms")).drop("timestamp_ms")
    for side in layout.json_sides():
        df = df.withColumn(f"{side}_variant", F.try_parse_json(F.col(f"{side}_json")))
    return df.select(*final_columns(layout))


def _write(sp: SparkSession, df: DataFrame, out: SnapshotDir, info: StoreInfo) -> dict[str, Any]:
    path = out.path(info.store)
    df.write.parquet(path)
    per = {int(r["partition"]): int(r["count"]) for r in sp.read.parquet(path).groupBy("partition").count().collect()}
    return {"path": info.store, "rows": sum(per.values()),
            "rows_per_partition": {str(p): per.get(p, 0) for p in range(info.partitions)},
            "key_serde": info.key_serde, "value_serde": info.value_serde, "partitions": info.partitions,
            "changelog": info.changelog}


def _changelog_store(sp: SparkSession, opts: SnapshotOptions, info: StoreInfo, bounds: Bounds,
                     base: dict[str, Any] | None, out: SnapshotDir) -> dict[str, Any]:
    from pyspark.sql import functions as F

    from analytics.snapshot.changelog import consumer_config, latest_per_key, plan_ranges, read_frame

    layout = _layout(opts, info)
    ends, low = bounds.cut.offsets[info.store], bounds.low[info.store]
    starts, mode, why = dict(low), "full", ""
    if base is not None:
        why = _incompatible(base, info, ends, low)
        if not why:
            mode = "incremental"
            starts = {int(p): int(o) for p, o in base["cut"][info.store].items()}
        else:
            log(f"{info.store}: full read ({why})")
    ranges = plan_ranges(info.changelog, starts, ends, opts.split_offsets)
    split = len(ranges) > len({r.partition for r in ranges})
    keep_tombstones = split or mode == "incremental"
    log(f"{info.store}: {mode} read of {info.changelog}, {sum(r.end - r.start for r in ranges)} offsets in "
        f"{len(ranges)} task(s)")
    rows = read_frame(sp, ranges, layout, consumer_config(opts.bootstrap, opts.kafka_config), keep_tombstones,
                      low)
    if split:
        rows = latest_per_key(rows)
    cols = [c for c in final_columns(layout) if not c.endswith("_variant")]
    rows = _finish(rows, layout).select(*cols)
    if base is not None and mode == "incremental":
        previous = sp.read.parquet(f"{base['_dir']}/{info.store}").select(*cols)
        rows = previous.join(rows.select("partition", "key"), ["partition", "key"], "left_anti").unionByName(rows)
    if keep_tombstones:
        rows = rows.where(F.col("value").isNotNull())
    doc = _write(sp, _finish(rows, layout), out, info)
    doc["mode"] = mode
    if why:
        doc["full_because"] = why
    return doc


def _incompatible(base: dict[str, Any], info: StoreInfo, ends: dict[int, int], low: dict[int, int]) -> str:
    """Why the base snapshot cannot be built on for this store ("" if it can)."""
    doc = base.get("stores", {}).get(info.store)
    cut = base.get("cut", {}).get(info.store)
    if doc is None or cut is None:
        return "the base snapshot does not have it"
    for field in ("changelog", "key_serde", "value_serde", "partitions"):
        if doc.get(field) != getattr(info, field):
            return f"its {field} changed since the base snapshot"
    offsets = {int(p): int(o) for p, o in cut.items()}
    behind = [p for p, o in offsets.items() if ends[p] < o]
    if behind:
        raise SnapshotError(f"the cut of {info.store!r} is before the base snapshot's on partition(s) {behind}")
    if any(low[p] > o for p, o in offsets.items()):
        return "the changelog's log start offset moved past the base snapshot's cut"
    return ""


def _mesh_access(opts: SnapshotOptions, endpoints: list[str]) -> MeshAccess:
    from analytics.snapshot.mesh import MeshAccess

    return MeshAccess(tuple(endpoints), opts.application_id, opts.security, opts.timeout_s, opts.allow_stale)


def _instances_store(sp: SparkSession, access: MeshAccess, opts: SnapshotOptions, info: StoreInfo,
                     out: SnapshotDir) -> tuple[dict[str, Any], dict[str, Any]]:
    from pyspark.sql import functions as F

    from analytics.snapshot.instances import scan_frame
    from analytics.snapshot.mesh import require_endpoints
    from kernel.tokens import PositionToken

    require_endpoints(access)
    tokens = {t.partition: a for a in opts.at if (t := PositionToken.decode(a)).store == info.store}
    layout = _layout(opts, info, with_status=True)
    log(f"{info.store}: scanning {info.partitions} partition(s) through {len(access.endpoints)} instance(s)")
    df = scan_frame(sp, access, info.store, info.partitions, layout, tokens)
    statuses = [json.loads(r["status"]) for r in df.where(F.col("status").isNotNull()).select("status").collect()]
    doc = _write(sp, _finish(df.where(F.col("status").isNull()).drop("status"), layout), out, info)
    doc["mode"] = "full"
    return doc, {str(s["partition"]): s for s in sorted(statuses, key=lambda s: s["partition"])}


def _manifest(opts: SnapshotOptions, created_at: str, bounds: Bounds | None, base: dict[str, Any] | None,
              docs: dict[str, Any], served: dict[str, Any], sp: SparkSession, seconds: float) -> dict[str, Any]:
    from analytics.snapshot.cut import Cut

    doc: dict[str, Any] = {"format": FORMAT, "application_id": opts.application_id, "created_at": created_at,
                           "source": opts.source}
    if bounds is not None:
        doc.update(cut=bounds.cut.to_json(), cut_token=bounds.cut.token(opts.application_id),
                   cut_from=bounds.taken_from)
    else:
        # the positions the mesh served: a cut when every partition stood still while it was paged
        positions = Cut({s: {int(p): st["position"] for p, st in parts.items()} for s, parts in served.items()})
        steady = all(st["position"] == st["first_position"] >= 0 for parts in served.values() for st in parts.values())
        doc.update(cut=positions.to_json(), cut_token=positions.token(opts.application_id) if steady else None,
                   cut_from="positions served by the instances" + ("" if steady else " (moved while paged)"),
                   served=served)
    doc["base"] = None if base is None else {"path": base["_dir"], "created_at": base.get("created_at"),
                                             "cut": base.get("cut")}
    doc["stores"] = docs
    doc["spark"] = {"version": sp.version, "master": sp.sparkContext.master}
    doc["seconds"] = round(seconds, 3)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="iqmesh snapshot", description=__doc__.split("\n\n")[0])
    add_arguments(p)
    return run_from_args(p.parse_args(argv))


def run_from_args(args: argparse.Namespace) -> int:
    """Run and print the summary; a SnapshotError is one line on stderr and exit status 2."""
    try:
        manifest = run_snapshot(options_from_args(args))
    except SnapshotError as e:
        from instance.error_line import report_error  # the error line of every iqmesh command

        report_error("snapshot", "SNAPSHOT_ERROR", str(e))
        return 2
    print(json.dumps({"out": args.out, "application_id": manifest["application_id"], "source": manifest["source"],
                      "rows": {s: d["rows"] for s, d in manifest["stores"].items()},
                      "cut_token": manifest["cut_token"], "seconds": manifest["seconds"]}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
