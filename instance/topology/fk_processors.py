"""The processors of a foreign-key table-table join (KIP-213), after Kafka Streams'
``kstream/internals/foreignkeyjoin``.

Left side (the table with the foreign key): :class:`SubscriptionSendProcessor` turns each change
of a row into (un)subscriptions keyed by foreign key, written to the subscription topic, which is
co-partitioned with the right table. Right side: :class:`SubscriptionReceiveProcessor` keeps the
subscriptions in a store keyed by (foreign key, primary key), and :class:`SubscriptionJoinProcessor`
answers each with the right table's current value; :class:`ForeignTableJoinProcessor` answers every
subscriber of a foreign key when its right row changes (a prefix scan). Answers go back through
the response topic, co-partitioned with the left table, to :class:`ResponseJoinProcessor`, which
joins them with the left row as it is *now*, dropping an answer to an older version of the row
(its value hash differs): rows that change their foreign key quickly never see a stale result.

Everything crosses topics, so each side's state is in its own task and survives rebalances.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from instance.topology import fk_wire as W
from instance.topology.processor import BaseProcessor, ProcessorContext
from instance.topology.table_processors import GetterFactory
from kernel.serdes import Serde

#: ``extract(key, value) -> foreign key`` (a one-argument extractor is wrapped)
Extractor = Callable[[Any, Any], Any]
_UNSET: Any = object()


class SubscriptionSendProcessor(BaseProcessor):
    """A left row's change -> subscription messages keyed by foreign key (Kafka Streams'
    ``SubscriptionSendProcessorSupplier``). The instructions, as Kafka Streams sends them:

    - inner join: a new row subscribes (answer only if the foreign row exists); a changed
      foreign key unsubscribes the old one (no answer) and subscribes the new one (answer, null
      if none: the old result must go); a deleted row, or one whose foreign key became null,
      unsubscribes with a null answer;
    - left join: every change subscribes to its new foreign key (null for a deleted row or a null
      foreign key) with an answer whatever the right side holds, after unsubscribing a changed
      foreign key."""

    def __init__(self, extract: Extractor, left_join: bool, fk_serde: Serde, value_serde: Serde) -> None:
        self.extract = extract
        self.left_join = left_join
        self.fk_ser = fk_serde.serialize
        self.value_ser = value_serde.serialize
        self.dropped_records = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self._record = context.record

    def _same(self, a: Any, b: Any) -> bool:
        ser = self.fk_ser
        return (None if a is None else ser(a)) == (None if b is None else ser(b))

    def process(self, key: Any, change: Any) -> None:
        new, old = change.new_value, change.old_value
        self._hash = _UNSET
        extract = self.extract
        old_fk = None if old is None else extract(key, old)
        if self.left_join:
            if old is None and new is None:
                return  # an idempotent delete of a row the table never had
            new_fk = None if new is None else extract(key, new)
            if old_fk is not None and not self._same(new_fk, old_fk):
                self._send(key, old_fk, W.DELETE_KEY_NO_PROPAGATE, new)
            # also for a delete or a null foreign key: the answer (no right value) is the result
            self._send(key, new_fk, W.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, new)
            return
        if new is None:
            if old_fk is not None:
                self._send(key, old_fk, W.DELETE_KEY_AND_PROPAGATE, new)
            return
        new_fk = extract(key, new)
        if new_fk is None:
            self.dropped_records += 1  # an inner join has nothing to join a null foreign key with
            if old_fk is not None:
                self._send(key, old_fk, W.DELETE_KEY_AND_PROPAGATE, new)
            return
        if old_fk is None:
            self._send(key, new_fk, W.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, new)
        elif self._same(new_fk, old_fk):
            # the old row joined the same right row or nothing: no null answer needed
            self._send(key, new_fk, W.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE, new)
        else:
            self._send(key, old_fk, W.DELETE_KEY_NO_PROPAGATE, new)
            self._send(key, new_fk, W.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE, new)

    def _send(self, key: Any, foreign_key: Any, instruction: int, new: Any) -> None:
        h = self._hash
        if h is _UNSET:
            h = self._hash = W.value_hash(None if new is None else self.value_ser(new))
        self.forward(foreign_key, W.Subscription(h, instruction, key, self._record.partition))


class SubscriptionReceiveProcessor(BaseProcessor):
    """Right side: keep (or drop, for an unsubscription) the subscription in the store under
    (foreign key, primary key), stamped with the record's time; forward it keyed so. A null
    foreign key (a left join's row without one) is not stored but still answered; anything else
    with a null foreign key is dropped."""

    def __init__(self, store_name: str) -> None:
        self.store_name = store_name
        self.dropped_records = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)
        self._record = context.record

    def process(self, foreign_key: Any, sub: Any) -> None:
        if sub is None:
            self.dropped_records += 1
            return
        key = W.CombinedKey(foreign_key, sub.primary_key)
        if foreign_key is None:
            if sub.instruction != W.PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
                self.dropped_records += 1
                return
        elif W.is_delete(sub.instruction):
            self.store.delete(key)
        else:
            self.store.put(key, sub, self._record.timestamp)
        self.forward(key, sub)


class SubscriptionJoinProcessor(BaseProcessor):
    """Right side: answer a subscription with the right row of its foreign key (Kafka Streams'
    ``SubscriptionJoinProcessorSupplier``), keyed by primary key, stamped with the later of the
    subscription's and the right row's time."""

    def __init__(self, right: GetterFactory) -> None:
        self.right = right

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.get_right = self.right(context)
        self._record = context.record

    def process(self, key: Any, sub: Any) -> None:
        vt = None if key.foreign_key is None else self.get_right(key.foreign_key)
        ts = self._record.timestamp
        if vt is not None and vt[1] > ts:
            ts = vt[1]
        instruction = sub.instruction
        if instruction == W.DELETE_KEY_NO_PROPAGATE:
            return
        if instruction == W.DELETE_KEY_AND_PROPAGATE:
            value = None
        elif instruction == W.PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE and vt is None:
            return
        else:
            value = None if vt is None else vt[0]
        self.context.forward(key.primary_key, W.Response(sub.hash, value, sub.primary_partition), ts)


class ForeignTableJoinProcessor(BaseProcessor):
    """Right side: a right row's change answers every subscriber of its key (a prefix scan of
    the subscription store), with the new value (None: deleted), at the change's time (Kafka
    Streams' ``ForeignTableJoinProcessorSupplier``)."""

    def __init__(self, store_name: str, keys: W.CombinedKeySerde, subscriptions: W.SubscriptionSerde) -> None:
        self.store_name = store_name
        self.keys = keys
        self.subscriptions = subscriptions
        self.dropped_records = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.store = context.get_state_store(self.store_name)

    def subscribers(self, foreign_key: Any) -> list[tuple[Any, Any]]:
        """``(primary key, subscription)`` of every subscriber of ``foreign_key``, by a range of
        the bytes store over the key prefix, as Kafka Streams scans its bytes store: the typed
        layer's range would serialize every cached key per scan. Pending subscriptions are written
        below first (the store forwards nothing, so this only moves a batch write earlier)."""
        store = self.store
        store.flush_cache()
        prefix = self.keys.prefix(foreign_key)
        n = len(prefix)
        pk_of, sub_of = self.keys.pk.deserialize, self.subscriptions.deserialize
        # a timestamped store's bytes are Kafka Streams' ValueAndTimestamp: 8-byte time, value
        return [(pk_of(kb[n:]), sub_of(vb[8:])) for kb, vb in store.inner.items(prefix, _after_prefix(prefix))]

    def process(self, foreign_key: Any, change: Any) -> None:
        if foreign_key is None:
            self.dropped_records += 1
            return
        new = change.new_value
        fwd = self.forward
        for pk, sub in self.subscribers(foreign_key):
            fwd(pk, W.Response(sub.hash, new, sub.primary_partition))


def _after_prefix(prefix: bytes) -> bytes | None:
    """The smallest key after every key starting with ``prefix`` (None: no such key)."""
    b = bytearray(prefix)
    while b and b[-1] == 0xFF:
        b.pop()
    if not b:
        return None
    b[-1] += 1
    return bytes(b)


class ResponseJoinProcessor(BaseProcessor):
    """Left side: join an answer with the left row as it is now, if the answer is for this
    version of the row (same value hash); else drop it (Kafka Streams'
    ``ResponseJoinProcessorSupplier``). No right value: a delete for an inner join (or when the
    left row is gone), ``joiner(left, None)`` for a left join."""

    def __init__(self, left: GetterFactory, value_serde: Serde, joiner: Callable[[Any, Any], Any],
                 left_join: bool) -> None:
        self.left = left
        self.value_ser = value_serde.serialize
        self.joiner = joiner
        self.left_join = left_join
        self.stale_responses = 0

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.get_left = self.left(context)

    def process(self, key: Any, response: Any) -> None:
        vt = self.get_left(key)
        current = None if vt is None else vt[0]
        h = W.value_hash(None if current is None else self.value_ser(current))
        if h != response.hash:
            self.stale_responses += 1
            return
        right = response.foreign_value
        if right is None and (current is None or not self.left_join):
            result = None
        else:
            result = self.joiner(current, right)
        self.forward(key, result)
