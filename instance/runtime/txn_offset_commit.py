"""Offsets the dev broker refused at a revocation, committed through a transaction instead.

Apache Kafka accepts an offset commit from the current generation while a rebalance is being
prepared, so the commit on revocation goes through and the tasks close clean. The dev broker
(noida-db) refuses it (ILLEGAL_GENERATION) once the rebalance has started, which left every task
of every member closed dirty at each join or leave. It accepts the same offsets in a transaction
(TxnOffsetCommit; ``tests/conformance/test_group_membership.py`` pins both answers). So, with the
membership assist on (runtime/membership.py), a stream thread whose commit is refused while its
partitions are being revoked commits them once more through a transactional producer of its own,
made on first use, holding no records. Only at a revocation: the member is still the partitions'
owner then (a member that lost them is told through ``on_lost``, never here).
"""

from __future__ import annotations

import logging
import secrets
from typing import Any

from confluent_kafka import KafkaException, Producer, TopicPartition

from instance.config import StreamsConfig

log = logging.getLogger(__name__)


class TransactionalOffsetCommit:
    def __init__(self, config: StreamsConfig, client_id: str) -> None:
        self._config = config
        self._client_id = client_id
        self._producer: Producer | None = None

    def commit(self, offsets: list[TopicPartition], group_metadata: Any, timeout_s: float) -> None:
        """Commit ``offsets`` for the group ``group_metadata`` names; raises KafkaException if refused."""
        producer = self._producer
        if producer is None:
            # a new id for every producer: the dev broker never times out a transaction that a
            # killed process left open, and initialising an id it knows would wait for that one
            tid = f"{self._config.application_id}-{self._client_id}-offsets-{secrets.token_hex(4)}"
            producer = Producer(self._config.client_config("producer", **{
                "client.id": f"{self._client_id}-offsets", "transactional.id": tid}))
            producer.init_transactions(timeout_s)
            self._producer = producer
        producer.begin_transaction()
        try:
            producer.send_offsets_to_transaction(offsets, group_metadata, timeout_s)
            producer.commit_transaction(timeout_s)
        except KafkaException:
            self.close()  # a producer whose transaction failed is not used again
            raise

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            try:
                producer.abort_transaction(1)
            except KafkaException:
                pass  # nothing open, or the broker is away: it holds no records either way
            producer.flush(0)
