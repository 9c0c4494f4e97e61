"""The shared core: what the instances and their clients both speak.

Ids (:mod:`~router.core.task_id`), the partitioner, the cluster view (:mod:`~router.core.metadata`,
the instances-topic follower), instance state and replica roles, query options, position / page /
watch tokens, the wire shape of scans, refusal reasons and typed error details, serdes, channels
and transport security, the idle-fetch pause and librdkafka's log routing. It imports nothing from
``instance``, ``router.client`` or ``router.gateway`` (tests/unit/test_import_graph.py), as
Kafka's kafka-clients imports nothing from Kafka Streams.
"""
