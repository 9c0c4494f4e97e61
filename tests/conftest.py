"""Shared fixtures: a Kafka-protocol broker for the whole test session (and a Schema Registry
for the tests that ask for one).

Set ``IQMESH_BOOTSTRAP=host:port`` to run against an existing broker; otherwise one broker of the
engine ``IQMESH_BROKER`` names (``dev``: noida-db, the default; ``kafka``: Apache Kafka itself) is
started lazily, on a free port, the first time a test asks for ``bootstrap``, and stopped when the
session ends.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest
from confluent_kafka.admin import AdminClient

from devtools.suite_broker import suite_engine
from instance.local import engines
from instance.local.broker import wait_for_broker

if TYPE_CHECKING:
    from instance.local.schema_registry import RegistryHandle


@pytest.fixture(scope="session")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``host:port`` of a ready Kafka-protocol broker."""
    external = os.environ.get("IQMESH_BOOTSTRAP")
    if external:
        wait_for_broker(external, timeout=30.0)
        yield external
        return
    data_dir = tmp_path_factory.mktemp("broker")
    handle = engines.start(suite_engine(), data_dir)
    try:
        yield handle.bootstrap
    finally:
        engines.stop(data_dir)


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> AdminClient:
    """An AdminClient connected to ``bootstrap``."""
    return AdminClient({"bootstrap.servers": bootstrap})


@pytest.fixture
def unique() -> str:
    """A short unique string for topic and group names."""
    return uuid.uuid4().hex[:10]


@pytest.fixture(scope="session")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RegistryHandle]:
    """A real Schema Registry (Apicurio, instance/local/schema_registry.py; in memory), started the
    first time a test asks for it and stopped when the session ends. Built with Maven and run on
    Java: without them the tests that need it skip, except under CI=true, where they fail."""
    from instance.local.schema_registry import start_registry

    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing and os.environ.get("CI") != "true":
        pytest.skip(f"the Schema Registry is built with Maven and runs on Java: {', '.join(missing)} not found")
    handle = start_registry(tmp_path_factory.mktemp("registry"))
    try:
        yield handle
    finally:
        handle.stop()
