"""One SparkSession (``local[2]``, real PySpark and JVM) for every snapshot test: start-up costs
seconds, so it is paid once. Without pyspark or Java the tests are skipped, except under CI=true,
where they fail (``.ci/run`` installs both)."""

from __future__ import annotations

import importlib.util
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest


def _missing() -> str:
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed (pip install -e '.[analytics]')"
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        return "no Java (apt-get install openjdk-17-jre-headless)"
    return ""


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)
    from analytics.snapshot.job import build_session

    session = build_session("local[2]", {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                         "spark.sql.shuffle.partitions": "4",
                                         "spark.default.parallelism": "2"})
    try:
        yield session
    finally:
        session.stop()
