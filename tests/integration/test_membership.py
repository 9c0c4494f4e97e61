"""Membership chaos at small scale: one run of each ``loadtest.chaos`` scenario (``crash`` under both
guarantees) on a 3-instance word-count cluster while input flows and queries run.

Asserted for every run: it converged (every task owned by a live RUNNING instance and the counts
right), no record lost, no unflagged stale answer; no double count, under either guarantee (under
at_least_once the work a crash redoes is applied once through the repartition topic too:
instance/state/origins.py); and after a crash the
survivors own every task within session.timeout.ms + 30 s of the kill (the 10 s target is the
chaos command's to measure). Dynamic membership
except in crash-restart-static; the instances run with default settings (see
loadtest/chaos/scenarios.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loadtest.chaos import run_scenario
from loadtest.chaos.report import describe, log_excerpt
from loadtest.chaos.result import AT_LEAST_ONCE, CRASH_MARGIN_S, CRASHES, EXACTLY_ONCE_V2

pytestmark = pytest.mark.integration

SEED = 1
LINES_PER_S = 400
SECONDS = 8.0  # 3,200 lines, ~24k words
SETTLE_TIMEOUT = 60.0  # after the input ends; longer than any bound asserted below
#: after a crash, the survivors own every task within session.timeout.ms + this: a takeover that
#: hangs fails here. The product's target, session.timeout.ms + 10 s (CRASH_MARGIN_S), is a speed:
#: the chaos command measures it on a machine doing nothing else (docs/benchmarks.md); CI, on a busy
#: 2-core machine, missed it by 2.8 s once (Apache Kafka, two CI runs and two CPU burners at once)
TAKEOVER_MARGIN_S = 3 * CRASH_MARGIN_S

CASES = [
    ("clean-leave", AT_LEAST_ONCE),
    ("crash", AT_LEAST_ONCE),
    ("crash", EXACTLY_ONCE_V2),
    ("crash-leader", AT_LEAST_ONCE),
    ("crash-restart-static", AT_LEAST_ONCE),
    ("crash-restart-dynamic", AT_LEAST_ONCE),
    ("scale-out-in", AT_LEAST_ONCE),
    ("warm-takeover", AT_LEAST_ONCE),
    ("random-membership", AT_LEAST_ONCE),
]


@pytest.mark.parametrize(("scenario", "guarantee"), CASES, ids=[f"{s}-{g}" for s, g in CASES])
def test_membership_scenario(bootstrap: str, tmp_path: Path, scenario: str, guarantee: str) -> None:
    r = run_scenario(scenario, bootstrap, tmp_path, SEED, guarantee, lines_per_s=LINES_PER_S, seconds=SECONDS,
                     settle_timeout=SETTLE_TIMEOUT)
    print("\n" + describe(r))
    why = f"\n{describe(r)}\n{log_excerpt(tmp_path)}"
    assert r.converged, f"did not converge{why}"
    assert r.unreadable_words == 0, f"counts unreadable at the end{why}"
    assert r.lost == 0, f"records lost{why}"
    if r.exact:
        assert r.double_counted == 0, f"records double-counted{why}"
    assert r.stale_unflagged == 0, f"unflagged stale answers{why}"
    if scenario in CRASHES:
        # the survivors own every task (counts may take longer: they also catch up with the input
        # that flowed meanwhile)
        assert r.owned_s is not None and r.owned_s <= r.session_timeout_s + TAKEOVER_MARGIN_S, \
            f"the survivors took longer than session.timeout.ms + {TAKEOVER_MARGIN_S:.0f}s to own every task{why}"
