"""One front for the two local brokers: ``dev`` (noida-db, the embedded default) and ``kafka``
(Apache Kafka itself, see kafka_broker.py). ``stop`` and ``status`` find the engine from the data
directory, so only ``start`` is told which one."""

from __future__ import annotations

import os
from pathlib import Path

from devtools import broker as dev
from devtools import kafka_broker as kafka
from devtools.broker import BrokerError, BrokerHandle

ENGINES = ("dev", "kafka")


def start(engine: str, data_dir: Path, port: int | None = None, brokers: int = 1,
          sasl_ssl: bool = False) -> BrokerHandle:
    if engine == "kafka":
        return kafka.start_broker(data_dir, port=port, brokers=brokers, sasl_ssl=sasl_ssl)
    if sasl_ssl:
        raise BrokerError("the dev broker has no SASL_SSL listener; use --engine kafka --sasl-ssl")
    if engine != "dev":
        raise BrokerError(f"unknown broker engine {engine!r}; choose one of {', '.join(ENGINES)}")
    if brokers != 1:
        raise BrokerError("the dev broker runs one node only; use --engine kafka for --brokers 3")
    return dev.start_broker(data_dir, port=port)


def stop(data_dir: Path) -> bool:
    return kafka.stop_broker(data_dir) or dev.stop_broker(data_dir)


def status(data_dir: Path) -> BrokerHandle | None:
    return kafka.broker_status(data_dir) or dev.broker_status(data_dir)


def test_engine() -> str:
    """The engine the test suite starts (``IQMESH_BROKER``, default ``dev``)."""
    engine = os.environ.get("IQMESH_BROKER", "dev").strip().lower() or "dev"
    if engine not in ENGINES:
        raise BrokerError(f"IQMESH_BROKER={engine!r}: choose one of {', '.join(ENGINES)}")
    return engine
