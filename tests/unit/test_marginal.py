"""loadtest.marginal: the cost of the records a longer run has on top of a shorter one."""

from __future__ import annotations

import math

from loadtest.marginal import marginal, table


def _row(lib: str, n: int, cpu_s: float, wall_s: float, mode: str = "stateless", **kw: object) -> dict[str, object]:
    return {"lib": lib, "mode": mode, "guarantee": "at-least-once", "n": n, "ok": True, "cpu_s": cpu_s,
            "first_to_last_s": wall_s, **kw}


def test_what_both_runs_spend_alike_cancels_out() -> None:
    # 3 s of start-up / JIT in both runs, then 4 µs and 1/200k s per record
    rows = [_row("kafka-streams", 1_000_000, 3 + 4.0, 1 + 5.0), _row("kafka-streams", 3_000_000, 3 + 12.0, 1 + 15.0)]
    m = marginal(rows)
    assert m is not None
    assert (m.n_short, m.n_long) == (1_000_000, 3_000_000)
    assert math.isclose(m.cpu_us, 4.0) and math.isclose(m.rate, 200_000)


def test_medians_over_reps_and_failed_runs_left_out() -> None:
    rows = [_row("iqmesh", 100, 1.0, 1.0), _row("iqmesh", 100, 3.0, 1.0), _row("iqmesh", 100, 2.0, 1.0),
            _row("iqmesh", 300, 4.0, 2.0), _row("iqmesh", 300, 99.0, 9.0, ok=False)]
    m = marginal(rows)
    assert m is not None and math.isclose(m.cpu_us, (4.0 - 2.0) / 200 * 1e6) and math.isclose(m.rate, 200.0)


def test_one_run_length_gives_nothing() -> None:
    assert marginal([_row("iqmesh", 100, 1.0, 1.0), _row("iqmesh", 100, 2.0, 1.0)]) is None


def test_table_ratios_put_iqmesh_ahead_above_one() -> None:
    rows = [_row("iqmesh", 100, 1.0, 1.0), _row("iqmesh", 300, 2.0, 2.0),  # 5,000 µs, 200/s
            _row("kafka-streams", 100, 1.0, 1.0), _row("kafka-streams", 300, 5.0, 3.0),  # 20,000 µs, 100/s
            _row("iqmesh", 100, 1.0, 1.0, mode="stateful"), _row("iqmesh", 300, 2.0, 2.0, mode="stateful")]
    lines = table(rows)
    stateless = next(x for x in lines if x.startswith("stateless "))
    assert stateless.split()[-2:] == ["2.00,", "4.00"]
    stateful = next(x for x in lines if x.startswith("stateful "))
    assert "," not in stateful.split("/")[-1]  # no peer rows: no ratios
