"""The differences the oracle found, kept: iqmesh against Kafka Streams' recorded answers (no JVM
needed), and the recorded answers against the oracle itself (one JVM)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.oracle.kstreams import run_batch
from tests.oracle.regressions import SCENARIOS, recorded, scenarios
from tests.oracle.scenarios import first_difference
from tests.oracle.templates import run_iqmesh


@pytest.mark.parametrize("scenario", scenarios(), ids=lambda s: s["id"])
def test_iqmesh_gives_kafka_streams_recorded_answer(scenario: dict) -> None:
    expected = recorded()[scenario["id"]]
    diff = first_difference(scenario, expected, run_iqmesh(scenario))
    assert diff is None, f"{SCENARIOS[scenario['id']][0]}\n{diff}"


def test_the_recorded_answers_are_kafka_streams_answers(oracle_jar: Path) -> None:
    batch = scenarios()
    rec = recorded()
    assert [r for r in run_batch(batch)] == [rec[s["id"]] for s in batch]
