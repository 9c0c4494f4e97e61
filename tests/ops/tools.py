"""The operators' files (ops/) and the checkers that validate them: Prometheus' promtool and
server (Debian's ``prometheus`` package) and tsc with Grafana's published dashboard schema
(``npm ci`` in ops/grafana/check). Missing tools skip a test, saying how to install them, except
under ``CI=true``, where they fail it (CI installs them)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
OPS = ROOT / "ops"
DASHBOARD = OPS / "grafana" / "iqmesh-kafka-streams.json"
RULES = OPS / "prometheus" / "iqmesh-alerts.yml"
RULES_TESTS = OPS / "prometheus" / "iqmesh-alerts.test.yml"
PROMETHEUS_CONFIG = OPS / "prometheus" / "prometheus.yml"
GRAFANA_CHECK = OPS / "grafana" / "check"

#: every metric name the board and the rules use starts with one of these (the rest: ALERTS)
NAME = re.compile(r"\b((?:kafka_streams|iqmesh)_[a-z0-9_]+)\b")


def need(tool: str, how: str) -> str:
    """The path of ``tool``, or skip (fail under CI=true) saying ``how`` to install it."""
    path = shutil.which(tool) or (str(GRAFANA_CHECK / "node_modules" / ".bin" / tool)
                                  if (GRAFANA_CHECK / "node_modules" / ".bin" / tool).exists() else None)
    if path is None:
        why = f"{tool} is not installed: {how}"
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run installs it)")
        pytest.skip(why)
    return path


def need_promtool() -> str:
    return need("promtool", "apt-get install prometheus (Debian's package has promtool)")


def need_grafana_schema() -> None:
    need("node", "Node.js")
    if not (GRAFANA_CHECK / "node_modules" / "@grafana" / "schema").is_dir():
        why = "@grafana/schema is not installed: npm ci --prefix ops/grafana/check"
        if os.environ.get("CI") == "true":
            pytest.fail(why + " (.ci/run installs it)")
        pytest.skip(why)


def dashboard() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return board


def panels(board: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    for p in board["panels"]:
        yield p
        yield from p.get("panels", [])


def board_queries(board: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(panel title, refId, PromQL) of every panel query."""
    return [(p["title"], t["refId"], t["expr"]) for p in panels(board) for t in p.get("targets", [])]


def rules() -> list[dict[str, Any]]:
    """Every rule of ops/prometheus/iqmesh-alerts.yml."""
    doc = yaml.safe_load(RULES.read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def rule_exprs() -> dict[str, str]:
    """alert name -> PromQL."""
    return {r["alert"]: r["expr"] for r in rules()}


def metric_names(promql: str) -> set[str]:
    return set(NAME.findall(promql))


def instantiate(promql: str, rate_interval: str = "30s") -> str:
    """A board query as Grafana sends it with every instance selected."""
    return promql.replace("$__rate_interval", rate_interval).replace("$instance", ".*")
