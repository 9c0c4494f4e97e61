"""Chaos harness: membership scenarios (instances leave, crash, restart, scale) on a word-count
cluster while input flows and queries run; ``python -m loadtest.chaos --help``."""

from loadtest.chaos.result import RunResult
from loadtest.chaos.scenarios import SCENARIOS, run_scenario

__all__ = ["SCENARIOS", "RunResult", "run_scenario"]
