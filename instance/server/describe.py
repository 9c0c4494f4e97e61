"""The Describe RPC: the topology this instance runs, with the topic names resolved as the runtime
resolved them, and the processing lag of every input partition.

The lag is what ``kafka-consumer-groups --describe`` shows: the group's committed offset against
the partition's end offset, read with a consumer of its own that never joins the group. It moves
with the commits (commit.interval.ms), and under exactly-once a partition written in
transactions (a repartition topic) keeps a lag of one for the commit marker after the last record.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaException, TopicPartition

from instance.runtime.internal_topics import internal_name
from kernel.rpc import iqmesh_pb2 as pb

if TYPE_CHECKING:
    from instance.runtime.kafka_streams import KafkaStreams

#: seconds a Describe waits for the committed and end offsets before answering without the lag
LAG_TIMEOUT_S = 3.0


def topology_reply(streams: KafkaStreams) -> pb.DescribeReply:
    """The topology part of the reply (no broker call)."""
    config, topology = streams.config, streams.topology
    resolve = internal_name(config.application_id, topology)
    layout = streams.layout
    internal = {resolve(t) for t in topology.internal_topics}
    out = pb.DescribeReply(asked=streams.instance_id, application_id=config.application_id,
                           description=topology.describe())
    for st in topology.subtopologies():
        sources = [resolve(t) for t in st.source_topics]
        sinks = [resolve(t) for t in st.sink_topics]
        changelogs = [layout.changelogs[s] for s in st.stores if layout is not None and s in layout.changelogs]
        out.subtopologies.append(pb.SubtopologyInfo(
            id=st.id, tasks=layout.tasks_per_subtopology.get(st.id, 0) if layout is not None else 0,
            source_topics=sources, sink_topics=sinks,
            repartition_topics=[t for t in dict.fromkeys(sources + sinks) if t in internal],
            stores=list(st.stores), changelog_topics=changelogs))
    for name, g in sorted(topology.global_stores.items()):
        out.global_stores.append(pb.GlobalStoreInfo(store=name, topic=g.topic))
    return out


class InputLagReader:
    """Reads committed and end offsets of the input partitions; one consumer, made on first use,
    shared by the server's threads (one read at a time)."""

    def __init__(self, streams: KafkaStreams) -> None:
        self._streams = streams
        self._consumer: Consumer | None = None
        self._lock = threading.Lock()

    def _client(self) -> Consumer:
        if self._consumer is None:
            config = self._streams.config
            settings = config.client_config("main.consumer", **{
                "group.id": config.application_id,  # whose commits are read; never joined
                "client.id": f"{config.instance_id}-input-lag",
                "enable.auto.commit": False,
                # read_committed would make the offset fetch wait for every open transaction
                "isolation.level": "read_uncommitted",
            })
            settings.pop("group.instance.id", None)
            self._consumer = Consumer(settings)
        return self._consumer

    def read(self, reply: pb.DescribeReply) -> None:
        """Fill ``reply.input_lag`` (or say in ``input_lag_error`` why not)."""
        tasks = [(f"{st.id}_{p}", t, p) for st in reply.subtopologies for t in st.source_topics
                 for p in range(st.tasks)]
        if not tasks:
            return
        try:
            with self._lock:
                consumer = self._client()
                committed = consumer.committed([TopicPartition(t, p) for _, t, p in tasks], timeout=LAG_TIMEOUT_S)
                ends = [consumer.get_watermark_offsets(TopicPartition(t, p), timeout=LAG_TIMEOUT_S)
                        for _, t, p in tasks]
        except KafkaException as e:
            reply.input_lag_error = f"offsets could not be read: {e.args[0].str() if e.args else e}"
            return
        for (task, topic, p), c, (low, high) in zip(tasks, committed, ends, strict=True):
            at = c.offset if c.offset >= 0 else -1
            lag = max(0, high - (at if at >= 0 else low))
            reply.input_lag.append(pb.InputLag(task=task, topic=topic, partition=p, committed=at, end_offset=high,
                                               lag=lag))

    def close(self) -> None:
        with self._lock:
            if self._consumer is not None:
                self._consumer.close()
                self._consumer = None
