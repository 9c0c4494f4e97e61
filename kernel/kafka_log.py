"""librdkafka's own log lines, through Python logging, each at most once per broker and error.

By default librdkafka prints every failed connect of every client to stderr: a broker that is not
there gave 194 lines in a minute. Every client of the runtime takes :func:`client_logging` in its
configuration instead: the lines reach the ``iqmesh.librdkafka`` logger (served by the client's
poll), and a line that only repeats an earlier one (same facility, same text once client names and
timings are removed: in practice, the same error from the same broker) is dropped for
``REPEAT_WINDOW_S``.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Any

#: how long a repeated line stays suppressed
REPEAT_WINDOW_S = 600.0
_VARYING = re.compile(r"\d+ms|after \d+|rdkafka#\w+-\d+")


class RepeatFilter(logging.Filter):
    """Passes a librdkafka line unless the same line passed within ``window_s`` seconds."""

    def __init__(self, window_s: float = REPEAT_WINDOW_S) -> None:
        super().__init__()
        self.window_s = window_s
        self._seen: dict[str, float] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        # confluent-kafka logs ("%s [%s] %s", facility, client name, text): the client name is left out
        text = f"{args[0]} {args[2]}" if len(args) == 3 else record.getMessage()
        key = _VARYING.sub("", text)
        now = time.monotonic()
        with self._lock:
            last = self._seen.get(key)
            if last is not None and now - last < self.window_s:
                return False
            if len(self._seen) > 10_000:
                self._seen.clear()
            self._seen[key] = now
        return True


KAFKA_LOGGER = logging.getLogger("iqmesh.librdkafka")
KAFKA_LOGGER.addFilter(RepeatFilter())


def client_logging() -> dict[str, Any]:
    """The configuration entries that route a client's log lines to :data:`KAFKA_LOGGER`."""
    return {"logger": KAFKA_LOGGER}
