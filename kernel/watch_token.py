"""Watch resume tokens: where a watch goes on, per changelog partition.

A token is the fingerprint of the watch that issued it (store and what it watches, so another
watch refuses it) and, per partition read, the next changelog offset to read. Resuming reads
from exactly those offsets, so nothing is missed and nothing is sent twice. Opaque to callers
and validated like position tokens (kernel/tokens.py): anything but what :meth:`WatchToken.encode`
produces raises ValueError.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass

from kernel.tokens import decode_json_token

#: room for thousands of partitions
MAX_WATCH_TOKEN_CHARS = 65_536
_FIELDS = frozenset({"w", "o"})
_FINGERPRINT_CHARS = 16
_MAX_INT64 = 2**63 - 1
_MAX_PARTITION = 2**31 - 1


def watch_fingerprint(store: str, kind: str, key: bytes) -> str:
    """Identity of a watch: ``kind`` is KEY, PREFIX or ALL, ``key`` the key or prefix bytes."""
    h = hashlib.blake2b(digest_size=_FINGERPRINT_CHARS // 2)
    for part in (kind.encode(), store.encode(), key):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()


def encode_offsets(watch: str, offsets: dict[int, int]) -> str:
    """The token of ``watch`` at ``offsets``: what :func:`kernel.tokens.encode_json_token` makes of
    ``{"w": watch, "o": {"<partition>": offset}}``, built as text (a watch sends one per change;
    json.dumps took most of the time of a replay). ``watch`` is hex, so nothing needs escaping."""
    body = ",".join([f'"{p}":{o}' for p, o in sorted(offsets.items())])
    raw = f'{{"w":"{watch}","o":{{{body}}}}}'.encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass(frozen=True)
class WatchToken:
    watch: str                 # watch_fingerprint of the watch it continues
    offsets: dict[int, int]    # partition -> next changelog offset to read

    def encode(self) -> str:
        return encode_offsets(self.watch, self.offsets)

    def advanced(self, partition: int, next_offset: int) -> WatchToken:
        return WatchToken(self.watch, {**self.offsets, partition: next_offset})

    @staticmethod
    def decode(token: str) -> WatchToken:
        doc = decode_json_token("watch token", token, _FIELDS, MAX_WATCH_TOKEN_CHARS)
        w, o = doc["w"], doc["o"]
        if not isinstance(w, str) or len(w) != _FINGERPRINT_CHARS or any(c not in "0123456789abcdef" for c in w):
            raise ValueError("watch token is not valid: bad watch fingerprint")
        if not isinstance(o, dict) or not o:
            raise ValueError("watch token is not valid: no offsets")
        offsets: dict[int, int] = {}
        for p, off in o.items():
            if not (p.isascii() and p.isdigit() and len(p) <= 10) or not 0 <= int(p) <= _MAX_PARTITION:
                raise ValueError(f"watch token is not valid: partition {p[:20]!r}")
            if not isinstance(off, int) or isinstance(off, bool) or not 0 <= off <= _MAX_INT64:
                raise ValueError(f"watch token is not valid: offset of partition {p} must be in 0..{_MAX_INT64}")
            offsets[int(p)] = off
        return WatchToken(w, offsets)


def resume_offsets(token: str, fingerprint: str, partitions: list[int]) -> dict[int, int] | None:
    """The offsets a watch resumes from (None: ``token`` empty, start afresh). Raises ValueError
    for a malformed token, one another watch issued, or one that does not cover ``partitions``."""
    if not token:
        return None
    t = WatchToken.decode(token)
    if t.watch != fingerprint:
        raise ValueError("watch token belongs to another watch (store, key, prefix or all differ)")
    if sorted(t.offsets) != sorted(partitions):
        raise ValueError(f"watch token covers partitions {sorted(t.offsets)}, this watch reads {sorted(partitions)}")
    return t.offsets
