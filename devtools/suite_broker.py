"""Which local broker the test suite starts: ``IQMESH_BROKER`` (``dev`` or ``kafka``)."""

from __future__ import annotations

import os

from instance.local.broker import BrokerError
from instance.local.engines import ENGINES


def suite_engine() -> str:
    """The engine the test suite starts (``IQMESH_BROKER``, default ``dev``)."""
    engine = os.environ.get("IQMESH_BROKER", "dev").strip().lower() or "dev"
    if engine not in ENGINES:
        raise BrokerError(f"IQMESH_BROKER={engine!r}: choose one of {', '.join(ENGINES)}")
    return engine
