"""Where a query key of one store lives: the store's spec and the tasks that hold it.

Neither the topology nor the task layout changes once an instance has started, so
``KafkaStreams.store_placement`` looks a store up once and keeps the answer; a request then only
parses, serializes and hashes its key (once, here). A global store has no tasks: every instance
holds it whole and answers it as partition 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from instance.errors import BadRequest
from instance.state.spec import StoreSpec
from router.core.echo import clip, echo
from router.core.partitioner import default_partition
from router.core.task_id import TaskId

#: ``StorePlacement.subtopology`` of a global store
NO_SUBTOPOLOGY = -1


def parse_query_key(spec: StoreSpec, text: str = "", raw: bytes = b"") -> tuple[Any, bytes]:
    """A query's key of a store with ``spec`` and its serialized bytes: from ``raw`` bytes
    (checked against the key serde), else parsed from ``text``. BadRequest for what is not a key
    of that serde."""
    serde = spec.key_serde
    if raw:
        try:
            return serde.deserialize(raw), raw
        except Exception as e:
            raise BadRequest(f"raw key {echo(raw)} is not a {serde.name} key: {e}") from None
    try:
        key = serde.parse(text)
    except Exception as e:
        raise BadRequest(f"key {echo(text)} is not a valid {serde.name} key: {clip(str(e), 200)}") from e
    kb = serde.serialize(key)
    if kb is None:
        raise BadRequest("key must not be None")
    return key, kb


@dataclass(frozen=True, slots=True)
class StorePlacement:
    """A store's spec and tasks: ``partitions`` tasks of sub-topology ``subtopology`` (a global
    store: none, :data:`NO_SUBTOPOLOGY` and 0)."""

    store: str
    spec: StoreSpec
    subtopology: int = NO_SUBTOPOLOGY
    partitions: int = 0

    @property
    def is_global(self) -> bool:
        return self.partitions == 0

    def key_of(self, text: str = "", raw: bytes = b"") -> tuple[Any, bytes]:
        """The request's key and its bytes (:func:`parse_query_key`)."""
        return parse_query_key(self.spec, text, raw)

    def task_of(self, key_bytes: bytes) -> TaskId:
        """The task holding the key serialized as ``key_bytes`` (Kafka's default partitioner, as
        the producers that wrote the store's input)."""
        return TaskId(self.subtopology, default_partition(key_bytes, self.partitions))
