"""The dashboard's charts say what they show, in a real headless Chromium, on a cluster of its own
(one instance is killed): every per-instance chart has a key of its own naming each instance; the
errors chart says when its three lines all lie on 0 and draws them apart; the latency chart has
each instance's own mean Get latency (from its counters) beside the gateway's p50/p99; the dashed
event lines carry numbers, none covering another, each one in the events list; and while an
instance is gone its lines break: the chart points the gateway sends (/v1/events) are null for it
until it is back, the charts hold those nulls and never span them."""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from instance.local.cluster import LocalCluster, produce, sample_lines
from instance.local.gateway import GatewayProcess
from tests.integration.gateway.conftest import ARTIFACTS
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster

pytestmark = pytest.mark.integration

WAIT_S = 90
PER_INSTANCE = ("updates", "records", "queries", "lag", "plag")
FIELDS = ("store_updates_per_s", "records_per_s", "queries_per_s", "query_errors_per_s", "lag", "get_ms")


def _first_event(url: str) -> dict[str, Any]:
    """The first SSE event of /v1/events: the latest snapshot with its ``point`` and ``history``."""
    with urllib.request.urlopen(url + "/v1/events?max_events=1", timeout=30) as r:
        data = next(line for line in r.read().decode().splitlines() if line.startswith("data: "))
    return dict(json.loads(data[6:]))


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)


class Page:
    """The dashboard in the browser, read in one script call at a time (it re-renders every second)."""

    def __init__(self, browser: Any) -> None:
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        self.browser = browser
        self.wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))

    def js(self, script: str, *args: Any) -> Any:
        return self.browser.execute_script(script, *args)

    def texts(self, selector: str) -> list[str]:
        return list(self.js("return [...document.querySelectorAll(arguments[0])].map(e => e.textContent.trim())",
                            selector))

    def keyed(self, chart: str, ids: list[str]) -> Callable[[Any], bool]:
        """A wait's condition: the key beside ``chart``'s title names ``ids``."""
        return lambda _: sorted(self.texts(f"#key-{chart} .key")) == ids

    def lines(self, chart: str) -> dict[str, list[float | None]]:
        """label -> the chart's data for that line (nulls kept)."""
        return dict(self.js("const p = charts[arguments[0]].plot; return Object.fromEntries("
                            "p.series.slice(1).map((s, i) => [s.label, p.data[i + 1]]))", chart))


def _broke_and_resumed(values: list[Any]) -> bool:
    """A value, later a null, later a value again."""
    first = next((i for i, v in enumerate(values) if v is not None), None)
    if first is None:
        return False
    gap = next((i for i in range(first, len(values)) if values[i] is None), None)
    return gap is not None and any(v is not None for v in values[gap:])


@pytest.mark.timeout(480)
def test_charts_have_keys_labelled_events_instance_latency_and_gaps(bootstrap: str, tmp_path: Path,
                                                                    browser: Any) -> None:
    unique = uuid.uuid4().hex[:10]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "num.standby.replicas=1",
                                       "commit.interval.ms=200")
    gateway = GatewayProcess(bootstrap, cluster.application_id, tmp_path / "gateway.log")
    cluster.start()
    try:
        cluster.wait_running(120)
        text = sample_lines(200, seed=5)
        produce(bootstrap, topic, ((None, t.encode()) for t in text))
        gateway.start()
        gateway.wait_ready(60)
        _run(cluster, gateway, Page(browser), sorted(word_counts(text)), tmp_path)
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        gateway.stop()
        cluster.stop()


def _run(cluster: LocalCluster, gateway: GatewayProcess, page: Page, words: list[str], tmp_path: Path) -> None:
    url = gateway.url
    ids = sorted(i.instance_id for i in cluster.instances)
    victim = cluster.instances[1].instance_id

    def logs() -> str:
        return f"{cluster.logs()}\n--- gateway\n{gateway.logs()}"
    page.browser.get(url + "/")
    page.wait.until(lambda _: page.js("return typeof charts.updates !== 'undefined' && "
                                      "charts.updates.plot.data[0].length > 1"))

    # each per-instance chart names its instances beside its title, in their colours
    for name in PER_INSTANCE:
        page.wait.until(page.keyed(name, ids))
    page.wait.until(lambda _: sorted(page.texts("#key-latency-instances .key")) == ids)
    swatches = page.js("return [...document.querySelectorAll('#key-updates .key .swatch')]"
                       ".map(s => s.style.borderTopColor)")
    assert len(swatches) == 2 and all(swatches), swatches
    assert sorted(page.lines("updates")) == ids

    # no error yet: the errors chart says its lines all lie on 0, and they are drawn apart
    page.wait.until(lambda _: "no errors" in page.texts("#errors-note")[0])
    styles = page.js("return charts.errors.plot.series.slice(1).map(s => [s.label, s.width, JSON.stringify(s.dash)])")
    assert len({(w, d) for _, w, d in styles}) == 3, styles
    assert page.texts("#key-errors .key") == ["gateway 4xx", "gateway 5xx", "instance query errors"]

    # queries through the gateway: the instances' own mean Get latency on the latency chart, from
    # their counters, beside the gateway's p50/p99; requests for a store that does not exist: errors
    for w in words[:40]:
        assert _get(f"{url}/v1/stores/counts/keys/{w}") == 200
    for _ in range(5):
        assert _get(f"{url}/v1/stores/no-such-store/keys/x") == 404
    page.wait.until(lambda _: any(v for i in ids for v in page.lines("latency")[i] if v is not None))
    latency = page.lines("latency")
    assert {"p50", "p99"} <= set(latency) and set(ids) <= set(latency)
    mean_get = [v for i in ids for v in latency[i] if v is not None]
    assert all(0 < v < 10_000 for v in mean_get), mean_get
    wait_until(lambda: any((r.get("get_ms") or 0) > 0 for r in _first_event(url)["point"]["rates"].values()),
               WAIT_S, "a chart point with an instance's mean Get latency", logs)
    page.wait.until(lambda _: not page.texts("#errors-note")[0])

    # one instance killed: gone, its lines break (null points), its key says so; back: lines resume
    cluster.signal(1, signal.SIGKILL)
    cluster.wait_exit(1, 30)

    def gone_point() -> bool:
        r = _first_event(url)["point"]["rates"].get(victim)
        return r is not None and r["presence"] == "gone" and all(r[k] is None for k in FIELDS)
    wait_until(gone_point, WAIT_S, f"a chart point with {victim} gone and null", logs)
    page.wait.until(lambda _: page.js("return [...document.querySelectorAll('#key-updates .key.gone')]"
                                      ".map(k => k.textContent.trim())") == [victim])
    cluster.start([1])

    def back() -> bool:
        r = _first_event(url)["point"]["rates"].get(victim)
        return r is not None and r["presence"] == "alive" and r["records_per_s"] is not None
    wait_until(back, WAIT_S, f"{victim} back on the charts", logs)

    history = _first_event(url)["history"]
    mine = [p["rates"].get(victim) for p in history]
    assert _broke_and_resumed([r["records_per_s"] if r else None for r in mine]), mine
    for r in mine:
        if r is not None and r["presence"] == "gone":
            assert all(r[k] is None for k in FIELDS), r
    page.wait.until(lambda _: all(_broke_and_resumed(page.lines(n)[victim]) for n in ("updates", "records", "lag")))
    spans = page.js("return Object.fromEntries(Object.entries(charts).map(([n, c]) => "
                    "[n, c.plot.series.slice(1).map(s => s.spanGaps)]))")
    assert all(v is False for vs in spans.values() for v in vs), spans

    # every dashed event line is numbered above its plot; no number covers another; each number
    # is in the events list, with what happened
    page.wait.until(lambda _: page.js("return clusterEvents.some(e => e.kind === 'gone' && e.instance === "
                                      "arguments[0])", victim))
    page.wait.until(lambda _: page.js("return clusterEvents.some(e => e.kind === 'joined' && e.instance === "
                                      "arguments[0])", victim))
    labelled = page.js("""
        return Object.fromEntries(Object.entries(charts).map(([name, c]) => {
          const p = c.plot;
          const shown = clusterEvents.filter(e => e.at_ms / 1000 >= p.scales.x.min && e.at_ms / 1000 <= p.scales.x.max)
            .map(e => eventNumber(e));
          const labels = [...p.over.querySelectorAll('.event-label')];
          const boxes = labels.map(l => l.getBoundingClientRect()).map(r => [r.left, r.right, r.top, r.bottom]);
          const numbers = labels.flatMap(l => l.dataset.events.split(' ').map(Number));
          return [name, {shown, numbers, boxes, texts: labels.map(l => l.textContent)}];
        }))""")
    listed = set(page.js("return [...document.querySelectorAll('#events tbody tr[data-n]')]"
                         ".map(r => Number(r.dataset.n))"))
    assert len(labelled) == 8
    for name, c in labelled.items():
        assert c["shown"] and sorted(c["numbers"]) == sorted(c["shown"]), (name, c)
        assert set(c["numbers"]) <= listed, (name, c, listed)
        boxes = c["boxes"]
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert a[1] <= b[0] or b[1] <= a[0] or a[3] <= b[2] or b[3] <= a[2], (name, c)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.js("window.scrollTo(0, document.querySelector('.charts').offsetTop)")
    shot = tmp_path / "charts.png"
    assert page.browser.save_screenshot(str(shot))
    (ARTIFACTS / "dashboard-charts.png").write_bytes(shot.read_bytes())
