"""One word-count cluster (3 instances, one standby each) and one ``iqmesh gateway`` process for
every gateway test: the API checks, the property-based run and the browser test share it, so the
cluster starts once. The tests only read, so none of them changes what the others see."""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from instance.local.cluster import LocalCluster, produce, sample_lines
from instance.local.gateway import GatewayProcess
from tests.integration.helpers import wait_until, word_counts, wordcount_cluster


def lines() -> list[str]:
    out = sample_lines(1500, seed=11)
    out += [f"user{i:03d} item{i % 17} user{i % 7:03d}" for i in range(120)]
    return out


@dataclass
class GatewayCluster:
    cluster: LocalCluster
    gateway: GatewayProcess
    truth: Counter[str]
    bootstrap: str
    tmp: Path

    @property
    def url(self) -> str:
        return self.gateway.url

    def fetch(self, path: str) -> tuple[int, str, str]:
        """(status, content type, body) of GET ``path``, errors included."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as r:
                return r.status, r.headers.get("Content-Type", ""), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read().decode()

    def get(self, path: str) -> tuple[int, Any]:
        status, _, body = self.fetch(path)
        return status, json.loads(body)

    def logs(self) -> str:
        return f"{self.cluster.logs()}\n--- gateway\n{self.gateway.logs()}"


def ndjson(body: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in body.splitlines() if line]


@pytest.fixture(scope="package")
def gateway_cluster(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayCluster]:
    tmp = tmp_path_factory.mktemp("gateway")
    unique = uuid.uuid4().hex[:10]
    cluster, topic = wordcount_cluster(bootstrap, tmp, unique, 3, "num.standby.replicas=1",
                                       "commit.interval.ms=200")
    text = lines()
    truth = word_counts(text)
    gateway = GatewayProcess(bootstrap, cluster.application_id, tmp / "gateway.log")
    gc = GatewayCluster(cluster, gateway, truth, bootstrap, tmp)
    cluster.start()
    try:
        cluster.wait_running(90)
        produce(bootstrap, topic, ((None, t.encode()) for t in text))
        gateway.start()
        gateway.wait_ready(60)
        want = sorted(truth.items(), key=lambda kv: kv[0].encode())

        def counted() -> bool:
            status, _, body = gc.fetch("/v1/stores/counts/all")
            if status != 200:
                return False
            rows = ndjson(body)
            return [(r["key"], r["value"]) for r in rows[:-1]] == want and rows[-1]["end"]["complete"]
        wait_until(counted, 90, "the gateway's /all to return every count", gc.logs)
        yield gc
    finally:
        gateway.stop()
        cluster.stop()


# --- a real headless browser for the dashboard tests ------------------------------------------
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[3] / "build" / "artifacts"


@pytest.fixture
def browser() -> Iterator[Any]:
    """A headless Chromium driven by selenium (the dashboard tests)."""
    if CHROMIUM is None or DRIVER is None:
        why = "needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1700"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(DRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def headless_screenshot(url: str, shot: Path, profile: Path, height: int = 1800, timeout: float = 90) -> None:
    """Chromium's own ``--screenshot`` of ``url`` after 5 s of virtual time (it returns only once
    the page is quiet: the dashboard's ``?screenshot`` keeps no stream open)."""
    import subprocess

    assert CHROMIUM is not None
    p = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
                        f"--window-size=1400,{height}", "--virtual-time-budget=5000", f"--screenshot={shot}", url],
                       capture_output=True, text=True, timeout=timeout)
    assert shot.exists() and shot.stat().st_size > 10_000, p.stderr[-2000:]
