"""A scan over many partitions: read each partition's page, then merge the pages by key.

Transport-free like :mod:`router.client.query_router`: the caller's ``read(partition)`` routes one
partition (here or one hop away) and returns its page or raises UnavailableError, which becomes
that partition's failure; the answer reports it instead of silently missing it.

Paging needs no per-partition cursor: partitions hold disjoint keys and the merge is in global
key order, so "every key after the last one returned" resumes all of them at once. Each partition
returns at most ``limit`` entries and whether it has more, so a page is complete when the merge
keeps every entry read and no partition has more.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from kernel.unavailable import FailureReason, UnavailableError


class Keyed(Protocol):
    @property
    def key(self) -> bytes: ...


E = TypeVar("E", bound=Keyed)
M = TypeVar("M")


@dataclass(frozen=True)
class PartitionPage(Generic[E, M]):
    """One partition's answer: ``entries`` in key-byte order (at most the page limit), ``more``
    when the partition holds further entries, ``metadata`` the transport's read metadata."""

    partition: int
    entries: Sequence[E]
    more: bool
    metadata: M


@dataclass(frozen=True)
class PartitionFailure:
    """Why a partition could not answer (the reason routing reported, the instances it tried)."""

    partition: int
    reason: FailureReason
    message: str
    tried: tuple[str, ...] = ()


@dataclass(frozen=True)
class MergedPage(Generic[E, M]):
    """The page of a scan: ``entries`` in key-byte order; ``outcomes`` one per partition asked,
    in partition order; ``resume_after`` the key the next page starts after (None: done)."""

    entries: list[E]
    outcomes: list[PartitionPage[E, M] | PartitionFailure]
    resume_after: bytes | None

    @property
    def failures(self) -> list[PartitionFailure]:
        return [o for o in self.outcomes if isinstance(o, PartitionFailure)]

    @property
    def complete(self) -> bool:
        return not self.failures


def scatter(partitions: Sequence[int], read: Callable[[int], PartitionPage[E, M]],
            executor: Executor | None = None) -> list[PartitionPage[E, M] | PartitionFailure]:
    """``read`` every partition (in parallel on ``executor`` when there are several); a partition
    whose ``read`` raises UnavailableError becomes a PartitionFailure. Any other exception
    (a bad request, an unknown store) ends the scan."""

    def one(p: int) -> PartitionPage[E, M] | PartitionFailure:
        try:
            return read(p)
        except UnavailableError as e:
            return PartitionFailure(p, e.reason, str(e), e.tried)

    ordered = sorted(set(partitions))
    if executor is None or len(ordered) < 2:
        return [one(p) for p in ordered]
    return list(executor.map(one, ordered))


def merge(outcomes: Sequence[PartitionPage[E, M] | PartitionFailure], limit: int) -> MergedPage[E, M]:
    """The first ``limit`` entries of the answered partitions in key-byte order."""
    if limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    pages = [o for o in outcomes if isinstance(o, PartitionPage)]
    entries: list[E] = []
    more = any(p.more for p in pages)
    for e in heapq.merge(*(p.entries for p in pages), key=_key):
        if len(entries) == limit:
            more = True
            break
        entries.append(e)
    resume = entries[-1].key if more and entries else None
    return MergedPage(entries, sorted(outcomes, key=lambda o: o.partition), resume)


def incomplete_error(store: str, failures: Sequence[PartitionFailure]) -> UnavailableError:
    """What a scan that must be complete raises: the most relevant reason first (transports put
    its name first in their details), then each partition's reason."""
    detail = "; ".join(f"partition {f.partition}: {f.reason.name} ({f.message})" for f in failures)
    tried = tuple(dict.fromkeys(t for f in failures for t in f.tried))
    return UnavailableError(FailureReason.most_relevant(f.reason for f in failures),
                            f"{len(failures)} partition(s) of {store!r} could not answer: {detail}", tried=tried)


def _key(e: Keyed) -> bytes:
    return e.key
