"""Topology: the DSL (StreamsBuilder) and the Processor API it builds on."""

from instance.runtime.punctuation import Cancellable, PunctuationType
from instance.topology.builder import KGroupedStream, KStream, KTable, Materialized, StreamsBuilder
from instance.topology.processor import (
    BaseProcessor,
    ContextualProcessor,
    Processor,
    ProcessorContext,
    Record,
    RecordMetadata,
)
from instance.topology.topology import Topology

__all__ = ["StreamsBuilder", "KStream", "KTable", "KGroupedStream", "Materialized", "Topology",
           "Processor", "ContextualProcessor", "BaseProcessor", "ProcessorContext", "Record",
           "RecordMetadata", "PunctuationType", "Cancellable"]
