"""Which replica answers a key query: the routing every transport (gRPC, REST, client) shares.

Candidates are the active, then (with ``allow_stale``) the standbys, least lagging first. Dead
instances (missed heartbeats) are not candidates; a candidate whose reported lag exceeds
``max_lag`` is skipped; a candidate that refuses or cannot be reached passes to the next. A query
travels one hop at most: a forwarded query is answered locally or refused. The router knows no
transport; the caller supplies how to answer here and how to forward to an endpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, NamedTuple, TypeVar

from kernel.instance_state import RUNNING_OR_REBALANCING, State
from kernel.metadata import ClusterView, task_lag
from kernel.options import QueryOptions
from kernel.task_id import TaskId
from kernel.unavailable import FailureReason, UnavailableError

R = TypeVar("R")
S = TypeVar("S")

#: refusals of the active that a standby's (stale) answer gets around
_STALE_HELPS = (FailureReason.REBALANCING, FailureReason.NOT_ACTIVE, FailureReason.NOT_AVAILABLE)


class Candidate(NamedTuple):
    """A replica that may be asked: ``lag`` is what its instance last reported for the task (a
    named tuple: one or more are built per query)."""

    instance_id: str
    endpoint: str
    lag: int


class QueryRouter:
    """Routes queries over ``view`` on behalf of ``local_id`` (None: a client holding no
    replicas, so every candidate is forwarded to)."""

    def __init__(self, view: ClusterView, local_id: str | None) -> None:
        self.view = view
        self.local_id = local_id

    def candidates(self, task: TaskId, options: QueryOptions, local_state: State = State.RUNNING) -> list[Candidate]:
        """Live replicas of ``task`` in the order they are asked. While ``local_state`` is not
        RUNNING or REBALANCING the active is left out (the view may be stale or empty then)."""
        infos = []
        # only while RUNNING or REBALANCING does this instance trust the view enough to route to the active
        owner = self.view.owner(task) if local_state in RUNNING_OR_REBALANCING else None
        if owner is not None:
            infos.append(owner)
        if options.allow_stale:
            infos += [i for i in self.view.standbys(task) if owner is None or i.instance_id != owner.instance_id]
        return [Candidate(i.instance_id, i.endpoint, task_lag(i, task)) for i in infos]

    def route(self, store: str, task: TaskId | None, options: QueryOptions, answer_local: Callable[[], R],
              forward: Callable[[str], R], *, forwarded: bool = False, local_state: State = State.RUNNING) -> R:
        """The first answer of the candidates for ``task``. ``answer_local()`` and
        ``forward(endpoint)`` return the answer or raise UnavailableError to pass to the next
        candidate; any other exception ends routing. A ``forwarded`` query is answered locally or
        refused, never forwarded again; it needs no ``task`` (the sender resolved it), so the
        receiver need not resolve the key before its own checks. Raises UnavailableError with
        the most relevant reason when no candidate answers. A plain loop, not :meth:`route_steps`
        driven: a Get of a key this instance owns is the hot path, and pays for no generator."""
        if forwarded:
            return answer_local()
        if task is None:
            raise ValueError("a query that is not forwarded needs its task id")
        attempt = _Attempt(self, store, task, options, local_state)
        for c in attempt.candidates:
            endpoint = attempt.asking(c)
            try:
                return answer_local() if endpoint is None else forward(endpoint)
            except UnavailableError as e:
                attempt.reasons.append(e.reason)
        raise attempt.exhausted()

    def route_steps(self, store: str, task: TaskId, options: QueryOptions,
                    ask: Callable[[str | None], Generator[S, Any, R]], *,
                    local_state: State = State.RUNNING) -> Generator[S, Any, R]:
        """:meth:`route` as steps, for a caller whose ``ask(endpoint)`` yields what it needs
        done (the query client's core, router/client/client_steps.py): the first answer of the
        candidates, in order; ``ask`` raises UnavailableError to pass to the next. This
        instance's own replica is asked as ``ask(None)``."""
        attempt = _Attempt(self, store, task, options, local_state)
        for c in attempt.candidates:
            try:
                return (yield from ask(attempt.asking(c)))
            except UnavailableError as e:
                attempt.reasons.append(e.reason)
        raise attempt.exhausted()

    def plan(self, store: str, task: TaskId, options: QueryOptions,
             local_state: State = State.RUNNING) -> tuple[list[Candidate], list[FailureReason]]:
        """The candidates to ask, in order, and the reasons of those skipped (lag above
        ``max_lag``). Raises UnavailableError when ``task`` has no live replica at all."""
        candidates = self.candidates(task, options, local_state)
        if not candidates:
            rebalancing = local_state is State.REBALANCING or bool(self.view.instances())
            raise UnavailableError(
                FailureReason.REBALANCING if rebalancing else FailureReason.NOT_AVAILABLE,
                f"no live replica of {store!r} partition {task.partition} (instance state {local_state.name})",
                standby_holds=self.standby_holds(task, options))
        if options.max_lag is None:
            return candidates, []
        within = [c for c in candidates if c.lag <= options.max_lag]
        return within, [FailureReason.NO_REPLICA_WITHIN_LAG] * (len(candidates) - len(within))

    def standby_holds(self, task: TaskId, options: QueryOptions) -> bool:
        """A strict read and a standby holds the partition: a stale read would be answered there."""
        return not options.allow_stale and bool(self.view.standbys(task))



class _Attempt:
    """One routing of a query: the candidates :meth:`QueryRouter.plan` gives, the instance ids
    asked and the reasons they refused, and the error when none answered."""

    __slots__ = ("router", "store", "task", "options", "local_state", "candidates", "skipped", "tried", "reasons")

    def __init__(self, router: QueryRouter, store: str, task: TaskId, options: QueryOptions,
                 local_state: State) -> None:
        self.router, self.store, self.task, self.options, self.local_state = router, store, task, options, local_state
        self.candidates, self.skipped = router.plan(store, task, options, local_state)
        self.tried: list[str] = []
        self.reasons: list[FailureReason] = []

    def asking(self, candidate: Candidate) -> str | None:
        """``candidate`` is asked now: its endpoint, None when it is this instance."""
        self.tried.append(candidate.instance_id)
        return None if candidate.instance_id == self.router.local_id else candidate.endpoint

    def exhausted(self) -> UnavailableError:
        """Every candidate refused or was skipped: the most relevant reason, and how to read a
        standby instead when that would help."""
        reasons = self.reasons + self.skipped
        reason = FailureReason.most_relevant(reasons)
        holds = reason in _STALE_HELPS and self.router.standby_holds(self.task, self.options)
        message = (f"no replica of {self.store!r} partition {self.task.partition} could answer "
                   f"({', '.join(r.name for r in reasons)})")
        return UnavailableError(reason, message, tried=self.tried, standby_holds=holds)
