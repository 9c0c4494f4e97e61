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


def _same(batches: Iterator[Any]) -> Iterator[Any]:
    yield from batches


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    why = _missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(f"CI=true but {why}")
        pytest.skip(why)
    from analytics.snapshot.job import build_session

    # C1 only: these jobs are short, and C2 compiling competes with the cluster for the two cores
    session = build_session("local[2]", {"spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false",
                                         "spark.sql.shuffle.partitions": "4", "spark.default.parallelism": "2",
                                         "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1"})
    try:
        # warm up (Python workers, Arrow, Parquet) before any test starts a cluster that competes for CPU
        warm = tmp_path_factory.mktemp("spark-warm-up") / "t"
        session.range(4, numPartitions=2).mapInArrow(_same, "id BIGINT").write.parquet(str(warm))
        assert session.read.parquet(str(warm)).count() == 4
        yield session
    finally:
        session.stop()
