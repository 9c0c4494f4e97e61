"""Page tokens: where the next page of a scan starts.

A page ends at a key; the next page is every key after it, whatever partition holds it, so the
token is that key plus the fingerprint of the query (a token is refused by any other query).
Opaque to callers and validated like position tokens (kernel/tokens.py): anything but what
:meth:`PageToken.encode` produces raises ValueError.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from kernel.scan_query import ScanQuery
from kernel.tokens import decode_json_token, encode_json_token

#: room for a key of ~48 KiB; a page ending at a longer key could not be resumed
MAX_PAGE_TOKEN_CHARS = 65_536
_FIELDS = frozenset({"q", "a"})
_FINGERPRINT_CHARS = 16


@dataclass(frozen=True)
class PageToken:
    query: str   # ScanQuery.fingerprint() of the query it continues
    after: bytes  # the last key returned

    def encode(self) -> str:
        return encode_json_token({"q": self.query, "a": base64.b64encode(self.after).decode()})

    @staticmethod
    def decode(token: str) -> PageToken:
        doc = decode_json_token("page token", token, _FIELDS, MAX_PAGE_TOKEN_CHARS)
        q, a = doc["q"], doc["a"]
        if not isinstance(q, str) or len(q) != _FINGERPRINT_CHARS or not _is_hex(q):
            raise ValueError("page token is not valid: bad query fingerprint")
        if not isinstance(a, str):
            raise ValueError("page token is not valid: the key is not a string")
        try:
            after = base64.b64decode(a, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("page token is not valid: the key is not base64") from None
        return PageToken(q, after)


def resume_after(token: str, query: ScanQuery) -> bytes | None:
    """The key the page of ``query`` resumes after (None: first page, ``token`` empty). Raises
    ValueError for a malformed token or one another query issued."""
    if not token:
        return None
    t = PageToken.decode(token)
    if t.query != query.fingerprint():
        raise ValueError("page token belongs to another query (store, kind, bounds or keys differ)")
    return t.after


def _is_hex(s: str) -> bool:
    return all(c in "0123456789abcdef" for c in s)
