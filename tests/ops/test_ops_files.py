"""The alert rules and the Grafana board, checked by the tools' own checkers: ``promtool check
rules`` / ``check config`` and the rules' unit tests (``promtool test rules``: each alert fires on
the series that should fire it, at the time it should, and not on the healthy ones), and tsc with
Grafana's published dashboard schema (ops/grafana/check). Then what no checker sees: the board's
layout, its variables, and that every alert the board names exists. Whether each metric name
exists is asked of a live cluster (tests/integration/gateway/test_ops_prometheus.py)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.ops.tools import (
    DASHBOARD,
    GRAFANA_CHECK,
    PROMETHEUS_CONFIG,
    RULES,
    RULES_TESTS,
    board_queries,
    dashboard,
    need,
    need_grafana_schema,
    need_promtool,
    panels,
    rule_exprs,
    rules,
)


def _run(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True, timeout=300)


def test_promtool_checks_the_rules_and_the_scrape_config() -> None:
    promtool = need_promtool()
    done = _run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0 and f"SUCCESS: {len(rules())} rules found" in done.stdout, done.stdout + done.stderr
    done = _run(promtool, "check", "config", str(PROMETHEUS_CONFIG))
    assert done.returncode == 0 and "is valid prometheus config file syntax" in done.stdout, \
        done.stdout + done.stderr


def test_promtool_unit_tests_of_every_alert_pass() -> None:
    promtool = need_promtool()
    done = _run(promtool, "test", "rules", RULES_TESTS.name, cwd=RULES_TESTS.parent)
    assert done.returncode == 0 and "SUCCESS" in done.stdout, done.stdout + done.stderr
    tested = set(re.findall(r"alertname: (\w+)", RULES_TESTS.read_text()))
    assert tested == set(rule_exprs()), "every alert has a unit test"


def test_promtool_unit_tests_fail_when_an_alert_is_wrong(tmp_path: Path) -> None:
    """The unit tests can fail: a rule whose `for:` is longer, or whose threshold is lower, than
    the tests expect makes promtool report those alerts."""
    promtool = need_promtool()
    text = RULES.read_text()
    wrong = text.replace("        for: 1m\n", "        for: 5m\n", 1).replace(
        'iqmesh_store_partition_lag{role="STANDBY"} > 1000', 'iqmesh_store_partition_lag{role="STANDBY"} > 0')
    assert wrong.count("for: 5m") > text.count("for: 5m") and wrong != text
    (tmp_path / RULES.name).write_text(wrong)
    (tmp_path / RULES_TESTS.name).write_text(RULES_TESTS.read_text())
    done = _run(promtool, "test", "rules", RULES_TESTS.name, cwd=tmp_path)
    report = done.stdout + done.stderr  # promtool prints the failures on stderr
    assert done.returncode != 0, report
    assert "alertname: IqmeshInstanceError" in report and "alertname: IqmeshStandbyLagGrowing" in report, report


def test_the_board_matches_grafanas_dashboard_schema(tmp_path: Path) -> None:
    need_grafana_schema()
    node = need("node", "Node.js")
    done = _run(node, "check-dashboard.mjs", str(DASHBOARD), cwd=GRAFANA_CHECK)
    assert done.returncode == 0 and "matches Grafana's dashboard schema" in done.stdout, done.stdout + done.stderr
    # and the check can fail: a misspelt key, a value outside an enum
    board = dashboard()
    first, second = [p for p in board["panels"] if p["type"] == "timeseries"][:2]
    first["gridPoss"] = first.pop("gridPos")
    second["options"]["legend"]["displayMode"] = "lists"
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(board))
    done = _run(node, "check-dashboard.mjs", str(bad), cwd=GRAFANA_CHECK)
    assert done.returncode == 1, done.stdout
    assert "'\"gridPoss\"' does not exist" in done.stdout and "'\"lists\"' is not assignable" in done.stdout, \
        done.stdout


def test_the_board_is_laid_out_and_wired() -> None:
    board = dashboard()
    every = list(panels(board))
    ids = [p["id"] for p in every]
    assert len(ids) == len(set(ids)), "panel ids are unique"
    cells: set[tuple[int, int]] = set()
    for p in every:  # no two panels overlap on Grafana's 24-column grid
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"{p['title']} overlaps another panel"
        cells |= mine
    variables = {v["name"] for v in board["templating"]["list"]}
    assert variables == {"datasource", "instance"}
    for p in every:
        if p["type"] == "row":
            continue
        assert p["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, p["title"]
        assert p["targets"] and p["description"], p["title"]
        for t in p["targets"]:
            assert t["datasource"] == p["datasource"] and t["expr"].strip(), p["title"]
    # what the issue asks the board to show, under Kafka Streams' names
    exprs = " ".join(e for _, _, e in board_queries(board))
    thread, task = "kafka_streams_stream_thread_metrics_", "kafka_streams_stream_task_metrics_"
    for name in (f"{thread}process_rate", f"{thread}process_latency_avg", f"{thread}commit_latency_avg",
                 f"{thread}punctuate_rate", f"{thread}dirty_close_total", f"{task}record_lateness_max",
                 f"{task}restore_remaining_records_total", f"{task}update_rate", f"{task}dropped_records_total",
                 "iqmesh_store_partition_lag", "iqmesh_instance_gets_total", "iqmesh_instance_query_errors_total"):
        assert name in exprs, name
    # every alert a panel's description names is a rule
    named = {a for p in every for a in re.findall(r"\bIqmesh[A-Za-z]+\b", p.get("description", ""))}
    assert named and named <= set(rule_exprs()), named - set(rule_exprs())


def test_every_rule_has_a_severity_and_says_what_happened() -> None:
    for r in rules():
        assert r["labels"]["severity"] in ("critical", "warning"), r["alert"]
        assert r["annotations"]["summary"] and r["annotations"]["description"], r["alert"]
