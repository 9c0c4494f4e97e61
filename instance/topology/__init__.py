"""Topology: the DSL (StreamsBuilder) and the Processor API it builds on."""

from instance.topology.builder import StreamsBuilder
from instance.topology.dsl import KGroupedStream, KGroupedTable, KStream, KTable
from instance.topology.fk_join import TableJoined
from instance.topology.global_table import GlobalKTable
from instance.topology.materialized import Materialized
from instance.topology.options import Consumed, Grouped, Produced
from instance.topology.processor import (
    BaseProcessor,
    ContextualProcessor,
    Processor,
    ProcessorContext,
    Record,
    RecordMetadata,
)
from instance.topology.punctuation import Cancellable, PunctuationType
from instance.topology.stream_joins import StreamJoined
from instance.topology.suppress import BufferConfig, Suppressed
from instance.topology.table_joins import Joined
from instance.topology.topology import Topology
from instance.topology.windows import (
    EmitStrategy,
    JoinWindows,
    SessionWindow,
    SessionWindows,
    SlidingWindows,
    TimeWindow,
    TimeWindows,
    Windowed,
)

__all__ = ["StreamsBuilder", "KStream", "KTable", "KGroupedStream", "KGroupedTable", "GlobalKTable", "Joined",
           "TableJoined", "Consumed", "Produced", "Grouped",
           "Materialized", "Topology", "Processor", "ContextualProcessor", "BaseProcessor", "ProcessorContext",
           "Record", "RecordMetadata", "PunctuationType", "Cancellable",
           # windows, joins, suppression
           "TimeWindows", "SlidingWindows", "SessionWindows", "JoinWindows", "EmitStrategy", "Windowed",
           "TimeWindow", "SessionWindow", "StreamJoined", "Suppressed", "BufferConfig"]
