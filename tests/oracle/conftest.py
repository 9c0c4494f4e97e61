"""The differential tests' fixture: the Kafka Streams oracle's jar, built once per session."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.oracle.kstreams import OracleUnavailable, build_jar


@pytest.fixture(scope="session")
def oracle_jar() -> Path:
    try:
        return build_jar()
    except OracleUnavailable as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(str(e))
