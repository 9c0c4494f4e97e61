"""Kafka protocol messages on the wire, with codecs generated from Kafka's own JSON message specs.

librdkafka has no client for some APIs the runtime needs (the streams group protocol, KIP-1071);
instead of framing each by hand, ``spec`` reads Kafka's message definitions, ``codegen`` writes one
Python module per message into ``generated/`` (checked in: the runtime needs no Java), and
``connection`` speaks them to a broker. Regenerate with ``python -m devtools.kafka_wire_generate``.
"""
