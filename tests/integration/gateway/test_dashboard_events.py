"""The dashboard's cluster events from a real crash, in a real headless Chromium: on a cluster of
its own (the shared one must not be disturbed), one instance is killed with SIGKILL and started
again; the page lists it disappearing and joining, and marks both on the charts' time axis."""

from __future__ import annotations

import json
import signal
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest

from instance.local.cluster import produce, sample_lines
from instance.local.gateway import GatewayProcess
from tests.integration.gateway.conftest import ARTIFACTS, headless_screenshot
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

WAIT_S = 90
LINES = 300


def _events(url: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(url + "/v1/events?max_events=1", timeout=30) as r:
        data = next(line for line in r.read().decode().splitlines() if line.startswith("data: "))
    return list(json.loads(data[6:])["events"])


@pytest.mark.timeout(400)
def test_a_crash_and_a_restart_are_listed_and_marked_on_the_charts(bootstrap: str, tmp_path: Path,
                                                                   browser: Any) -> None:
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    unique = uuid.uuid4().hex[:10]
    # exactly-once here (the shared cluster runs at-least-once): the input lag is read beside open
    # transactions
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "num.standby.replicas=1",
                                       "commit.interval.ms=200", "processing.guarantee=exactly_once_v2")
    gateway = GatewayProcess(bootstrap, cluster.application_id, tmp_path / "gateway.log")
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in sample_lines(LINES, seed=3)))
        gateway.start()
        gateway.wait_ready(60)

        seen: list[Any] = []

        def input_committed() -> bool:
            with urllib.request.urlopen(gateway.url + "/v1/topology", timeout=30) as r:
                t = json.loads(r.read())
            assert not t["input_lag_error"], t
            mine = [x for x in t["input_lag"] if x["topic"] == topic]
            seen[:] = [mine]
            # -1: nothing committed, as on a partition the lines all missed (a null key's sticky partition)
            return len(mine) == 6 and sum(max(0, x["committed"]) for x in mine) == LINES

        def diagnosis() -> str:
            with urllib.request.urlopen(gateway.url + "/v1/instances", timeout=30) as r:
                instances = r.read().decode()
            return f"last input lag: {seen}\ninstances: {instances}\n{cluster.logs()}{gateway.logs()}"
        wait_until(input_committed, WAIT_S, "every input line committed as processed", diagnosis)
        wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))

        def rows() -> list[tuple[str, str]]:
            script = ("return [...document.querySelectorAll('#events tbody tr[data-event]')]"
                      ".map(r => [r.getAttribute('data-event'), r.textContent])")
            return [(k, t) for k, t in browser.execute_script(script)]
        browser.get(gateway.url + "/")
        wait.until(lambda _: browser.execute_script("return document.querySelectorAll('#instances tr[data-instance]')"
                                                    ".length") == 2)

        victim = cluster.instances[1].instance_id
        cluster.signal(1, signal.SIGKILL)
        cluster.wait_exit(1, 30)
        wait_until(lambda: any(e["kind"] == "gone" and e["instance"] == victim for e in _events(gateway.url)),
                   WAIT_S, f"the gateway to see {victim} disappear", lambda: cluster.logs() + gateway.logs())
        cluster.start([1])  # the same instance id and state directory
        wait_until(lambda: any(e["kind"] == "joined" and e["instance"] == victim for e in _events(gateway.url)),
                   WAIT_S, f"the gateway to see {victim} join again", lambda: cluster.logs() + gateway.logs())

        # the live page has both, the join after the disappearance, and lists them newest first with
        # ISO dates (a busy machine may add more: a heartbeat over 3 s old reads as late, then back)
        def rejoined() -> bool:
            return bool(browser.execute_script(
                "const v = clusterEvents.filter(e => e.instance === arguments[0]);"
                "return v.some(g => g.kind === 'gone' && v.some(j => j.kind === 'joined' && j.at_ms > g.at_ms))",
                victim))
        wait.until(lambda _: rejoined())
        wait.until(lambda _: {"gone", "joined"} <= {k for k, _ in rows()})
        listed = browser.execute_script(
            "return [...document.querySelectorAll('#events tbody tr[data-event] td:first-child')]"
            ".map(t => t.textContent)")
        assert listed == sorted(listed, reverse=True), listed
        gone = next(t for k, t in rows() if k == "gone")
        assert victim in gone and "is gone" in gone and gone[:4].isdigit() and gone[4] == "-", gone
        # and every chart's time axis spans them, so each is drawn as a marker
        marked = browser.execute_script(
            "return Object.values(charts).map(c => clusterEvents.filter("
            "e => e.at_ms / 1000 >= c.plot.scales.x.min && e.at_ms / 1000 <= c.plot.scales.x.max).map(e => e.kind))")
        assert len(marked) == 8 and all({"gone", "joined"} <= set(kinds) for kinds in marked), marked

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        assert browser.save_screenshot(str(tmp_path / "events.png"))
        (ARTIFACTS / "dashboard-events.png").write_bytes((tmp_path / "events.png").read_bytes())
        # a screenshot taken without a live stream (?screenshot) shows them too
        headless_screenshot(gateway.url + "/?screenshot", tmp_path / "still.png", tmp_path / "u", height=2600)
        (ARTIFACTS / "dashboard-events-screenshot.png").write_bytes((tmp_path / "still.png").read_bytes())
        # and so does Chromium's own headless screenshot of the plain URL: the page knows it for one
        # (HeadlessChrome not driven by WebDriver) and keeps no stream open (it never finished before)
        headless_screenshot(gateway.url + "/", tmp_path / "plain.png", tmp_path / "u2", height=1200, timeout=60)
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not errors, errors
    finally:
        gateway.stop()
        cluster.stop()
