"""In-process testing of topologies (Kafka Streams' TopologyTestDriver)."""

from instance.testing.driver import TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver

__all__ = ["TopologyTestDriver", "TestInputTopic", "TestOutputTopic", "TestRecord"]
