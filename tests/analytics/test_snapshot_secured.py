"""The instances source against a mesh that serves TLS and requires a bearer token (issue 19):
the job dials through the routing client with the client settings the CLI's client commands take
(``--config``/``--config-file``), in the driver and in the Spark tasks; without the token, or with
a wrong one, it stops before Spark with one line naming the setting (exit 2)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from analytics.snapshot import SnapshotError, SnapshotOptions
from analytics.snapshot.job import run_snapshot
from analytics.snapshot.options import add_arguments, options_from_args
from instance.local.cluster import produce, sample_lines
from kernel.security import Security
from router.client.sync_client import QueryClient
from tests.analytics.helpers import snapshot_rows
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster
from tests.integration.test_security import self_signed

pytestmark = pytest.mark.integration
STORE = "counts"
TOKEN = "snapshot-s3cret"


def _options(*argv: str) -> SnapshotOptions:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return options_from_args(p.parse_args(list(argv)))


@pytest.mark.timeout(300)
def test_instances_source_over_tls_with_the_token(spark: Any, bootstrap: str, tmp_path: Path, unique: str) -> None:
    cert, key = self_signed(tmp_path)
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "commit.interval.ms=200",
                                       f"iqmesh.tls.cert.file={cert}", f"iqmesh.tls.key.file={key}",
                                       f"iqmesh.tls.ca.file={cert}", f"iqmesh.auth.token={TOKEN}")
    truth = dict(word_counts(lines := sample_lines(400, seed=7)))
    cluster.start()
    try:
        cluster.wait_running(90)
        produce(bootstrap, topic, ((None, t.encode()) for t in lines))
        with QueryClient(cluster.instances[0].target, security=Security(ca_file=str(cert), token=TOKEN)) as q:
            def counted() -> bool:
                try:
                    return {i.key: i.value for i in q.all(STORE, require_complete=True)} == truth
                except grpc.RpcError:
                    return False
            wait_until(counted, 90, "every count over TLS", cluster.logs)

        # the flags of both entry points: a client properties file, as for `iqmesh get`
        props = tmp_path / "client.properties"
        props.write_text(f"iqmesh.tls.ca.file={cert}\niqmesh.auth.token={TOKEN}\n")
        out = tmp_path / "snap"
        common = ("--bootstrap", bootstrap, "--application-id", cluster.application_id, "--source", "instances")
        opts = _options(*common, "--out", str(out), "--config-file", str(props))
        assert opts.security == Security(ca_file=str(cert), token=TOKEN)
        manifest = run_snapshot(opts, spark)
        rows = {r["key_string"]: r["value_long"] for r in spark.read.parquet(f"{out}/{STORE}").collect()}
        assert rows == truth and len(snapshot_rows(spark, out, STORE)) == len(truth)
        served = manifest["served"][STORE]
        assert sorted(served) == [str(p) for p in range(6)]
        assert {s["served_by"] for s in served.values()} == {i.instance_id for i in cluster.instances}
        assert all(s["role"] == "ACTIVE" and not s["stale"] and s["position"] >= 0 for s in served.values())
        assert manifest["cut_token"]  # nothing moved while paged

        # a wrong token: refused before Spark is asked for anything
        with pytest.raises(SnapshotError, match="refused the snapshot job .*iqmesh.auth.token"):
            run_snapshot(_options(*common, "--out", str(tmp_path / "wrong"), "--config",
                                  f"iqmesh.tls.ca.file={cert}", "--config", "iqmesh.auth.token=nope"), spark)
        # no token, through the command: one line on stderr, exit status 2, nothing written
        r = subprocess.run([sys.executable, "-m", "iqmesh", "snapshot", *common, "--out",
                            str(tmp_path / "none"), "--config", f"iqmesh.tls.ca.file={cert}", "--timeout", "10"],
                           capture_output=True, text=True, timeout=120)
        last = r.stderr.strip().splitlines()[-1]
        assert r.returncode == 2 and last.startswith("iqmesh snapshot: error: SNAPSHOT_ERROR: the instances of "), \
            r.stderr[-2000:]
        assert "UNAUTHENTICATED" in last and "iqmesh.auth.token" in last and "Traceback" not in r.stderr
        assert not (tmp_path / "none").exists() and not (tmp_path / "wrong").exists()
    finally:
        cluster.stop()


def test_bad_client_settings_are_one_line(tmp_path: Path) -> None:
    """Settings the job cannot dial with are refused while the flags are read (no broker, no Spark)."""
    common = ("--bootstrap", "127.0.0.1:1", "--application-id", "a", "--out", str(tmp_path / "o"))
    cases = {"iqmesh.tls.ca.file: cannot read": ("--config", f"iqmesh.tls.ca.file={tmp_path / 'missing.pem'}"),
             "--config expects NAME=VALUE": ("--config", "iqmesh.auth.token"),
             "--config-file: cannot read": ("--config-file", str(tmp_path / "missing.properties")),
             "must be printable characters without spaces": ("--config", "iqmesh.auth.token=a b")}
    for message, flags in cases.items():
        with pytest.raises(SnapshotError, match=message):
            _options(*common, *flags)
