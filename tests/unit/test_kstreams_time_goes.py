"""loadtest.kstreams_time_goes without a JVM: the stage of hand-written Kafka Streams stacks (innermost
frame first, as JFR lists them), the thread groups, the streaming read of ``jfr print --json`` and the
steady-state window."""

from __future__ import annotations

import json

import pytest

from loadtest.kstreams_time_goes import (
    breakdown,
    events_of,
    is_stream_thread,
    parse_time,
    stage_of,
    steady_window,
    thread_group,
)

KS = "org.apache.kafka.streams.processor.internals."
ST = "org.apache.kafka.streams.state.internals."
LOOP = [f"{KS}StreamThread.runOnceWithoutProcessingThreads", f"{KS}StreamThread.runLoop", f"{KS}StreamThread.run"]
PROCESS = [f"{KS}ProcessorNode.process", f"{KS}StreamTask.doProcess", f"{KS}StreamTask.process",
           f"{KS}TaskExecutor.processTask", *LOOP]


def test_rocksdb_put_under_the_changelogging_store_and_an_aggregate_is_store() -> None:
    stack = ["org.rocksdb.RocksDB.put", f"{ST}RocksDBStore.put", f"{ST}ChangeLoggingKeyValueBytesStore.put",
             f"{ST}MeteredKeyValueStore.put",
             "org.apache.kafka.streams.kstream.internals.KStreamAggregate$KStreamAggregateProcessor.process", *PROCESS]
    assert stage_of(stack) == "store"
    # the aggregate's own code, above the store
    assert stage_of(stack[4:]) == "process"
    # the changelog's record: the send is produce, the changelogging store's own code changelog
    send = ["org.apache.kafka.common.record.MemoryRecordsBuilder.appendDefaultRecord",
            "org.apache.kafka.clients.producer.internals.RecordAccumulator.append",
            "org.apache.kafka.clients.producer.KafkaProducer.doSend", f"{KS}RecordCollectorImpl.send",
            f"{KS}ProcessorContextImpl.logChange", *stack[2:]]
    assert stage_of(send) == "produce"
    assert stage_of(send[4:]) == "changelog"
    assert stage_of(["java.util.HashMap.get", *stack[3:]]) == "store"  # MeteredKeyValueStore
    cache = [f"{ST}NamedCache.put", f"{ST}ThreadCache.put", f"{ST}CachingKeyValueStore.putInternal", *stack[3:]]
    assert stage_of(cache) == "cache"


def test_jackson_is_filed_by_its_caller_and_serializers_are_told_from_deserializers() -> None:
    jackson = ["com.fasterxml.jackson.core.json.UTF8StreamJsonParser.nextFieldName",
               "com.fasterxml.jackson.databind.ObjectMapper.readTree"]
    source = [f"{KS}SourceNode.deserializeValue", f"{KS}RecordDeserializer.deserialize", f"{KS}RecordQueue.updateHead"]
    assert stage_of([*jackson, "iqmesh.bench.KStreamsBench$JsonSerde.lambda$deserializer$1", *source,
                     f"{KS}RecordQueue.addRawRecords", f"{KS}StreamTask.addRecords", *LOOP]) == "deserialize"
    # the record queue's head update outside deserialization: the caller decides
    assert stage_of([f"{KS}RecordQueue.updateHead", f"{KS}RecordQueue.addRawRecords", *LOOP]) == "consume"
    assert stage_of([f"{KS}RecordQueue.updateHead", f"{KS}RecordQueue.poll", f"{KS}PartitionGroup.nextRecord",
                     *PROCESS]) == "process"
    # Jackson building nodes in the workload's own lambda is processing
    assert stage_of(["com.fasterxml.jackson.databind.node.ObjectNode.put",
                     "iqmesh.bench.KStreamsBench.lambda$stateless$3", *PROCESS]) == "process"
    ser = ["com.fasterxml.jackson.core.json.UTF8JsonGenerator.writeString",
           "iqmesh.bench.KStreamsBench$JsonSerde.lambda$serializer$0", f"{KS}RecordCollectorImpl.send",
           f"{KS}SinkNode.process", *PROCESS]
    assert stage_of(ser) == "serialize"
    assert stage_of(ser[2:]) == "produce"
    assert stage_of([f"{ST}ValueAndTimestampSerializer.serialize", f"{ST}MeteredKeyValueStore.put"]) == "serialize"
    assert stage_of(["org.apache.kafka.common.serialization.BytesDeserializer.deserialize",
                     f"{KS}SourceNode.deserializeKey"]) == "deserialize"


def test_the_network_client_is_filed_by_who_polls_it() -> None:
    net = ["sun.nio.ch.EPoll.wait", "org.apache.kafka.common.network.Selector.poll",
           "org.apache.kafka.clients.NetworkClient.poll",
           "org.apache.kafka.clients.consumer.internals.ConsumerNetworkClient.poll"]
    commit = [*net, "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator.commitOffsetsSync",
              "org.apache.kafka.clients.consumer.internals.ClassicKafkaConsumer.commitSync",
              "org.apache.kafka.clients.consumer.KafkaConsumer.commitSync",
              f"{KS}TaskExecutor.commitOffsetsOrTransaction", f"{KS}TaskManager.commit", *LOOP]
    poll = [*net, "org.apache.kafka.clients.consumer.internals.ClassicKafkaConsumer.pollForFetches",
            "org.apache.kafka.clients.consumer.internals.ClassicKafkaConsumer.poll",
            "org.apache.kafka.clients.consumer.KafkaConsumer.poll", f"{KS}StreamThread.pollRequests", *LOOP]
    assert stage_of(commit) == "commit"
    assert stage_of(poll) == "consume"
    eos = ["org.apache.kafka.clients.producer.KafkaProducer.sendOffsetsToTransaction",
           f"{KS}StreamsProducer.commitTransaction", f"{KS}TaskExecutor.commitOffsetsOrTransaction"]
    assert stage_of(eos) == "commit"


def test_unmatched_stacks_are_other() -> None:
    assert stage_of(["java.util.HashMap.getNode", *LOOP]) == "other"
    assert stage_of([]) == "other"


def test_threads() -> None:
    assert is_stream_thread("ks-bench-1a2b3c4d-StreamThread-1")
    producer = "kafka-producer-network-thread | ks-bench-1a2b3c4d-StreamThread-1-producer"
    assert not is_stream_thread(producer)
    assert thread_group(producer) == "producer network thread"
    assert thread_group("kafka-coordinator-heartbeat-thread | ks-bench-mode-1a2b3c4d") == "consumer heartbeat thread"
    assert thread_group("ks-bench-1a2b3c4d-CleanupThread") == "state cleaner"
    assert thread_group("C2 CompilerThread0") == "JIT compiler threads"
    assert thread_group("pool-3-thread-12") == "pool-N-thread-N"


def _frame(cls: str, method: str) -> dict[str, object]:
    return {"method": {"type": {"name": cls.replace(".", "/")}, "name": method}, "lineNumber": 1}


def _sample(at: str, thread: str, frames: list[tuple[str, str]]) -> dict[str, object]:
    return {"type": "jdk.ExecutionSample",
            "values": {"startTime": at, "sampledThread": {"javaName": thread},
                       "stackTrace": {"truncated": False, "frames": [_frame(c, m) for c, m in frames]}}}


def _load(at: str, thread: str | None, load: float) -> dict[str, object]:
    if thread is None:
        return {"type": "jdk.CPULoad", "values": {"startTime": at, "jvmUser": load, "jvmSystem": 0.0,
                                                  "machineTotal": 1.0}}
    return {"type": "jdk.ThreadCPULoad",
            "values": {"startTime": at, "eventThread": {"javaName": thread}, "user": load * 0.75,
                       "system": load * 0.25}}


def test_reads_jfr_json_in_pieces_and_counts_inside_the_window() -> None:
    events = [_sample("2026-01-02T03:04:05.100000000Z", "ks-bench-1a2b3c4d-StreamThread-1",
                      [("org.rocksdb.RocksDB", "get"), (f"{ST}RocksDBStore", "get")]),
              _sample("2026-01-02T03:04:05.900000000Z", "ks-bench-1a2b3c4d-StreamThread-1",
                      [("java.util.HashMap", "getNode"), (f"{KS}StreamThread", "runLoop")]),
              _sample("2026-01-02T03:04:05.500000000Z", "kafka-producer-network-thread | x-producer",
                      [("org.apache.kafka.clients.producer.internals.Sender", "run")]),
              _sample("2026-01-02T03:04:07.000000000Z", "ks-bench-1a2b3c4d-StreamThread-1",
                      [(f"{KS}StreamTask", "process")]),
              {**_sample("2026-01-02T03:04:05.300000000Z", "ks-bench-1a2b3c4d-StreamThread-1",
                         [("org.rocksdb.RocksDB", "put"), (f"{ST}RocksDBStore", "put")]),
               "type": "jdk.NativeMethodSample"},
              # CPU loads: rounds at 05.5 (covering the second before) and 06.5, half of each in the window
              _load("2026-01-02T03:04:06.500000000Z", None, 0.4),
              _load("2026-01-02T03:04:06.500000000Z", "ks-bench-1a2b3c4d-StreamThread-1", 0.2),
              _load("2026-01-02T03:04:05.500000000Z", None, 0.5),
              _load("2026-01-02T03:04:05.500000000Z", "ks-bench-1a2b3c4d-StreamThread-1", 0.3),
              _load("2026-01-02T03:04:05.500000000Z", "kafka-producer-network-thread | x-producer", 0.05)]
    doc = json.dumps({"recording": {"events": events}}, indent=2).replace("/", "\\/")  # as jfr escapes it
    chunks = iter([doc[i:i + 7] for i in range(0, len(doc), 7)])
    t0 = parse_time("2026-01-02T03:04:05Z")
    assert parse_time("2026-01-02T03:04:05.100000000Z") - t0 == pytest.approx(0.1, abs=1e-6)
    b = breakdown(events_of(chunks), (t0, t0 + 1))
    assert b.stream == {"store": 1, "other": 1}
    assert b.others == {"producer network thread": 1}
    assert b.outside == 1
    assert b.other_frames == {"java.util.HashMap.getNode": 1}
    assert b.native == {"store": 1}  # apart from the execution samples
    assert b.process_cpu == pytest.approx(0.5 * 0.5 + 0.4 * 0.5)
    assert b.thread_cpu == pytest.approx({"stream thread": 0.3 * 0.5 + 0.2 * 0.5,
                                          "producer network thread": 0.05 * 0.5})


def test_steady_window_ends_at_the_last_record_before_the_close() -> None:
    # 1000 records in 10 s, 12.5 s with the close: the last record 2.5 s before RESULT; the second
    # half (500 records) at 100 records/s took 5 s
    result = {"n": 1000, "first_to_last_s": 10.0, "rate_incl_final_commit": 80, "steady_rate": 100}
    start, end = steady_window(result, 1000.0)
    assert (start, end) == (992.5, 997.5)
