"""A gateway's readiness means "this gateway can serve", not "the cluster is up" (issue 27 point 9):
in a total outage of the instances, a gateway started with --bootstrap (the instances topic) and
one started with --seeds (as the manifests start it) both stay ready, so they stay in their
Service and the dashboard can show the outage, while ``/readyz?cluster=true`` (the cluster's
readiness, what ``/readyz`` said before) is 503."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from instance.local.cluster import produce, sample_lines
from instance.local.gateway import GatewayProcess
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

WAIT_S = 120


def fetch(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            body = r.read().decode()
            return r.status, json.loads(body) if r.headers.get("Content-Type", "").startswith("application/json") \
                else body
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


@pytest.mark.timeout(400)
def test_readiness_stays_ok_in_a_total_outage_while_the_cluster_is_not_ready(bootstrap: str, tmp_path: Path) -> None:
    unique = uuid.uuid4().hex[:10]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "commit.interval.ms=200", partitions=2)
    cluster.start()
    gateways: list[GatewayProcess] = []

    def logs() -> str:
        return cluster.logs() + "".join(f"\n--- gateway\n{g.logs()}" for g in gateways)
    try:
        cluster.wait_running(WAIT_S)
        produce(bootstrap, topic, ((None, t.encode()) for t in sample_lines(50, seed=5)))
        gateways += [GatewayProcess(bootstrap, cluster.application_id, tmp_path / "by-topic.log"),
                     GatewayProcess("", "", tmp_path / "by-seeds.log", seeds=[i.target for i in cluster.instances])]
        for g in gateways:
            g.start()
        ids = sorted(i.instance_id for i in cluster.instances)
        for g in gateways:
            g.wait_ready(WAIT_S)

            def cluster_ready(g: GatewayProcess = g) -> Any:
                status, body = fetch(f"{g.url}/readyz?cluster=true")
                return body if status == 200 and sorted(body["running"]) == ids else None
            wait_until(cluster_ready, WAIT_S, "the cluster's readiness with both instances running", logs)
            status, body = fetch(f"{g.url}/readyz")
            assert status == 200 and body["cluster"] == "ready" and body["cluster_problem"] == "", body

        # a total outage: every instance gone at once (as after a poison record, or kill -9)
        for i in range(len(cluster.instances)):
            cluster.signal(i, signal.SIGKILL)
        for i in range(len(cluster.instances)):
            cluster.wait_exit(i, WAIT_S)
        for g in gateways:
            def cluster_down(g: GatewayProcess = g) -> Any:
                status, body = fetch(f"{g.url}/readyz?cluster=true")
                return body if status == 503 else None
            down = wait_until(cluster_down, WAIT_S, f"{g.url}: the cluster's readiness to say 503", logs)
            assert down["error"]["code"] == "NOT_READY" and "routing table" in down["error"]["message"], down

            # well into the outage: the last routing table older than a fresh one may be
            def stale(g: GatewayProcess = g) -> Any:
                status, body = fetch(f"{g.url}/v1/instances")
                return body if status == 200 and body["error"] and body["age_ms"] > 6000 else None
            instances = wait_until(stale, WAIT_S, f"{g.url}: /v1/instances to show the outage", logs)
            assert {i["instance_id"] for i in instances["instances"]} == set(ids)  # still listed, for the page

            status, body = fetch(f"{g.url}/readyz")
            assert status == 200, (g.url, body)
            assert body["status"] == "ready" and body["cluster"] == "not_ready" and body["running"] == []
            assert "routing table" in body["cluster_problem"], body
            status, page = fetch(f"{g.url}/")
            assert status == 200 and "<html" in page.lower()
    finally:
        for g in gateways:
            g.stop()
        cluster.stop()


def test_readyz_takes_cluster_only(bootstrap: str, tmp_path: Path) -> None:
    """The gateway's readiness needs its discovery reached once; ``cluster`` is its one parameter."""
    gw = GatewayProcess(bootstrap, f"nothing-{uuid.uuid4().hex[:8]}", tmp_path / "gateway.log")
    gw.start()
    try:
        def refused() -> Any:
            try:
                status, body = fetch(f"{gw.url}/readyz")
            except OSError:  # not listening yet
                return None
            assert status == 503, body
            return body if "check --application-id" in body["error"]["message"] else None
        # an application without an instances topic: the broker is reached, the application is not
        wait_until(refused, WAIT_S, "/readyz to say the application has no instances topic", gw.logs)
        status, body = fetch(f"{gw.url}/readyz?cluster=maybe")
        assert status == 400 and "cluster must be true or false" in body["error"]["message"]
        status, body = fetch(f"{gw.url}/readyz?verbose=1")
        assert status == 400 and "this route takes cluster" in body["error"]["message"]
    finally:
        gw.stop()
