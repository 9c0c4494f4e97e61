"""iqmesh instance: a Kafka Streams runtime whose stores answer queries across the cluster."""

import os

# gRPC's documented default verbosity, which recent releases no longer keep: their C core logs every
# failed TLS handshake of a retried connection at INFO, lines around the one error the caller gets.
# Read when grpc is imported (below); GRPC_VERBOSITY set in the environment wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from instance.config import StreamsConfig
from instance.runtime.kafka_streams import KafkaStreams, StreamThreadExceptionResponse
from instance.runtime.states import State
from instance.topology import Materialized, StreamsBuilder, Topology

__all__ = ["KafkaStreams", "StreamsBuilder", "StreamsConfig", "Topology", "Materialized", "State",
           "StreamThreadExceptionResponse"]
