"""Word count, with the semantics of Kafka Streams' WordCountLambdaExample.

Reads lines from ``streams-plaintext-input`` (null keys), lower-cases them, splits on non-word
characters, groups by word (through a repartition topic), counts into the queryable store
``counts``, and writes every count change to ``streams-wordcount-output`` (string → long).
"""

import os
import re

from instance.serde import LongSerde, StringSerde
from instance.topology import StreamsBuilder, Topology

# overridable so several runs can share one broker (the tests do)
INPUT_TOPIC = os.environ.get("WORDCOUNT_INPUT_TOPIC", "streams-plaintext-input")
OUTPUT_TOPIC = os.environ.get("WORDCOUNT_OUTPUT_TOPIC", "streams-wordcount-output")
STORE = "counts"

_WORD = re.compile(r"\W+", re.UNICODE)


def split_words(line: str) -> list[str]:
    return [w for w in _WORD.split(line.lower()) if w]


def build() -> Topology:
    builder = StreamsBuilder(default_key_serde=StringSerde(), default_value_serde=StringSerde())
    text = builder.stream(INPUT_TOPIC)
    counts = (text.flat_map_values(split_words)
                  .group_by(lambda _key, word: word)
                  .count(STORE))
    counts.to_stream().to(OUTPUT_TOPIC, value_serde=LongSerde())
    return builder.build()
