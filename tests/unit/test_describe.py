"""Topology.describe() against Kafka Streams' TopologyDescription text, and topology validation."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from instance.errors import TopologyException
from instance.serde import LongSerde, StringSerde
from instance.state.spec import StoreSpec
from instance.testing import TopologyTestDriver
from instance.topology import BaseProcessor, Materialized, StreamsBuilder, Topology

S = StringSerde()
L = LongSerde()

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def wordcount(monkeypatch: pytest.MonkeyPatch) -> Any:
    """examples/wordcount.py with its default topic names."""
    monkeypatch.delenv("WORDCOUNT_INPUT_TOPIC", raising=False)
    monkeypatch.delenv("WORDCOUNT_OUTPUT_TOPIC", raising=False)
    spec = importlib.util.spec_from_file_location("wordcount_example", EXAMPLES / "wordcount.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# Kafka Streams' documented WordCount description (docs/streams/tutorial: the first sub-topology
# line is indented by three spaces, the following ones by two).
WORDCOUNT = """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [streams-plaintext-input])
      --> KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FLATMAPVALUES-0000000001 (stores: [])
      --> KSTREAM-KEY-SELECT-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-KEY-SELECT-0000000002 (stores: [])
      --> KSTREAM-FILTER-0000000005
      <-- KSTREAM-FLATMAPVALUES-0000000001
    Processor: KSTREAM-FILTER-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-KEY-SELECT-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: counts-repartition)
      <-- KSTREAM-FILTER-0000000005

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000006 (topics: [counts-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [counts])
      --> KTABLE-TOSTREAM-0000000007
      <-- KSTREAM-SOURCE-0000000006
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: streams-wordcount-output)
      <-- KTABLE-TOSTREAM-0000000007

"""


def test_wordcount_matches_kafka_streams_description(wordcount: Any) -> None:
    topology = wordcount.build()
    assert topology.describe() == WORDCOUNT
    assert str(topology) == WORDCOUNT


def test_wordcount_subtopologies_and_internal_topics(wordcount: Any) -> None:
    topology = wordcount.build()
    subs = topology.subtopologies()
    assert [s.source_topics for s in subs] == [["streams-plaintext-input"], ["counts-repartition"]]
    assert [s.sink_topics for s in subs] == [["counts-repartition"], ["streams-wordcount-output"]]
    assert [s.stores for s in subs] == [[], ["counts"]]
    assert list(topology.internal_topics) == ["counts-repartition"]
    assert topology.subtopology_of_store("counts").id == 1


def test_wordcount_runs(wordcount: Any) -> None:
    wc = wordcount
    lines = ["Hello Kafka Streams", "All streams lead to Kafka", "Join Kafka Summit"]
    with TopologyTestDriver(wc.build()) as d:
        d.create_input_topic(wc.INPUT_TOPIC, S, S).pipe_value_list(lines)
        out = d.create_output_topic(wc.OUTPUT_TOPIC, S, L).read_key_values_to_list()
        assert dict(d.get_key_value_store(wc.STORE).all()) == {
            "hello": 1, "kafka": 3, "streams": 2, "all": 1, "lead": 1, "to": 1, "join": 1, "summit": 1}
    assert out[:3] == [("hello", 1), ("kafka", 1), ("streams", 1)]
    assert out[-3:] == [("join", 1), ("kafka", 3), ("summit", 1)]


def test_stateless_topology_is_one_subtopology() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in").filter(lambda k, v: bool(v)).map_values(str.upper).to("out")
    topology = b.build()
    assert len(topology.subtopologies()) == 1
    assert topology.describe() == """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-FILTER-0000000001
    Processor: KSTREAM-FILTER-0000000001 (stores: [])
      --> KSTREAM-MAPVALUES-0000000002
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-FILTER-0000000001
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KSTREAM-MAPVALUES-0000000002

"""


def test_stateless_fan_out_is_still_one_subtopology() -> None:
    b = StreamsBuilder(S, S)
    src = b.stream("in")
    src.to("a")
    src.map_values(str.upper).to("b")
    src.select_key(lambda k, v: v).to("c")  # a key change alone does not repartition
    assert len(b.build().subtopologies()) == 1


def test_unnamed_count_names_like_kafka_streams() -> None:
    """The generated store name takes its index before the aggregate processor's."""
    b = StreamsBuilder(S, S)
    b.stream("in").group_by(lambda k, v: v).count().to_stream().to("out", value_serde=L)
    assert b.build().describe() == """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-KEY-SELECT-0000000001
    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])
      --> KSTREAM-FILTER-0000000005
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-FILTER-0000000005 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KSTREAM-KEY-SELECT-0000000001
    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition)
      <-- KSTREAM-FILTER-0000000005

  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition])
      --> KSTREAM-AGGREGATE-0000000003
    Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])
      --> KTABLE-TOSTREAM-0000000007
      <-- KSTREAM-SOURCE-0000000006
    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])
      --> KSTREAM-SINK-0000000008
      <-- KSTREAM-AGGREGATE-0000000003
    Sink: KSTREAM-SINK-0000000008 (topic: out)
      <-- KTABLE-TOSTREAM-0000000007

"""


def test_table_names_like_kafka_streams() -> None:
    b = StreamsBuilder(S, S)
    b.table("input-topic").to_stream().to("out")
    assert b.build().describe() == """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [input-topic-STATE-STORE-0000000000])
      --> KTABLE-TOSTREAM-0000000003
      <-- KSTREAM-SOURCE-0000000001
    Processor: KTABLE-TOSTREAM-0000000003 (stores: [])
      --> KSTREAM-SINK-0000000004
      <-- KTABLE-SOURCE-0000000002
    Sink: KSTREAM-SINK-0000000004 (topic: out)
      <-- KTABLE-TOSTREAM-0000000003

"""


def test_repartition_names_sink_before_filter() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in").repartition().to("out")
    d = b.build().describe()
    assert "Sink: KSTREAM-SINK-0000000002 (topic: KSTREAM-REPARTITION-0000000001-repartition)" in d
    assert "Processor: KSTREAM-FILTER-0000000003 (stores: [])" in d
    assert "Source: KSTREAM-SOURCE-0000000004 (topics: [KSTREAM-REPARTITION-0000000001-repartition])" in d
    assert "   Sub-topology: 0\n" in d and "\n  Sub-topology: 1\n" in d


def test_split_burns_one_index_per_branch_and_lists_larger_subtrees_first() -> None:
    b = StreamsBuilder(S, S)
    branches = (b.stream("in").split()
                .branch(lambda k, v: v == "a")
                .default_branch())
    branches["KSTREAM-BRANCH-00000000011"].map_values(str.upper).to("upper")
    branches["KSTREAM-BRANCH-00000000010"].to("rest")
    assert b.build().describe() == """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [in])
      --> KSTREAM-BRANCH-0000000001
    Processor: KSTREAM-BRANCH-0000000001 (stores: [])
      --> KSTREAM-BRANCH-00000000011, KSTREAM-BRANCH-00000000010
      <-- KSTREAM-SOURCE-0000000000
    Processor: KSTREAM-BRANCH-00000000011 (stores: [])
      --> KSTREAM-MAPVALUES-0000000004
      <-- KSTREAM-BRANCH-0000000001
    Processor: KSTREAM-BRANCH-00000000010 (stores: [])
      --> KSTREAM-SINK-0000000006
      <-- KSTREAM-BRANCH-0000000001
    Processor: KSTREAM-MAPVALUES-0000000004 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KSTREAM-BRANCH-00000000011
    Sink: KSTREAM-SINK-0000000005 (topic: upper)
      <-- KSTREAM-MAPVALUES-0000000004
    Sink: KSTREAM-SINK-0000000006 (topic: rest)
      <-- KSTREAM-BRANCH-00000000010

"""


def test_merge_lists_both_parents() -> None:
    b = StreamsBuilder(S, S)
    b.stream("a").merge(b.stream("b")).to("out")
    d = b.build().describe()
    assert d == """\
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000000 (topics: [a])
      --> KSTREAM-MERGE-0000000002
    Source: KSTREAM-SOURCE-0000000001 (topics: [b])
      --> KSTREAM-MERGE-0000000002
    Processor: KSTREAM-MERGE-0000000002 (stores: [])
      --> KSTREAM-SINK-0000000003
      <-- KSTREAM-SOURCE-0000000000, KSTREAM-SOURCE-0000000001
    Sink: KSTREAM-SINK-0000000003 (topic: out)
      <-- KSTREAM-MERGE-0000000002

"""


def test_custom_names_are_used() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in").filter(lambda k, v: True, name="keep").to("out", name="write")
    d = b.build().describe()
    assert "Processor: keep (stores: [])" in d
    assert "Sink: write (topic: out)\n      <-- keep" in d


# -- Processor API --------------------------------------------------------------------------


class _CountingProcessor(BaseProcessor):
    """Counts records per key into ``store`` and forwards (key, count)."""

    def __init__(self, store: str) -> None:
        self.store_name = store

    def process(self, key: Any, value: Any) -> None:
        store = self.context.get_state_store(self.store_name)
        n = (store.get(key) or 0) + 1
        store.put(key, n, self.context.timestamp)
        self.forward(key, n)


class _Upper(BaseProcessor):
    def process(self, key: Any, value: Any) -> None:
        self.forward(key.upper(), value)


def _papi_topology() -> Topology:
    spec = StoreSpec("store", S, L, caching_enabled=False)
    t = Topology()
    t.add_source("Source", "input", key_serde=S, value_serde=S)
    t.add_processor("Process", lambda: _CountingProcessor("store"), "Source")
    t.add_state_store(spec, "Process")
    t.add_processor("Zeta", _Upper, "Process")
    t.add_sink("Alpha-sink", "out-a", "Process", key_serde=S, value_serde=L)
    t.add_sink("Zeta-sink", "out-z", "Zeta", key_serde=S, value_serde=L)
    # a second source whose processor shares the store: same sub-topology
    t.add_source("Source2", "input2", key_serde=S, value_serde=S)
    t.add_processor("Proc2", lambda: _CountingProcessor("store"), "Source2")
    t.connect_processor_and_state_stores("store", "Proc2")
    # an unconnected pipe: its own sub-topology
    t.add_source("Lone", "input3")
    t.add_sink("LoneSink", "out3", "Lone")
    return t


PAPI = """\
Topologies:
   Sub-topology: 0
    Source: Source (topics: [input])
      --> Process
    Processor: Process (stores: [store])
      --> Zeta, Alpha-sink
      <-- Source
    Source: Source2 (topics: [input2])
      --> Proc2
    Processor: Zeta (stores: [])
      --> Zeta-sink
      <-- Process
    Sink: Alpha-sink (topic: out-a)
      <-- Process
    Processor: Proc2 (stores: [store])
      --> none
      <-- Source2
    Sink: Zeta-sink (topic: out-z)
      <-- Zeta

  Sub-topology: 1
    Source: Lone (topics: [input3])
      --> LoneSink
    Sink: LoneSink (topic: out3)
      <-- Lone

"""


def test_processor_api_topology_describes_like_kafka_streams() -> None:
    t = _papi_topology()
    assert t.describe() == PAPI
    subs = t.subtopologies()
    assert [sorted(s.source_topics) for s in subs] == [["input", "input2"], ["input3"]]
    assert [s.stores for s in subs] == [["store"], []]


def test_processor_api_topology_runs() -> None:
    with TopologyTestDriver(_papi_topology()) as d:
        d.create_input_topic("input", S, S).pipe_key_value_list([("a", "x"), ("b", "x"), ("a", "x")])
        d.create_input_topic("input2", S, S).pipe_input("a", "y")
        assert d.create_output_topic("out-a", S, L).read_key_values_to_list() == [
            ("a", 1), ("b", 1), ("a", 2)]
        assert d.create_output_topic("out-z", S, L).read_key_values_to_list() == [
            ("A", 1), ("B", 1), ("A", 2)]
        assert dict(d.get_key_value_store("store").all()) == {"a": 3, "b": 1}
        d.pipe_raw("input3", b"k", b"v")
        m = d.read_output("out3")
        assert m is not None and (m.key(), m.value()) == (b"k", b"v")


# -- validation -----------------------------------------------------------------------------


def _base() -> Topology:
    t = Topology()
    t.add_source("src", "in")
    t.add_processor("proc", _Upper, "src")
    t.add_sink("sink", "out", "proc")
    return t


@pytest.mark.parametrize("add", [
    lambda t: t.add_source("src", "other"),
    lambda t: t.add_source("proc", "other"),
    lambda t: t.add_processor("proc", _Upper, "src"),
    lambda t: t.add_processor("sink", _Upper, "src"),
    lambda t: t.add_sink("sink", "out2", "proc"),
    lambda t: t.add_sink("src", "out2", "proc"),
], ids=["source", "source-as-processor-name", "processor", "processor-as-sink-name", "sink",
        "sink-as-source-name"])
def test_duplicate_node_name_is_rejected(add: Any) -> None:
    t = _base()
    with pytest.raises(TopologyException, match="already added"):
        add(t)


def test_duplicate_node_name_in_the_dsl_is_rejected() -> None:
    b = StreamsBuilder(S, S)
    s = b.stream("in").filter(lambda k, v: True, name="f")
    with pytest.raises(TopologyException):
        s.map_values(str.upper, name="f")


@pytest.mark.parametrize("add", [
    lambda t: t.add_processor("p2", _Upper, "missing"),
    lambda t: t.add_processor("p2", _Upper, "src", "missing"),
    lambda t: t.add_sink("s2", "out2", "missing"),
], ids=["processor", "processor-second-parent", "sink"])
def test_missing_parent_is_rejected_and_leaves_topology_unchanged(add: Any) -> None:
    t = _base()
    before = t.describe()
    with pytest.raises(TopologyException, match="missing"):
        add(t)
    assert t.describe() == before
    assert set(t.nodes) == {"src", "proc", "sink"}
    assert t.nodes["src"].children == ["proc"]
    # the name is still free
    t.add_processor("p2", _Upper, "src")


def test_node_cannot_be_its_own_parent() -> None:
    t = _base()
    with pytest.raises(TopologyException):
        t.add_processor("loop", _Upper, "loop")
    assert "loop" not in t.nodes


def test_sink_cannot_be_a_parent() -> None:
    t = _base()
    with pytest.raises(TopologyException, match="sink"):
        t.add_processor("after-sink", _Upper, "sink")
    assert "after-sink" not in t.nodes


def test_processor_and_sink_need_a_parent_source_a_topic() -> None:
    t = Topology()
    with pytest.raises(TopologyException):
        t.add_source("src")
    with pytest.raises(TopologyException):
        t.add_processor("p", _Upper)
    with pytest.raises(TopologyException):
        t.add_sink("s", "out")
    with pytest.raises(TopologyException):
        t.add_source("", "in")


@pytest.mark.parametrize("node", ["sink", "src", "missing"])
def test_store_cannot_connect_to_a_sink_or_source(node: str) -> None:
    t = _base()
    with pytest.raises(TopologyException, match="not a processor"):
        t.add_state_store(StoreSpec("st", S, S), node)
    assert "st" not in t.stores  # a rejected store is not half-added
    t.add_state_store(StoreSpec("st", S, S), "proc")
    with pytest.raises(TopologyException, match="not a processor"):
        t.connect_processor_and_state_stores("st", node)
    assert t.nodes["proc"].stores == ["st"]  # type: ignore[union-attr]


def test_store_must_exist_and_be_unique() -> None:
    t = _base()
    with pytest.raises(TopologyException, match="not added"):
        t.connect_processor_and_state_stores("nope", "proc")
    t.add_state_store(StoreSpec("st", S, S), "proc")
    with pytest.raises(TopologyException, match="already added"):
        t.add_state_store(StoreSpec("st", S, S))


def test_source_topic_read_twice_is_rejected() -> None:
    t = _base()
    with pytest.raises(TopologyException, match="already read"):
        t.add_source("src2", "in")
    with pytest.raises(TopologyException, match="already read"):
        t.add_source("src3", "other", "in")
    assert set(t.nodes) == {"src", "proc", "sink"}


def test_source_topic_read_twice_in_the_dsl_is_rejected() -> None:
    b = StreamsBuilder(S, S)
    b.stream("in")
    with pytest.raises(TopologyException):
        b.stream("in")
    with pytest.raises(TopologyException):
        b.table("in", Materialized.as_("t"))


def test_empty_topology_cannot_be_split() -> None:
    with pytest.raises(TopologyException):
        Topology().subtopologies()
