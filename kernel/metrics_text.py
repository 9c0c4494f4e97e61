"""Kafka Streams' metrics in the Prometheus text format (0.0.4), named as the Prometheus JMX
exporter names Kafka Streams' MBeans, so existing dashboards and alerts apply:
``kafka_streams_<group>_<name>`` with ``-`` as ``_`` (``kafka.streams:type=stream-task-metrics,...``
``process-rate`` -> ``kafka_streams_stream_task_metrics_process_rate``) and one label per tag
(``thread_id``, ``task_id``, ``rocksdb_state_id``...). Shared by an instance's own ``/metrics``
and the gateway's, which adds an ``instance`` label.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PREFIX = "kafka_streams_"


@dataclass(frozen=True)
class Sample:
    """One metric value: Kafka's name, group, tags, description."""

    name: str
    group: str
    tags: tuple[tuple[str, str], ...]
    value: float
    description: str = ""


def metric_name(group: str, name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", f"{PREFIX}{group}_{name}")


def label_name(tag: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", tag)


def _escape(v: str) -> str:
    return v.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _number(v: float) -> str:
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return str(int(v)) if float(v).is_integer() and abs(v) < 2**53 else repr(float(v))


def render(samples: Iterable[Sample], extra: Mapping[str, str] | None = None) -> str:
    """One family per metric name (HELP, TYPE, then its series); ``-total`` metrics are counters."""
    families: dict[str, list[tuple[Sample, str]]] = {}
    for s in samples:
        labels = {**(extra or {}), **{label_name(k): v for k, v in s.tags}}
        text = ",".join(f'{k}="{_escape(v)}"' for k, v in sorted(labels.items()))
        families.setdefault(metric_name(s.group, s.name), []).append((s, text))
    lines: list[str] = []
    for name in sorted(families):
        series = families[name]
        help_text = series[0][0].description.replace("\\", "\\\\").replace("\n", " ") or name
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {'counter' if name.endswith('_total') else 'gauge'}")
        for s, text in sorted(series, key=lambda p: p[1]):
            lines.append(f"{name}{{{text}}} {_number(s.value)}" if text else f"{name} {_number(s.value)}")
    return "\n".join(lines) + "\n" if lines else ""
