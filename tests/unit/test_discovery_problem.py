"""The gateway's one line about why it knows no instance (router/gateway/discovery_problem.py) on a
clock of the test's own: logged at once, not again for the same problem until REPEAT_S have
passed, at once for a new problem or after the problem cleared."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from router.gateway import discovery_problem
from router.gateway.discovery_problem import REPEAT_S, ProblemLog


def test_the_same_problem_is_logged_again_only_after_repeat_s(monkeypatch: pytest.MonkeyPatch,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    now = [500.0]
    monkeypatch.setattr(discovery_problem, "time", SimpleNamespace(monotonic=lambda: now[0]))
    log = logging.getLogger("router.gateway.test-problem")
    caplog.set_level(logging.INFO, logger=log.name)
    problems = ProblemLog(log)

    def lines() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == log.name]

    for _ in range(50):  # attempts within REPEAT_S: one line
        problems.report("no topic")
        now[0] += (REPEAT_S - 1) / 50
    assert lines() == ["no topic"] and problems.reported == 50 and problems.current == "no topic"
    now[0] += 1.0  # REPEAT_S since the line: the same problem again
    problems.report("no topic")
    assert lines() == ["no topic"] * 2
    problems.report("broker down")  # another problem: at once
    assert lines()[-1] == "broker down" and len(lines()) == 3
    problems.clear()
    assert lines()[-1] == "the instances topic can be read again" and problems.current == ""
    problems.report("broker down")  # after it cleared: at once, however recent the last line
    assert lines()[-1] == "broker down" and len(lines()) == 5
