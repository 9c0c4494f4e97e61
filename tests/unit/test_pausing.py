"""Why the main consumer's partitions are paused (runtime/pausing.py): a partition is resumed only
when no reason is left; a restore, a membership change and an idle pause each end on their own."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from instance.runtime.pausing import PauseReason, Pausing

IN = "input"


class FakeConsumer:
    """Records which partitions are paused, as librdkafka keeps them."""

    def __init__(self) -> None:
        self.assigned: list[tuple[str, int]] = []
        self.paused: set[tuple[str, int]] = set()

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.assigned]

    def pause(self, partitions: list[TopicPartition], /) -> None:
        self.paused.update((tp.topic, tp.partition) for tp in partitions)

    def resume(self, partitions: list[TopicPartition], /) -> None:
        self.paused.difference_update((tp.topic, tp.partition) for tp in partitions)


def _tps(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition(IN, p) for p in partitions]


def _setup(*partitions: int) -> tuple[FakeConsumer, Pausing]:
    consumer = FakeConsumer()
    consumer.assigned = [(IN, p) for p in partitions]
    return consumer, Pausing(lambda: consumer, lambda: list(consumer.assigned))


def test_restoring_partitions_are_paused_until_their_task_is_restored() -> None:
    consumer, pausing = _setup(0, 1, 2)
    consumer.paused = {(IN, 1)}  # left paused by an earlier reason: resumed, nothing holds it now
    pausing.assigned(_tps(0, 1, 2), _tps(2), incremental=False)
    assert consumer.paused == {(IN, 2)} and pausing.reasons((IN, 2)) == {PauseReason.RESTORING}
    assert [tp.partition for tp in pausing.fetchable()] == [0, 1]
    pausing.restored([(IN, 2)])
    assert consumer.paused == set() and pausing.reasons((IN, 2)) == frozenset()


def test_a_membership_pause_holds_everything_until_its_last_intent_has_happened() -> None:
    consumer, pausing = _setup(0, 1)
    pausing.assigned(_tps(0, 1), _tps(1), incremental=False)
    pausing.pause_for_membership(["leave:a"], now=5.0)
    assert consumer.paused == {(IN, 0), (IN, 1)} and pausing.for_membership
    assert pausing.intents == {"leave:a": 5.0} and pausing.since == 5.0 and pausing.fetchable() == []
    pausing.restored([(IN, 1)])  # restored meanwhile: still held for the membership change
    assert consumer.paused == {(IN, 0), (IN, 1)}
    pausing.pause_for_membership(["join:b"], now=6.0)
    pausing.keep_intents(lambda intent, _: intent == "join:b")  # one happened, one pending
    assert pausing.for_membership and pausing.intents == {"join:b": 6.0}
    pausing.end_membership_pause()
    assert consumer.paused == set() and not pausing.for_membership and pausing.intents == {}


def test_an_assignment_during_a_membership_pause_stays_paused_and_its_end_resumes_only_restored_tasks() -> None:
    consumer, pausing = _setup(0, 1, 2)
    pausing.pause_for_membership(["leave:a"], now=1.0)
    pausing.keep_intents(lambda *_: True)  # the rebalance came, the leaver is still leaving
    pausing.assigned(_tps(0, 1, 2), _tps(0), incremental=False)
    assert consumer.paused == {(IN, 0), (IN, 1), (IN, 2)}
    pausing.end_membership_pause()
    assert consumer.paused == {(IN, 0)}  # still restoring
    assert pausing.reasons((IN, 0)) == {PauseReason.RESTORING}


def test_intents_that_happened_end_the_pause_and_the_next_assignment_resumes() -> None:
    consumer, pausing = _setup(0, 1)
    pausing.pause_for_membership(["join:b"], now=1.0)
    pausing.keep_intents(lambda *_: False)
    assert not pausing.for_membership and consumer.paused == {(IN, 0), (IN, 1)}  # nothing resumed yet
    pausing.assigned(_tps(0, 1), [], incremental=False)
    assert consumer.paused == set()


def test_an_idle_pause_ends_without_resuming_what_another_reason_holds() -> None:
    consumer, pausing = _setup(0, 1)
    pausing.assigned(_tps(0, 1), _tps(1), incremental=False)
    pausing.pause_idle()
    assert consumer.paused == {(IN, 0), (IN, 1)}
    assert pausing.reasons((IN, 1)) == {PauseReason.IDLE, PauseReason.RESTORING}
    pausing.resume_idle()
    assert consumer.paused == {(IN, 1)}
    pausing.pause_for_membership(["leave:a"], now=1.0)
    pausing.pause_idle()
    pausing.resume_idle()
    assert consumer.paused == {(IN, 0), (IN, 1)}  # the membership pause holds


def test_increments_keep_earlier_reasons_and_a_revoked_partition_forgets_its_own() -> None:
    consumer, pausing = _setup(0, 1)
    pausing.assigned(_tps(0), _tps(0), incremental=True)
    consumer.assigned.append((IN, 2))
    pausing.assigned(_tps(2), [], incremental=True)  # another increment: partition 0 still restores
    assert consumer.paused == {(IN, 0)} and pausing.reasons((IN, 0)) == {PauseReason.RESTORING}
    pausing.revoked(_tps(0))
    assert pausing.reasons((IN, 0)) == frozenset()
    pausing.assigned(_tps(0), [], incremental=True)  # back, with nothing to restore: fetched
    assert consumer.paused == set()
    pausing.assigned(_tps(1), _tps(1), incremental=True)
    pausing.revoked()
    assert pausing.reasons((IN, 1)) == frozenset()


def test_resumes_only_the_partitions_the_thread_has_tasks_for() -> None:
    consumer = FakeConsumer()
    consumer.assigned = [(IN, 0), (IN, 1)]
    pausing = Pausing(lambda: consumer, lambda: [(IN, 0)])  # partition 1 has no task (yet)
    pausing.pause_idle()
    pausing.resume_idle()
    assert consumer.paused == {(IN, 1)}


def test_no_consumer_yet_changes_only_the_reasons() -> None:
    pausing = Pausing(lambda: None, lambda: [(IN, 0)])
    pausing.assigned(_tps(0), _tps(0), incremental=False)
    pausing.pause_idle()
    pausing.resume_idle()
    pausing.restored([(IN, 0)])
    assert pausing.reasons((IN, 0)) == frozenset()
