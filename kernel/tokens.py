"""Position tokens: the consistency bound a reply returns and a later query may pass back.

A token says "store S, partition P reflected changelog offset O"; a query bounded by it is only
answered by a replica at or beyond O for P (Kafka Streams' IQv2 ``Position`` bound, per
partition). Tokens are opaque to clients: URL-safe base64 of a small JSON document (the codec here is
shared with scan page tokens, kernel/page_token.py). They come from untrusted callers, so
:meth:`PositionToken.decode` accepts exactly what :meth:`PositionToken.encode` produces and
raises ValueError for anything else.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from kernel.echo import echo

MAX_TOKEN_CHARS = 2048  # a store name is at most a topic name (249 chars); this is ample
_MIN_OFFSET = -1  # "not logged": the position of a store without a changelog
_MAX_INT64 = 2**63 - 1
_MAX_PARTITION = 2**31 - 1
_FIELDS = frozenset({"s", "p", "o"})


@dataclass(frozen=True)
class PositionToken:
    store: str
    partition: int
    offset: int

    def encode(self) -> str:
        return encode_json_token({"s": self.store, "p": self.partition, "o": self.offset})

    @staticmethod
    def decode(token: str) -> PositionToken:
        """Parse a token from a caller; any malformed input raises ValueError (never another
        exception), so transports can map it to a bad-argument status."""
        doc = decode_json_token("position token", token, _FIELDS)
        try:
            return _checked(doc)
        except ValueError as e:
            raise ValueError(f"position token {echo(token)} is not valid: {e}") from None


def encode_json_token(doc: dict[str, Any]) -> str:
    """URL-safe base64 (unpadded) of compact JSON: opaque to callers, easy to validate."""
    raw = json.dumps(doc, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_json_token(what: str, token: Any, fields: frozenset[str],
                      max_chars: int = MAX_TOKEN_CHARS) -> dict[str, Any]:
    """The JSON object of a token made by :func:`encode_json_token`, with exactly ``fields``.
    Anything else raises ValueError naming ``what`` (never another exception: tokens come from
    untrusted callers and transports map ValueError to a bad-argument status)."""
    try:
        return _json_doc(token, fields, max_chars)
    except ValueError as e:
        raise ValueError(f"{what} {echo(token)} is not valid: {e}") from None


def _json_doc(token: Any, fields: frozenset[str], max_chars: int) -> dict[str, Any]:
    if not isinstance(token, str):
        raise ValueError(f"expected a string, got {type(token).__name__}")
    if not token or len(token) > max_chars:
        raise ValueError(f"length {len(token)} is not within 1..{max_chars}")
    try:
        raw = base64.b64decode(token + "=" * (-len(token) % 4), altchars=b"-_", validate=True)
    except (binascii.Error, ValueError) as e:  # ValueError: non-ASCII characters
        raise ValueError(f"not URL-safe base64 ({e})") from None
    try:
        doc = json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(doc, dict) or doc.keys() != fields:
        raise ValueError(f"not a JSON object with exactly the fields {sorted(fields)}")
    return doc


def _checked(doc: dict[str, Any]) -> PositionToken:
    store, partition, offset = doc["s"], doc["p"], doc["o"]
    if not isinstance(store, str) or not store:
        raise ValueError("store must be a non-empty string")
    if not _is_int(partition) or not 0 <= partition <= _MAX_PARTITION:
        raise ValueError(f"partition must be an integer in 0..{_MAX_PARTITION}")
    if not _is_int(offset) or not _MIN_OFFSET <= offset <= _MAX_INT64:
        raise ValueError(f"offset must be an integer in {_MIN_OFFSET}..{_MAX_INT64}")
    return PositionToken(store, partition, offset)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)
