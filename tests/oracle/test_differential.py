"""iqmesh against Kafka Streams: every template's scenarios (drawn by Hypothesis) run through
Kafka Streams' own TopologyTestDriver (one JVM per template) and iqmesh's, compared record by
record: each output record's key, value, timestamp and order, and the queried stores after every
input. A difference is shrunk to a minimal scenario before it is reported.

``IQMESH_ORACLE_EXAMPLES`` sets the scenarios per template (default 60); ``IQMESH_ORACLE_SEED``
draws other ones (default: the same every run)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.oracle.kstreams import run_batch
from tests.oracle.scenarios import TOPICS, draw_scenarios, first_difference, shrink
from tests.oracle.templates import run_iqmesh

EXAMPLES = int(os.environ.get("IQMESH_ORACLE_EXAMPLES", "60"))
SEED = int(os.environ["IQMESH_ORACLE_SEED"]) if os.environ.get("IQMESH_ORACLE_SEED") else None


@pytest.mark.timeout(600 + 5 * EXAMPLES)  # a long run takes longer (two JVM batches, a shrink)
@pytest.mark.parametrize("template", sorted(TOPICS))
def test_iqmesh_matches_kafka_streams(template: str, oracle_jar: Path) -> None:
    scenarios = draw_scenarios(template, EXAMPLES, SEED)
    expected = run_batch(scenarios)
    failures = []
    for s, e in zip(scenarios, expected, strict=True):
        if first_difference(s, e, run_iqmesh(s)) is not None:
            failures.append(s)
    if failures:
        small = shrink(failures[0])
        diff = first_difference(small, run_batch([small])[0], run_iqmesh(small))
        pytest.fail(f"{len(failures)} of {len(scenarios)} scenarios differ from Kafka Streams; "
                    f"the first, shrunk: template={small['template']} params={small['params']}\n{diff}")
