"""The snapshot of stores whose values are Schema Registry records (issue 31): Avro values decoded
with the registry the job is given (``--config schema.registry.url=...``) into ``value_json`` and
``value_variant``, JSON Schema values with no registry needed, and Avro left as bytes, with a line
saying why, when no registry is given. Real PySpark, a real registry (Apicurio), the dev broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from analytics.snapshot import SnapshotOptions
from analytics.snapshot.job import run_snapshot
from instance.local.schema_registry import RegistryHandle
from instance.serde.schema_registry import AvroSerde, JsonSchemaSerde
from kernel.metadata import StoreInfo
from kernel.partitioner import default_partition
from loadtest.snapshot import publish_app, write_changelog

pytestmark = pytest.mark.integration

SCHEMA = """{"type": "record", "name": "Account", "namespace": "iqmesh.test",
 "fields": [{"name": "owner", "type": "string"}, {"name": "balance", "type": "long"},
            {"name": "tags", "type": {"type": "array", "items": "string"}}]}"""
JSON_SCHEMA = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})


def test_avro_and_json_schema_values_are_decoded_columns(spark: Any, bootstrap: str, registry: RegistryHandle,
                                                         tmp_path: Path, unique: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    app = f"reg-{unique}"
    accounts = StoreInfo("accounts", f"{app}-accounts-changelog", "string", "avro", 2)
    docs = StoreInfo("docs", f"{app}-docs-changelog", "string", "json-schema", 1)
    publish_app(bootstrap, app, [accounts, docs])
    avro = AvroSerde({"schema.registry.url": registry.url}, topic=accounts.changelog, schema=SCHEMA)
    values = {f"u{i}": {"owner": f"u{i}", "balance": i * 10, "tags": ["t"] * (i % 3)} for i in range(12)}
    rows = []
    for key, value in values.items():
        data = avro.serialize(value)
        assert data is not None
        rows.append((default_partition(key.encode(), 2), key.encode(), data))
    rows.append((default_partition(b"junk", 2), b"junk", b"\x00\x00\x00"))  # not framed: null, kept as bytes
    write_changelog(bootstrap, accounts.changelog, rows)
    js = JsonSchemaSerde({"schema.registry.url": registry.url}, topic=docs.changelog, schema=JSON_SCHEMA)
    write_changelog(bootstrap, docs.changelog, [(0, b"d%d" % i, js.serialize({"n": i})) for i in range(3)])

    out = tmp_path / "with-registry"
    run_snapshot(SnapshotOptions(bootstrap, app, str(out), registry=(("schema.registry.url", registry.url),)),
                 spark)
    df = spark.read.parquet(f"{out}/accounts")
    assert "value_json" in df.columns and "value_variant" in df.columns
    df.createOrReplaceTempView(f"acc_{unique}")
    got = {r["key_string"]: (r["value_json"], r["balance"]) for r in spark.sql(
        f"SELECT key_string, value_json, value_variant:balance::bigint AS balance FROM acc_{unique}").collect()}
    assert {k: (json.loads(j), b) for k, (j, b) in got.items() if k != "junk"} == {
        k: (v, v["balance"]) for k, v in values.items()}
    assert got["junk"] == (None, None)
    docs_rows = {r["key_string"]: r["value_json"] for r in spark.read.parquet(f"{out}/docs").collect()}
    assert {k: json.loads(v) for k, v in docs_rows.items()} == {f"d{i}": {"n": i} for i in range(3)}

    # no registry: the Avro store keeps its bytes only, and the job says how to decode them
    capsys.readouterr()
    bare = tmp_path / "bare"
    run_snapshot(SnapshotOptions(bootstrap, app, str(bare)), spark)
    assert "value_json" not in spark.read.parquet(f"{bare}/accounts").columns
    assert "schema.registry.url" in capsys.readouterr().err
    assert "value_json" in spark.read.parquet(f"{bare}/docs").columns
