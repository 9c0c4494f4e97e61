"""Position tokens: the consistency bound a reply returns and a later query may pass back.

A token says "store S, partition P reflected changelog offset O"; a query bounded by it is only
answered by a replica at or beyond O for P (Kafka Streams' IQv2 ``Position`` bound, per
partition). Tokens are opaque to clients: URL-safe base64 of a small JSON document.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass


@dataclass(frozen=True)
class PositionToken:
    store: str
    partition: int
    offset: int

    def encode(self) -> str:
        raw = json.dumps({"s": self.store, "p": self.partition, "o": self.offset}, separators=(",", ":"))
        return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")

    @staticmethod
    def decode(token: str) -> PositionToken:
        try:
            pad = "=" * (-len(token) % 4)
            d = json.loads(base64.urlsafe_b64decode(token + pad))
            return PositionToken(str(d["s"]), int(d["p"]), int(d["o"]))
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"position token {token!r} is not valid: {e}") from None
