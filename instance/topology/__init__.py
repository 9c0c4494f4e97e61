"""Topology: the DSL (StreamsBuilder) and the Processor API it builds on."""

from instance.topology.builder import KGroupedStream, KStream, KTable, Materialized, StreamsBuilder
from instance.topology.processor import BaseProcessor, Processor, ProcessorContext
from instance.topology.topology import Topology

__all__ = ["StreamsBuilder", "KStream", "KTable", "KGroupedStream", "Materialized", "Topology",
           "Processor", "BaseProcessor", "ProcessorContext"]
