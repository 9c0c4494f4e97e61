"""Query-string parameters, checked strictly: anything malformed is a 400 before an instance is asked."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from kernel.echo import echo
from router.gateway.errors import bad_request

#: entries in one range page: the instances' own bounds (instance/server/scans.py)
DEFAULT_PAGE = 100
MAX_PAGE = 10_000
_MAX_INT64 = 2**63 - 1
_INTEGER = re.compile(r"-?[0-9]{1,19}")


def boolean(q: Mapping[str, str], name: str) -> bool:
    raw = q.get(name)
    if raw is None or raw == "":
        return False
    if raw in ("true", "false"):
        return raw == "true"
    raise bad_request(f"{name} must be true or false, got {echo(raw)}")


def integer(q: Mapping[str, str], name: str, default: int | None, lo: int, hi: int = _MAX_INT64) -> int | None:
    raw = q.get(name)
    if raw is None or raw == "":
        return default
    if not _INTEGER.fullmatch(raw):  # int() would also take " 5", "1_0", "+5" and other scripts' digits
        raise bad_request(f"{name} must be an integer, got {echo(raw)}")
    v = int(raw)
    if not lo <= v <= hi:
        raise bad_request(f"{name} must be between {lo} and {hi}, got {v}")
    return v


#: the query parameters each query route takes (anything else is a 400 naming these)
READ_PARAMS = ("allow_stale", "max_lag", "position")
SCAN_PARAMS = (*READ_PARAMS, "require_complete", "limit", "page_token")
RANGE_PARAMS = (*SCAN_PARAMS, "from", "to")
WATCH_PARAMS = ("key", "prefix", "token", "from_beginning", "max_events")


def only(q: Mapping[str, str], known: tuple[str, ...]) -> None:
    """A parameter this route does not take is a mistake (a typo would otherwise be ignored)."""
    unknown = sorted(set(q) - set(known))
    if unknown:
        names = ", ".join(echo(n) for n in unknown)
        raise bad_request(f"unknown query parameter{'s' if len(unknown) > 1 else ''} {names}; this route takes "
                          f"{', '.join(known)}")


def path_text(raw: str, name: str) -> str:
    """A percent-encoded path segment as text; bytes that are not UTF-8 are a 400, not a literal key."""
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError as e:
        raise bad_request(f"the {name} in the path is not percent-encoded UTF-8 (byte 0x{e.object[e.start]:02X} "
                          f"at {e.start}): encode the text as UTF-8, then percent-encode it") from None


def text(q: Mapping[str, str], name: str) -> str | None:
    """A free-text parameter; None when absent (an empty value is a value: the empty key)."""
    return q.get(name)


@dataclass(frozen=True)
class ReadParams:
    """Which replicas may answer (the gRPC QueryOptions): ``allow_stale``, ``max_lag``, ``position``."""

    allow_stale: bool = False
    max_lag: int | None = None
    position: str = ""

    @staticmethod
    def of(q: Mapping[str, str]) -> ReadParams:
        return ReadParams(boolean(q, "allow_stale"), integer(q, "max_lag", None, 0), q.get("position", ""))

    def kwargs(self) -> dict[str, Any]:
        return {"allow_stale": self.allow_stale, "max_lag": self.max_lag, "position": self.position}


@dataclass(frozen=True)
class ScanParams:
    """A scan's read options plus ``require_complete``, ``limit`` (None: every entry) and ``page_token``."""

    read: ReadParams
    require_complete: bool
    limit: int | None
    page_token: str

    @staticmethod
    def of(q: Mapping[str, str], default_limit: int | None) -> ScanParams:
        return ScanParams(ReadParams.of(q), boolean(q, "require_complete"),
                          integer(q, "limit", default_limit, 1, MAX_PAGE if default_limit else _MAX_INT64),
                          q.get("page_token", ""))

    def kwargs(self) -> dict[str, Any]:
        return {**self.read.kwargs(), "require_complete": self.require_complete, "limit": self.limit,
                "page_token": self.page_token, "with_json": True}
