"""A total outage on the dashboard, in a real headless Chromium: a poison record stops both
instances of a cluster (the default handler fails, as in Kafka Streams) and nothing answers the
gateway any more. The page says so: each instance is listed as in ERROR and gone, the events list
has their errors and departures, and the table no longer shows them RUNNING with fresh heartbeats."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.support.ui import WebDriverWait

from instance.local.cluster import produce, sample_lines
from instance.local.gateway import GatewayProcess
from kernel.kafka_log import client_logging
from tests.integration.helpers import wait_until, wordcount_cluster

pytestmark = pytest.mark.integration

WAIT_S = 120


def _snapshot(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/v1/events?max_events=1", timeout=30) as r:
        data = next(line for line in r.read().decode().splitlines() if line.startswith("data: "))
    return dict(json.loads(data[6:]))


@pytest.mark.timeout(400)
def test_a_total_outage_is_shown_as_one(bootstrap: str, tmp_path: Path, browser: Any) -> None:
    unique = uuid.uuid4().hex[:10]
    cluster, topic = wordcount_cluster(bootstrap, tmp_path, unique, 2, "commit.interval.ms=200", partitions=2)
    gateway = GatewayProcess(bootstrap, cluster.application_id, tmp_path / "gateway.log")
    cluster.start()
    try:
        cluster.wait_running(120)
        produce(bootstrap, topic, ((None, t.encode()) for t in sample_lines(100, seed=3)))
        gateway.start()
        gateway.wait_ready(60)
        browser.get(gateway.url + "/")
        wait = WebDriverWait(browser, WAIT_S, ignored_exceptions=(StaleElementReferenceException,))
        wait.until(lambda _: browser.execute_script("return document.querySelectorAll('#instances tr[data-instance]')"
                                                    ".length") == 2)

        # a record no instance can read, in each partition: both stop (exit 2), nothing answers
        p = Producer({"bootstrap.servers": bootstrap, **client_logging()})
        for partition in (0, 1):
            p.produce(topic, value=b"\xff\xfe not utf-8", partition=partition)
        p.flush(30)
        for i in (0, 1):
            assert cluster.wait_exit(i, WAIT_S) == 2, cluster.logs()
        ids = {inst.instance_id for inst in cluster.instances}

        def outage_shown() -> bool:
            snap = _snapshot(gateway.url)
            gone = {e["instance"] for e in snap["events"] if e["kind"] == "gone"}
            return bool(snap["error"]) and gone == ids and all(i["presence"] == "gone" for i in snap["instances"])
        wait_until(outage_shown, WAIT_S, "the gateway to see both instances gone", lambda: gateway.logs())
        errors = {e["instance"] for e in _snapshot(gateway.url)["events"] if e["kind"] == "error"}
        assert errors <= ids

        def table() -> list[str]:
            return list(browser.execute_script(
                "return [...document.querySelectorAll('#instances tr[data-instance] td.state')]"
                ".map(t => t.textContent)"))
        wait.until(lambda _: len(table()) == 2 and all("(gone)" in s for s in table()))
        assert not any(s == "RUNNING" for s in table()), table()
        assert browser.execute_script("return document.querySelector('#conn').textContent") \
            == "cluster unreachable"
        rows = browser.execute_script("return [...document.querySelectorAll('#events tbody tr[data-event]')]"
                                      ".map(r => r.getAttribute('data-event'))")
        assert rows.count("gone") >= 2, rows
    finally:
        gateway.stop()
        cluster.stop()
