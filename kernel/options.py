"""The options of one query that decide which replica may answer it."""

from __future__ import annotations

from dataclasses import dataclass

from kernel.echo import echo
from kernel.tokens import PositionToken


@dataclass(frozen=True)
class QueryOptions:
    """``allow_stale``: standbys and restoring replicas may answer; ``max_lag``: no replica
    further behind its changelog end than this (None: any); ``bound``: only a replica at or
    beyond this position (for the token's partition)."""

    allow_stale: bool = False
    max_lag: int | None = None
    bound: PositionToken | None = None

    @staticmethod
    def parse(store: str, allow_stale: bool = False, max_lag: int | None = None,
              position: str = "", partitions: int | None = None) -> QueryOptions:
        """Options from a transport's raw fields: a negative ``max_lag`` means no limit, an empty
        ``position`` no bound. Raises ValueError for a malformed token, one for another store, or
        one for a partition the store's ``partitions`` (when given) do not include."""
        bound = PositionToken.decode(position) if position else None
        if bound is not None and bound.store != store:
            raise ValueError(f"position token is for store {echo(bound.store)}, not {echo(store)}")
        if bound is not None and partitions is not None and bound.partition >= partitions:
            raise ValueError(f"position token names partition {bound.partition} of store {echo(store)}, "
                             f"which has {partitions}")
        return QueryOptions(allow_stale, max_lag if max_lag is not None and max_lag >= 0 else None, bound)
