"""Codecs generated from Apache Kafka 4.4.0's message specs (devtools/kafka_wire_generate.py).

Do not edit: regenerate (``python -m devtools.kafka_wire_generate``)."""

KAFKA_VERSION = "4.4.0"
MODULES = (
    'request_header',
    'response_header',
    'api_versions_request',
    'api_versions_response',
    'find_coordinator_request',
    'find_coordinator_response',
    'streams_group_heartbeat_request',
    'streams_group_heartbeat_response',
    'streams_group_describe_request',
    'streams_group_describe_response',
    'offset_commit_request',
    'offset_commit_response',
    'offset_fetch_request',
    'offset_fetch_response',
)
