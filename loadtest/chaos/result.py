"""One chaos run's outcome, and what it should have been."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE_V2 = "exactly_once_v2"

#: scenarios with a kill -9: the group must settle within session.timeout.ms + 10 s
CRASHES = frozenset({"crash", "crash-leader", "crash-restart-static", "crash-restart-dynamic", "warm-takeover",
                     "random-membership"})
CRASH_MARGIN_S = 10.0


def exact_required(scenario: str, guarantee: str) -> bool:
    """Every count exact, under both guarantees and whatever the scenario: under at-least-once a
    record redone after a crash is applied once downstream too (instance/state/origins.py)."""
    return True


@dataclass
class RunResult:
    scenario: str
    guarantee: str
    seed: int
    application_id: str
    logs_dir: Path
    session_timeout_s: float
    lines: int = 0
    victim: str = ""
    #: seconds from the start of the input to the (last) action
    action_at_s: float | None = None
    converged: bool = False
    #: seconds from the (last) action until tasks settled and the counts check passed
    converge_s: float | None = None
    #: seconds from the (last) action until every task was owned by a live RUNNING instance
    #: (first seen; polled once the input has ended) — what "take over within
    #: session.timeout.ms + 10 s" is about; converge_s adds catching up with the input
    owned_s: float | None = None
    #: why the run had not converged when the wait ended ("" once converged)
    problem: str = ""
    lost: int = 0
    double_counted: int = 0
    #: words whose count could not be read at the end (not in lost / double_counted)
    unreadable_words: int = 0
    queries: int = 0
    queries_failed: int = 0
    stale_flagged: int = 0
    stale_unflagged: int = 0
    failure_reasons: dict[str, int] = field(default_factory=dict)
    unflagged_examples: list[str] = field(default_factory=list)
    #: warm-takeover: changelog records restored by the survivors into the victim's partitions
    restored_at_takeover: int | None = None
    #: warm-takeover: same restores into any partition (the range assignor moves survivors' tasks too)
    restored_any_partition: int | None = None
    #: warm-takeover: changelog records of the victim's partitions written after its last commit
    since_last_commit: int | None = None
    #: the longest time an instance that ran throughout (not the victim) processed nothing while
    #: input flowed: what the membership change cost the members it did not move
    pause_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return exact_required(self.scenario, self.guarantee)

    def violations(self) -> list[str]:
        """What went wrong against the expectations the CI tests assert (empty: a good run)."""
        out = []
        if not self.converged:
            out.append(f"did not converge: {self.problem}")
        if self.lost:
            out.append(f"{self.lost} records lost")
        if self.exact and self.double_counted:
            out.append(f"{self.double_counted} records double-counted ({self.guarantee})")
        if self.stale_unflagged:
            out.append(f"{self.stale_unflagged} unflagged stale answers: {self.unflagged_examples[:2]}")
        bound = self.session_timeout_s + CRASH_MARGIN_S
        if self.scenario in CRASHES and (self.owned_s is None or self.owned_s > bound):
            out.append(f"tasks owned again after {self.owned_s}s, more than session.timeout.ms + "
                       f"{CRASH_MARGIN_S:.0f}s = {bound:.0f}s")
        if self.unreadable_words:
            out.append(f"{self.unreadable_words} words unreadable at the end")
        return out
