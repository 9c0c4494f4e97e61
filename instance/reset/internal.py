"""Which topics are an application's own, to be deleted by a reset.

Kafka's resetter infers them from their names: ``<application.id>-`` followed by a name ending as
Kafka Streams names its internal topics (``-changelog``, ``-repartition``, the foreign-key join's
``-subscription-registration-topic`` and ``-subscription-response-topic``, named or numbered).
iqmesh names its internal topics the same way (instance/state/spec.py, instance/topology/graph.py,
ktable.py, fk_join.py) and adds one per application: the instances topic
(kernel/instances_follower.py), where every instance publishes its InstanceInfo; an instance
creates it again at start. A topic given as an input or intermediate topic is never one of them
(Kafka's KAFKA-7930).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable

from instance.errors import ConfigException
from kernel.instances_follower import instances_topic

_KAFKA_STREAMS_SUFFIX = re.compile(
    r".+(-changelog|-repartition|-subscription-registration-topic|-subscription-response-topic"
    r"|-KTABLE-FK-JOIN-SUBSCRIPTION-(REGISTRATION|RESPONSE)-\d+-topic)")


def is_internal_name(application_id: str, topic: str) -> bool:
    """Whether ``topic`` is named as one of ``application_id``'s internal topics."""
    if topic == instances_topic(application_id):
        return True
    prefix = f"{application_id}-"
    return topic.startswith(prefix) and _KAFKA_STREAMS_SUFFIX.fullmatch(topic) is not None


def inferred_internal_topics(application_id: str, topics: Iterable[str], user_topics: Collection[str]) -> list[str]:
    """The application's internal topics among ``topics`` (sorted), except ``user_topics`` (the
    input and intermediate topics given)."""
    return sorted(t for t in topics if t not in user_topics and is_internal_name(application_id, t))


def chosen_internal_topics(inferred: list[str], asked: list[str]) -> list[str]:
    """``--internal-topics``: a subset of the inferred ones (all of them when none is given)."""
    if not asked:
        return inferred
    strangers = [t for t in asked if t not in inferred]
    if strangers:
        raise ConfigException(
            f"--internal-topics names {strangers[0][:64]!r}, which is not an internal topic of the application "
            f"(or does not exist): give a subset of the ones a --dry-run without --internal-topics lists")
    return sorted(set(asked))
