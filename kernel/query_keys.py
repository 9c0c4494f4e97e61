"""The largest key a query may name.

Every query key is serialized and hashed (murmur2) to find its partition, and a caller can send a
key as large as a gRPC message. No record's key can be larger than Kafka's default record size
limit (``message.max.bytes``, about 1 MB), so a larger query key cannot match anything: it is
refused as a bad argument before any work is done.
"""

from __future__ import annotations

#: bytes of a raw key, or characters of a key given as text
MAX_QUERY_KEY_BYTES = 1 << 20


def check_query_key(key: str | bytes, what: str = "key") -> None:
    """ValueError (a bad argument) for a key above :data:`MAX_QUERY_KEY_BYTES`."""
    if len(key) > MAX_QUERY_KEY_BYTES:
        unit = "characters" if isinstance(key, str) else "bytes"
        raise ValueError(f"{what} of {len(key)} {unit} is longer than the {MAX_QUERY_KEY_BYTES} a query "
                         f"key may have")
