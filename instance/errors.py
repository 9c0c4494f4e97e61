"""Error types of the runtime, named after Kafka Streams' exceptions.

They are mapped once to gRPC status codes (``instance.server``) and HTTP statuses (gateway).
"""

from __future__ import annotations


class StreamsException(Exception):
    """Base of every error the runtime raises on purpose."""


class TopologyException(StreamsException):
    """The topology is invalid (bad wiring, duplicate names, co-partitioning violated)."""


class ConfigException(StreamsException):
    """A configuration value is missing or invalid; the message says what to fix."""


class SerializationException(StreamsException):
    """A key or value could not be (de)serialized; carries where the record came from."""

    def __init__(self, message: str, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None) -> None:
        where = f" (topic={topic} partition={partition} offset={offset})" if topic is not None else ""
        super().__init__(message + where)
        self.topic = topic
        self.partition = partition
        self.offset = offset


class IllegalStateException(StreamsException):
    """An operation is not allowed in the client's current state."""


class InvalidStateStoreException(StreamsException):
    """A store cannot be queried right now (migrated, closed, or still being restored)."""


class UnknownStateStoreException(InvalidStateStoreException):
    """No store of that name exists in the topology."""


class StreamsNotStartedException(InvalidStateStoreException):
    """The client has not been started yet."""


class TaskMigratedException(StreamsException):
    """The group moved on while the tasks were being worked on: a commit refused for a rebalance,
    the producer fenced or lost, a transaction aborted. The stream thread handles it in one place.
    ``start_over``: what the tasks did since the last commit is gone with the producer (or the
    transaction), so every task is closed dirty and the thread rejoins; otherwise only the offsets
    were refused (at-least-once) and the rebalance under way moves the tasks."""

    def __init__(self, message: str, *, start_over: bool) -> None:
        super().__init__(message)
        self.start_over = start_over


class ProductionException(StreamsException):
    """A record could not be written (refused by the producer, or its sink could not serialize it)
    and the production exception handler said FAIL."""


class ProcessingException(StreamsException):
    """A processor or punctuator raised and the processing exception handler said FAIL."""


class BrokerUnreachableException(StreamsException):
    """No Kafka broker answered at ``bootstrap.servers``."""


class StoreNotLoggedException(StreamsException):
    """The store has no changelog, so its changes cannot be watched."""


class TooManyWatchesException(StreamsException):
    """This instance serves as many watches as it may; another instance can take the watch."""
