"""The dashboard in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven
by selenium): it loads, lists the three instances, and a key lookup shows the right value and the
instance that served it. After known traffic (lookups, requests for a store that does not exist,
the input processed) every chart has data: rates, changelog lag, processing lag per instance and
per input topic, query latency p50/p99, errors/s; the topology is drawn as /v1/topology describes
it. Screenshots are kept in ``build/artifacts/`` (the live page, and Chromium's own ``--screenshot``).

CI installs the browser (``.ci/run``); elsewhere the test is skipped when it is missing, and fails
under CI=true rather than pass without a browser."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.integration.gateway.conftest import ARTIFACTS, GatewayCluster, headless_screenshot, lines
from tests.integration.helpers import wait_until

pytestmark = pytest.mark.integration

WAIT_S = 60  # the deadline of each wait on the page (generous: only its upper bound)


def test_dashboard_lists_instances_and_looks_up_a_key(gateway_cluster: GatewayCluster, browser: Any,
                                                      tmp_path: Path) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    gc = gateway_cluster
    ids = sorted(i.instance_id for i in gc.cluster.instances)
    # the page re-renders its tables on every snapshot (about a second), so it is read in one
    # script call each time rather than element by element (elements go stale in between)
    wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))

    def texts(selector: str, attr: str = "") -> list[str]:
        script = ("return [...document.querySelectorAll(arguments[0])]"
                  ".map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.textContent.trim())")
        return list(browser.execute_script(script, selector, attr))

    browser.get(gc.url + "/")
    wait.until(lambda _: sorted(texts("#instances tbody tr[data-instance]", "data-instance")) == ids)
    wait.until(lambda _: texts("#instances td.state") == ["RUNNING"] * 3)

    expected = gc.get("/v1/stores/counts/keys/kafka")[1]
    key = browser.find_element(By.ID, "lookup-key")
    key.clear()
    key.send_keys("kafka")
    browser.find_element(By.ID, "lookup-go").click()

    def field(name: str) -> str:
        (text,) = texts(f'#lookup-result [data-field="{name}"]')
        return text
    wait.until(lambda _: texts('#lookup-result [data-field="value"]'))
    assert field("value") == str(gc.truth["kafka"])
    assert field("served_by") == expected["metadata"]["served_by"] and field("served_by") in ids
    assert field("stale") == "up to date" and field("role") == "ACTIVE"
    # "asked" names the endpoint the gateway's client went to, and what it did is read from the answer
    via = field("via")
    assert via.startswith(expected["via"]), (via, expected)
    if "(answered itself)" in via:
        assert via.split()[0] == expected["metadata"]["endpoint"], (via, expected)

    # live parts: the charts are drawn and the top-entries table is filled from a whole-store scan
    wait.until(lambda _: texts("#chart-updates canvas", "class"))
    top = str(max(gc.truth.values()))
    wait.until(lambda _: texts("#top-table tbody tr td:nth-child(3)")[:1] == [top])
    wait.until(lambda _: "complete" in texts("#top-status")[0])

    # every chart has data, says its unit on the y axis, has no per-chart legend, and times are
    # on a 24-hour clock whatever the locale
    # known traffic for the latency and error charts: lookups, and requests for a store that does not exist
    for word in list(gc.truth)[:20]:
        assert gc.get(f"/v1/stores/counts/keys/{word}")[0] == 200
    for _ in range(10):
        assert gc.get("/v1/stores/no-such-store/keys/x")[0] == 404
    for name, unit in (("updates", "updates/s"), ("records", "records/s"), ("queries", "queries/s"),
                       ("lag", "records"), ("plag", "records"), ("ptopic", "records"), ("latency", "ms"),
                       ("errors", "errors/s")):
        wait.until(lambda _, n=name: browser.execute_script(
            "const p = charts[arguments[0]].plot; return p.data.length > 1 && p.data[0].length > 1", n))
        label, ticks = browser.execute_script(
            "const p = charts[arguments[0]].plot; return [p.axes[1].label, p.axes[0].values(p, [13 * 3600 + 5], 0)]",
            name)
        assert label == unit
        assert len(ticks) == 1 and ticks[0].count(":") == 2 and "M" not in ticks[0], ticks  # 24 h: no PM
    assert texts(".u-legend") == []
    # the latency chart has p50 and p99 points, the errors chart the 404s (gateway 4xx and the
    # instances' NOT_FOUND), each line named beside the title
    def points(name: str) -> dict[str, list[float]]:
        return dict(browser.execute_script(
            "const p = charts[arguments[0]].plot; return Object.fromEntries(p.series.slice(1).map("
            "(s, i) => [s.label, p.data[i + 1].filter(v => v !== null)]))", name))
    wait.until(lambda _: all(points("latency")[s] for s in ("p50", "p99")))
    latency = points("latency")
    assert all(0 < v < 10_000 for v in latency["p50"] + latency["p99"]), latency
    wait.until(lambda _: max(points("errors")["gateway 4xx"], default=0) > 0)
    wait.until(lambda _: max(points("errors")["instance query errors"], default=0) > 0)
    assert max(points("errors")["gateway 5xx"], default=0) == 0
    assert texts("#key-latency .key") == ["p50", "p99"]
    assert texts("#key-errors .key") == ["gateway 4xx", "gateway 5xx", "instance query errors"]
    assert texts("#events tbody tr")  # the timeline is drawn (its events are unit-tested: test_dashboard_series)

    # processing lag: every line of the input processed and committed, so the committed offsets
    # of the input topic add up to the lines produced and nothing is behind; the charts show it
    # per instance (each one that owns a task) and per topic (the input and the repartition topic)
    input_topic = f"lines-{gc.cluster.application_id.removeprefix('wc-')}"

    def topology() -> dict[str, Any]:
        status, body = gc.get("/v1/topology")
        assert status == 200, body
        return dict(body)

    seen: list[tuple[Any, ...]] = []  # what each poll read, for the failure message

    def input_done() -> bool:
        t = topology()
        mine = [x for x in t["input_lag"] if x["topic"] == input_topic]
        seen.append((t.get("asked"), t["input_lag_error"], [(x["committed"], x["end_offset"]) for x in mine],
                     t["processing_lag"]["by_topic"].get(input_topic)))
        # -1: nothing committed, as for a partition no line went to (lines without a key are
        # batched into one partition at a time, so some may stay empty)
        return (sum(max(x["committed"], 0) for x in mine) == len(lines())
                and t["processing_lag"]["by_topic"].get(input_topic) == 0)
    # the input committed and every instance's processing lag read
    wait_until(input_done, 3 * WAIT_S, "the input committed with no processing lag",
               lambda: f"polls: {len(seen)}, first {seen[:3]}, last {seen[-3:]}\n{gc.logs()}")
    topo = topology()
    assert [s["id"] for s in topo["subtopologies"]] == [0, 1]
    first, second = topo["subtopologies"]
    repartition = first["sink_topics"][0]
    assert first["source_topics"] == [input_topic] and first["repartition_topics"] == [repartition]
    assert second["source_topics"] == [repartition] and second["stores"] == ["counts"]
    assert second["changelog_topics"] == [f"{gc.cluster.application_id}-counts-changelog"]
    assert "Sub-topology: 0" in topo["description"] and "Sub-topology: 1" in topo["description"]
    wait.until(lambda _: set(points("plag")) == set(ids) and all(points("plag")[i] for i in ids))
    wait.until(lambda _: {input_topic, repartition} <= set(points("ptopic")))
    wait.until(lambda _: texts("#instances td.plag") == ["0"] * 3)  # nothing behind: a column of its own
    assert all(v >= 0 for vs in points("ptopic").values() for v in vs)
    # the topology drawn: each sub-topology's topics by kind, the lag beside each input
    def chips(sub: int, kind: str) -> list[str]:
        return [t for t in texts(f'[data-subtopology="{sub}"] .topic.{kind}', "data-topic")]
    wait.until(lambda _: chips(0, "input") == [input_topic])
    assert chips(0, "repartition") == [repartition] and chips(1, "repartition") == [repartition]
    assert chips(1, "changelog") == second["changelog_topics"]
    assert chips(1, "output") == second["sink_topics"] and texts('[data-subtopology="1"] .store') == ["counts"]
    assert texts('[data-subtopology="0"] .topic.input .lag', "data-lag")
    assert "M" not in texts("#top-status")[0].split(" at ")[-1]  # no AM/PM

    shot = tmp_path / "dashboard.png"
    browser.execute_script("window.scrollTo(0, 0)")
    assert browser.save_screenshot(str(shot))
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "dashboard.png")
    errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert not errors, errors


def test_a_headless_screenshot_of_the_dashboard_finishes(gateway_cluster: GatewayCluster, browser: Any,
                                                         tmp_path: Path) -> None:
    """``?screenshot`` takes one snapshot and keeps no stream open, so Chromium's
    --virtual-time-budget screenshot ends (it never did with the live event stream)."""
    shot = tmp_path / "screenshot.png"
    headless_screenshot(gateway_cluster.url + "/?screenshot", shot, tmp_path / "u", height=2600)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, ARTIFACTS / "dashboard-screenshot.png")
