"""Page views per user per minute: a tumbling-window count, queryable with WindowFetch.

Reads ``page-views`` (key: user id, value: page), counts each user's views per one-minute window
(event time, a day of grace for late records) into the window store ``views-per-minute``, and
writes every count change to ``views-per-minute-output`` (windowed key, long).
"""

import os

from instance.serde import LongSerde, StringSerde
from instance.topology import Materialized, StreamsBuilder, Topology
from instance.topology.windows import TimeWindows

INPUT_TOPIC = os.environ.get("WINDOWED_INPUT_TOPIC", "page-views")
OUTPUT_TOPIC = os.environ.get("WINDOWED_OUTPUT_TOPIC", "views-per-minute-output")
STORE = "views-per-minute"
WINDOW_MS = 60_000


def build() -> Topology:
    builder = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    counts = (builder.stream(INPUT_TOPIC)
              .group_by_key()
              .windowed_by(TimeWindows.of_size_and_grace(WINDOW_MS, 24 * 3600 * 1000))
              .count(Materialized.as_(STORE)))
    counts.to_stream().to(OUTPUT_TOPIC, value_serde=LongSerde())
    return builder.build()
