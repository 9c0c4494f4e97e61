"""One front for the two local brokers: ``dev`` (noida-db, the embedded default) and ``kafka``
(Apache Kafka itself, see kafka_broker.py). ``stop`` and ``status`` find the engine from the data
directory, so only ``start`` is told which one."""

from __future__ import annotations

from pathlib import Path

from instance.local import broker as dev
from instance.local import kafka_broker as kafka
from instance.local.broker import BrokerError, BrokerHandle

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

