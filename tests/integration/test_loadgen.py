"""loadtest.loadgen against real services: two word-count instances on the dev broker, queried
through the routing client (gRPC) and through the REST gateway, open- and closed-loop, as the
command line runs it: every answer right-typed, the result file and plot written, an unknown store
counted by its status rather than crashing the run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from instance.local.cluster import produce, sample_lines
from instance.local.gateway import GatewayProcess
from tests.integration.helpers import query_all, wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration


def loadgen(out: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "loadtest.loadgen", *args, "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    saved = json.loads((out / "result.json").read_text())
    assert saved["requests"] == summary["requests"] == sum(r["ok"] + r["errors"] for r in saved["timeline"])
    assert (out / "plot.png").read_bytes()[:4] == b"\x89PNG"
    return summary


def test_loadgen_over_grpc_and_rest(bootstrap: str, tmp_path: Path, unique: str) -> None:
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2)
    cluster.start()
    gateway = GatewayProcess(bootstrap, cluster.application_id, tmp_path / "gateway.log")
    try:
        lines = sample_lines(200)
        truth = word_counts(lines)
        produce(bootstrap, topic, ((None, line.encode()) for line in lines))
        target = cluster.instances[0].target
        wait_until(lambda: query_all(target, list(truth)) == dict(truth), 90, "exact counts", cluster.logs)
        # the steady state the runs below assume: counts can be exact on the first instance before
        # the second has even joined (a busy machine), whose joining would then move tasks mid-run
        cluster.wait_running(expected=2)
        gateway.start()
        gateway.wait_ready()
        keys = ",".join(sorted(truth))

        g = loadgen(tmp_path / "grpc", "--grpc", target, "--keys", keys, "--rate", "50", "--duration", "3",
                    "--zipf", "1.1")
        assert g["protocol"] == "grpc" and g["mode"] == "open" and g["failed"] == 0
        assert 120 <= g["requests"] <= 151
        assert g["stale_unflagged"] == 0, g["unflagged_examples"]
        assert g["stale_flagged"] == 0, g["stale_examples"]

        r = loadgen(tmp_path / "rest", "--rest", gateway.url, "--keys", keys, "--workers", "4", "--duration", "3")
        assert r["protocol"] == "rest" and r["mode"] == "closed" and r["failed"] == 0
        assert r["requests"] > 20 and r["stale_unflagged"] == 0

        bad = loadgen(tmp_path / "bad", "--rest", gateway.url, "--store", "nope", "--rate", "20", "--duration", "1")
        assert bad["ok"] == 0 and set(bad["errors"]) == {"HTTP 404 UNKNOWN_STORE"}, bad["errors"]
    finally:
        gateway.stop()
        cluster.stop()
