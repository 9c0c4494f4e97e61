"""Moved to :mod:`router.tokens`; kept so existing imports (tests/integration/test_stale_reads.py)
still resolve. Import from ``router.tokens``."""

from router.tokens import PositionToken

__all__ = ["PositionToken"]
