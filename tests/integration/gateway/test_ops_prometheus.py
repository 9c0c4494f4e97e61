"""The Grafana board and the alert rules (ops/) against a live cluster: a real Prometheus (Debian's
``prometheus``) scrapes the shared gateway cluster's /metrics with the shipped scrape settings
(ops/prometheus/prometheus.yml, honor_labels) and evaluates the shipped rules. Every metric name
the board and the rules use must be among the names Prometheus scraped, every board query must
parse and evaluate on Prometheus' own engine (with data where a healthy cluster has some), the
board's instance variable must list the cluster's instances, every rule must evaluate, and no
critical alert may fire or be pending on the healthy cluster."""

from __future__ import annotations

import json
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from instance.local.broker import free_port
from instance.runtime.metrics import ThreadMetrics
from tests.integration.gateway.conftest import GatewayCluster
from tests.integration.helpers import wait_until
from tests.ops.tools import (
    PROMETHEUS_CONFIG,
    RULES,
    board_queries,
    dashboard,
    instantiate,
    metric_names,
    need,
    need_promtool,
    rule_exprs,
)

pytestmark = pytest.mark.integration

#: board queries (panel title, refId) a healthy, quiet cluster may answer with no series: errors,
#: drops by reason and alerts that have not happened
MAY_BE_EMPTY = {("Dropped records", "B"), ("Failed query calls", "A"), ("Gateway errors", "A"),
                ("Firing iqmesh alerts", "A")}
#: recorded by another change (instance/runtime/metrics.py): required once a stream thread records it
PENDING_METRICS = {"kafka_streams_stream_thread_metrics_dirty_close_total": "dirty-close-total"}


def _pending() -> set[str]:
    recorded = {m.name for m in ThreadMetrics("t").metrics()}
    return {name for name, kafka in PENDING_METRICS.items() if kafka not in recorded}


def _families(exposition: str) -> set[str]:
    """The metric names a Prometheus text declares (a histogram's series names included)."""
    out = set()
    for line in exposition.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split()
            out.add(name)
            if kind == "histogram":
                out |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return out


@dataclass
class Prometheus:
    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    def api(self, path: str, **params: str) -> Any:
        query = ("?" + urllib.parse.urlencode(params)) if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as r:
                body = json.loads(r.read())
        except urllib.error.HTTPError as e:
            body = json.loads(e.read())
        assert body["status"] == "success", (path, params, body)
        return body["data"]

    def query(self, promql: str) -> list[dict[str, Any]]:
        data = self.api("query", query=promql)
        result: list[dict[str, Any]] = data["result"]
        return result

    def logs(self) -> str:
        return self.log.read_text()[-4000:] if self.log.exists() else ""


@pytest.fixture
def prometheus(gateway_cluster: GatewayCluster, tmp_path: Path) -> Iterator[Prometheus]:
    """Prometheus scraping the gateway every 2 s with the shipped config and rules."""
    binary = need("prometheus", "apt-get install prometheus")
    config = PROMETHEUS_CONFIG.read_text()
    host_port = gateway_cluster.url.removeprefix("http://")
    for old, new in (("scrape_interval: 15s", "scrape_interval: 2s"),
                     ("evaluation_interval: 15s", "evaluation_interval: 1s"),
                     ("scrape_timeout: 10s", "scrape_timeout: 2s"),
                     ('targets: ["127.0.0.1:8080"]', f'targets: ["{host_port}"]'),
                     ("  - iqmesh-alerts.yml", f"  - {RULES}")):
        assert old in config, old
        config = config.replace(old, new)
    (tmp_path / "prometheus.yml").write_text(config)
    port = free_port()
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([binary, f"--config.file={tmp_path / 'prometheus.yml'}",
                                 f"--storage.tsdb.path={tmp_path / 'data'}",
                                 f"--web.listen-address=127.0.0.1:{port}"], stdout=out, stderr=subprocess.STDOUT)
    p = Prometheus(f"http://127.0.0.1:{port}", proc, log)

    def ready() -> bool:
        assert proc.poll() is None, p.logs()
        try:
            with urllib.request.urlopen(f"{p.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False
    try:
        wait_until(ready, 60, "Prometheus to be ready", p.logs)
        yield p
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@pytest.mark.timeout(300)
def test_the_board_and_the_rules_read_what_a_live_cluster_serves(gateway_cluster: GatewayCluster,
                                                                   prometheus: Prometheus) -> None:
    gc = gateway_cluster
    ids = {i.instance_id for i in gc.cluster.instances}

    def logs() -> str:
        return f"{gc.logs()}\n--- prometheus\n{prometheus.logs()}"

    def scraped() -> bool:
        # every instance's Kafka Streams metrics under its own instance label (honor_labels), seen
        # in more than one scrape, so the rates have two samples
        per = prometheus.query("count_over_time(kafka_streams_stream_thread_metrics_commit_total[1m]) >= 4")
        return {s["metric"].get("instance") for s in per} == ids
    wait_until(scraped, 90, "Prometheus to scrape every instance's metrics through the gateway", logs)
    # through the shipped job: the gateway's own series carry its job and the target's address
    up = prometheus.query('up{job="iqmesh-gateway"}')
    assert [s["metric"]["instance"] for s in up] == [gc.url.removeprefix("http://")], up

    # every metric name the board and the rules use is one the gateway serves: a family it declares
    # (a counter of errors has no series until the first error) or one Prometheus scraped
    served = set(prometheus.api("label/__name__/values")) | _families(gc.fetch("/metrics")[2])
    board = dashboard()
    used = {n for _, _, e in board_queries(board) for n in metric_names(e)}
    used |= {n for e in rule_exprs().values() for n in metric_names(e)}
    missing = used - served - _pending()
    assert not missing, f"used by the board or the rules but not at /metrics: {sorted(missing)}"

    # the instance variable lists the cluster's instances
    assert set(prometheus.api("label/instance/values",
                              **{"match[]": "kafka_streams_stream_metrics_alive_stream_threads"})) == ids

    # every board query parses and evaluates on Prometheus' engine, with data where there is some
    empty = []
    for title, ref, expr in board_queries(board):
        result = prometheus.query(instantiate(expr))
        if not result and (title, ref) not in MAY_BE_EMPTY and not metric_names(expr) & _pending():
            empty.append((title, ref, expr))
    assert not empty, f"board queries with no data on a live cluster: {empty}"
    # one figure from each side agrees: the threads' processed records, as the instances publish them
    processed = {s["metric"]["instance"]: float(s["value"][1]) for s in prometheus.query(
        "sum by (instance) (kafka_streams_stream_thread_metrics_process_total)")}
    assert set(processed) == ids and sum(processed.values()) >= sum(gc.truth.values()), processed

    # every rule evaluates (no error) on what the gateway serves, and the healthy cluster raises no
    # critical alert
    def evaluated() -> list[dict[str, Any]] | None:
        groups = prometheus.api("rules")["groups"]
        got = [r for g in groups for r in g["rules"]]
        return got if len(got) == len(rule_exprs()) and all(r["health"] != "unknown" for r in got) else None
    got = wait_until(evaluated, 30, "Prometheus to evaluate every rule", logs)
    bad = [(r["name"], r["health"], r.get("lastError")) for r in got if r["health"] != "ok"]
    assert not bad, bad
    critical = [a for a in prometheus.api("alerts")["alerts"] if a["labels"].get("severity") == "critical"]
    assert not critical, critical


@pytest.mark.timeout(120)
def test_promtool_accepts_the_gateways_exposition(gateway_cluster: GatewayCluster) -> None:
    promtool = need_promtool()
    status, content_type, body = gateway_cluster.fetch("/metrics")
    assert status == 200 and "kafka_streams_stream_thread_metrics_process_total{" in body, body[:2000]
    done = subprocess.run([promtool, "check", "metrics"], input=body, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr

