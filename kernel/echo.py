"""Caller input in error messages, clipped: the one helper every edge uses (gRPC status, HTTP
body, CLI line), so no message grows with what a caller sent."""

from __future__ import annotations

#: characters of caller input an error message repeats (see :func:`echo`)
ECHO_CHARS = 64
#: the most an error message sent to a caller may hold (gRPC details travel in a header)
MAX_MESSAGE_CHARS = 2048


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """Caller input (a store name, key, token) as an error message repeats it: its repr, clipped
    to ``limit`` characters with the full length said. A message must not grow with the input:
    a 1 MB store name echoed whole made the reply exceed gRPC's header limit."""
    if isinstance(value, str | bytes | bytearray) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} {'chars' if isinstance(value, str) else 'bytes'})"
    return repr(value)


def clip(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """The last guard at an edge (gRPC status, HTTP body, CLI line): a message of at most ``limit``
    characters, whatever echoed it."""
    return message if len(message) <= limit else f"{message[:limit]}... ({len(message)} chars)"
