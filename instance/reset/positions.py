"""Where a reset moves the committed offset of an input partition: the rules of Kafka's
StreamsResetter (``--to-earliest``, the default, ``--to-latest``, ``--to-offset``, ``--shift-by``,
``--to-datetime``, ``--by-duration``, ``--from-file``), and the parsing of their arguments.

Pure: the offsets a partition has (earliest, latest, committed, the first at a time) come in as
:class:`Bounds`; nothing here talks to a broker.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from typing import Literal

from instance.errors import ConfigException

#: a topic partition, as (topic, partition)
TopicPart = tuple[str, int]
Kind = Literal["earliest", "latest", "offset", "shift", "time", "file"]


@dataclass(frozen=True)
class Bounds:
    """What a partition holds: its earliest and latest offsets, the group's committed offset (None:
    none), and with a time rule the first offset whose timestamp is at or after that time (None:
    no such record)."""

    earliest: int
    latest: int
    committed: int | None = None
    at_time: int | None = None

    def clamp(self, offset: int) -> int:
        """``offset`` moved into [earliest, latest], as Kafka's resetter does with a position
        outside the log."""
        return max(self.earliest, min(offset, self.latest))


@dataclass(frozen=True)
class ResetPosition:
    """One rule for every input partition. ``value``: the offset (``offset``), the shift
    (``shift``), the time in epoch milliseconds (``time``: ``--to-datetime`` and ``--by-duration``);
    ``plan``: ``--from-file``'s offsets."""

    kind: Kind = "earliest"
    value: int = 0
    plan: dict[TopicPart, int] = field(default_factory=dict)
    #: the flag that chose it, as the output names it (``to-earliest``, ``shift-by -5``...)
    label: str = "to-earliest"

    def target(self, tp: TopicPart, bounds: Bounds) -> int | None:
        """The offset to commit for ``tp``; None: leave it as it is (a partition ``--from-file``
        does not name)."""
        if self.kind == "earliest":
            return bounds.earliest
        if self.kind == "latest":
            return bounds.latest
        if self.kind == "offset":
            return bounds.clamp(self.value)
        if self.kind == "shift":
            # no committed offset: the application starts at the earliest (auto.offset.reset's default)
            start = bounds.committed if bounds.committed is not None else bounds.earliest
            return bounds.clamp(start + self.value)
        if self.kind == "time":
            # no record at or after that time: the end, as Kafka's resetter falls back to
            return bounds.latest if bounds.at_time is None else bounds.clamp(bounds.at_time)
        offset = self.plan.get(tp)
        return None if offset is None else bounds.clamp(offset)


def parse_datetime(text: str) -> int:
    """Epoch milliseconds of ``--to-datetime``: Kafka's ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional
    zone (``Z``, ``+01:00``, ``+0100``); without a zone the time is UTC, as in Kafka's resetter.
    Fractions of a second are optional here (Kafka requires the milliseconds)."""
    if "T" not in text:
        raise ConfigException(f"--to-datetime {text[:64]!r} has no 'T' between date and time: give "
                              "YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone such as Z or +01:00")
    try:
        when = dt.datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigException(f"--to-datetime {text[:64]!r} is not a date and time: give "
                              "YYYY-MM-DDTHH:mm:SS.sss, optionally with a zone such as Z or +01:00") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return int(when.timestamp() * 1000)


# Java's Duration.parse format: PnDTnHnMn.nS, each part optional and signed, case-insensitive
_DURATION = re.compile(
    r"(?P<sign>[-+]?)P(?:(?P<d>[-+]?\d+)D)?"
    r"(?P<t>T(?:(?P<h>[-+]?\d+)H)?(?:(?P<m>[-+]?\d+)M)?(?:(?P<s>[-+]?\d+)(?:[.,](?P<f>\d{0,9}))?S)?)?",
    re.IGNORECASE)


def parse_duration(text: str) -> int:
    """Milliseconds of ``--by-duration``, ISO 8601 as Java's ``Duration.parse`` reads it
    (``PnDTnHnMn.nS``: ``P1D``, ``PT5H30M``, ``PT0.5S``, ``-PT1H``)."""
    m = _DURATION.fullmatch(text.strip())
    parts = ("d", "h", "m", "s")
    if m is None or not any(m[p] for p in parts) or (m["t"] and not any(m[p] for p in parts[1:])):
        raise ConfigException(f"--by-duration {text[:64]!r} is not an ISO 8601 duration: give PnDTnHnMnS, "
                              "e.g. P1D (a day), PT5H30M, PT90S")
    seconds = int(m["s"] or 0)
    fraction = int(((m["f"] or "") + "000")[:3])
    ms = (int(m["d"] or 0) * 86_400_000 + int(m["h"] or 0) * 3_600_000 + int(m["m"] or 0) * 60_000
          + seconds * 1000 + (-fraction if (m["s"] or "").startswith("-") else fraction))
    return -ms if m["sign"] == "-" else ms


def parse_reset_plan(text: str) -> dict[TopicPart, int]:
    """``--from-file``: lines ``TOPIC,PARTITION,OFFSET`` (Kafka's reset plan CSV; blank lines skipped)."""
    plan: dict[TopicPart, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        try:
            if len(parts) != 3 or not parts[0]:
                raise ValueError
            plan[(parts[0], int(parts[1]))] = int(parts[2])
        except ValueError:
            raise ConfigException(f"--from-file line {number} is not TOPIC,PARTITION,OFFSET: {line[:64]!r}") from None
    if not plan:
        raise ConfigException("--from-file names no partition: give lines TOPIC,PARTITION,OFFSET")
    return plan
