"""Which local broker the test suite starts: ``IQMESH_BROKER`` (``dev`` or ``kafka``)."""

from __future__ import annotations

import os
import re

from instance.local.broker import BrokerError
from instance.local.engines import ENGINES
from instance.local.kafka_broker import wanted_version


def suite_engine() -> str:
    """The engine the test suite starts (``IQMESH_BROKER``, default ``dev``)."""
    engine = os.environ.get("IQMESH_BROKER", "dev").strip().lower() or "dev"
    if engine not in ENGINES:
        raise BrokerError(f"IQMESH_BROKER={engine!r}: choose one of {', '.join(ENGINES)}")
    return engine


def suite_kafka_release() -> tuple[int, ...] | None:
    """The release of the Apache Kafka the suite starts (``IQMESH_KAFKA_VERSION``, else the pinned
    one) as numbers, ``(3, 9, 1)``; ``None`` on the dev broker or an external one (``IQMESH_BOOTSTRAP``)."""
    if os.environ.get("IQMESH_BOOTSTRAP") or suite_engine() != "kafka":
        return None
    return tuple(int(part) for part in re.findall(r"\d+", wanted_version())[:3])
