"""The shared kernel: what the instances and their clients both speak.

Ids (:mod:`~kernel.task_id`), the partitioner, the cluster view (:mod:`~kernel.metadata`,
the instances-topic follower), instance state and replica roles, query options, position / page /
watch tokens, the wire shape of scans, refusal reasons and typed error details, serdes, channels
and transport security, the Kafka client settings, the idle-fetch pause, librdkafka's log routing,
and the wire contract itself (:mod:`kernel.rpc`, generated from proto/iqmesh.proto). It imports
nothing from ``instance``, ``router``, ``analytics`` or the command line
(tests/unit/test_import_graph.py), as Kafka's kafka-clients imports nothing from Kafka Streams.
"""
