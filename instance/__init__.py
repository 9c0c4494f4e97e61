"""iqmesh instance: a Kafka Streams runtime whose stores answer queries across the cluster."""

from instance.config import StreamsConfig
from instance.runtime.kafka_streams import KafkaStreams, StreamThreadExceptionResponse
from instance.runtime.states import State
from instance.topology import Materialized, StreamsBuilder, Topology

__all__ = ["KafkaStreams", "StreamsBuilder", "StreamsConfig", "Topology", "Materialized", "State",
           "StreamThreadExceptionResponse"]
