"""A reset: first a plan, read from the broker and the state directories without changing anything
(a dry run prints it and stops), then its application in Kafka's order.

1. The group must have no members: refused unless ``--force``, which removes them.
2. The input topics' committed offsets move as the position rule says (positions.py); the
   intermediate topics' to their end.
3. The group's committed offsets on the internal topics go to 0 (Kafka's resetter documents
   "consumer offsets for input and internal topics to zero"). Apache Kafka drops a deleted topic's
   offsets from its groups anyway; the dev broker keeps them, and an instance would read the
   recreated repartition topic from the old offset, skipping records.
4. The internal topics are deleted (internal.py), waited for until gone.
5. The local state directories given are removed (state_dirs.py).

Everything that can refuse (members, a missing topic, a locked state directory, a bad
``--internal-topics``) refuses in the plan, before any change; a step that fails later names the
steps done before it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from instance.reset import group as group_members
from instance.reset import offsets
from instance.reset.errors import ResetError
from instance.reset.internal import chosen_internal_topics, inferred_internal_topics
from instance.reset.positions import ResetPosition, TopicPart
from instance.reset.state_dirs import AppStateDir
from instance.runtime.group_admin import GroupMember


@dataclass(frozen=True)
class ResetRequest:
    """What the command line asks (the group is the application id, as in Kafka Streams)."""

    application_id: str
    bootstrap: str
    #: the admin client's settings (security included), also for the members' removal
    client_config: Mapping[str, Any]
    input_topics: Sequence[str] = ()
    intermediate_topics: Sequence[str] = ()
    #: ``--internal-topics``: a subset of the inferred ones to delete (empty: all of them)
    internal_topics: Sequence[str] = ()
    position: ResetPosition = field(default_factory=ResetPosition)
    state_dirs: Sequence[Path] = ()
    force: bool = False


@dataclass(frozen=True)
class OffsetMove:
    """One committed offset the reset sets: ``before`` None when the group had none."""

    topic: str
    partition: int
    before: int | None
    after: int


@dataclass(frozen=True)
class ResetPlan:
    members: tuple[GroupMember, ...]
    input_offsets: tuple[OffsetMove, ...]
    intermediate_offsets: tuple[OffsetMove, ...]
    internal_offsets: tuple[OffsetMove, ...]
    internal_topics: tuple[str, ...]
    state_dirs: tuple[AppStateDir, ...]


def _moves(targets: Mapping[TopicPart, int | None], committed: Mapping[TopicPart, int]) -> tuple[OffsetMove, ...]:
    return tuple(OffsetMove(t, p, committed.get((t, p)), after)
                 for (t, p), after in sorted(targets.items()) if after is not None)


def _check_topics(counts: Mapping[str, int], request: ResetRequest) -> None:
    for flag, names in (("--input-topics", request.input_topics),
                        ("--intermediate-topics", request.intermediate_topics)):
        missing = [t for t in names if t not in counts]
        if missing:
            raise ResetError("UNKNOWN_TOPIC", (
                f"{flag} names {missing[0][:64]!r}, which does not exist"
                + (f" (nor {len(missing) - 1} more)" if len(missing) > 1 else "")
                + ": check the name (`iqmesh topic list` lists them); nothing was changed"))
    if request.position.kind == "file":
        strangers = sorted({t for t, _ in request.position.plan} - set(request.input_topics))
        if strangers:
            raise ResetError("INVALID_CONFIG", f"--from-file names {strangers[0][:64]!r}, which is not one of "
                             "--input-topics; nothing was changed")
        beyond = sorted((t, p) for t, p in request.position.plan if not 0 <= p < counts[t])
        if beyond:
            t, p = beyond[0]
            raise ResetError("INVALID_CONFIG", f"--from-file names partition {p} of {t[:64]!r}, which has "
                             f"{counts[t]}; nothing was changed")


def plan(admin: AdminClient, request: ResetRequest) -> ResetPlan:
    """What the reset would do; ResetError if it must refuse. Changes nothing."""
    app = request.application_id
    found = group_members.members(admin, app)
    if found and not request.force:
        raise group_members.refusal(app, found)
    counts = offsets.topics(admin)
    _check_topics(counts, request)
    user_topics = {*request.input_topics, *request.intermediate_topics}
    internal = chosen_internal_topics(inferred_internal_topics(app, counts, user_topics),
                                      list(request.internal_topics))
    state_dirs = tuple(AppStateDir.of(d, app) for d in request.state_dirs)
    for d in state_dirs:
        d.check()
    committed = offsets.committed_offsets(admin, app)
    inputs = offsets.partitions(counts, request.input_topics)
    position = request.position
    bounds = offsets.log_bounds(admin, inputs, committed, position.value if position.kind == "time" else None)
    intermediate = offsets.partitions(counts, set(request.intermediate_topics) - set(request.input_topics))
    ends = offsets.log_bounds(admin, intermediate, committed)
    internal_parts = set(offsets.partitions(counts, internal))
    return ResetPlan(
        members=found,
        input_offsets=_moves({tp: position.target(tp, b) for tp, b in bounds.items()}, committed),
        intermediate_offsets=_moves({tp: b.latest for tp, b in ends.items()}, committed),
        internal_offsets=_moves({tp: 0 for tp in committed if tp in internal_parts}, committed),
        internal_topics=tuple(internal),
        state_dirs=state_dirs)


def apply(admin: AdminClient, request: ResetRequest, planned: ResetPlan) -> None:
    """Carry ``planned`` out; a ResetError names what was done before the step that failed."""
    app = request.application_id
    done: list[str] = []

    def so_far() -> str:
        return ("done before: " + ", ".join(done)) if done else "nothing else was changed"

    if planned.members:
        group_members.remove(request.bootstrap, app, planned.members, request.client_config, admin)
        done.append(f"{len(planned.members)} member(s) removed")
    moves = {(m.topic, m.partition): m.after for m in planned.input_offsets + planned.intermediate_offsets}
    offsets.commit(admin, app, moves, "input and intermediate topics' offsets", so_far())
    if moves:
        done.append("input and intermediate offsets committed")
    zeroes = {(m.topic, m.partition): 0 for m in planned.internal_offsets}
    offsets.commit(admin, app, zeroes, "internal topics' offsets (to 0)", so_far())
    if zeroes:
        done.append("internal topics' offsets set to 0")
    offsets.delete_topics(admin, list(planned.internal_topics), so_far())
    if planned.internal_topics:
        done.append("internal topics deleted")
    for d in planned.state_dirs:
        try:
            d.remove()
        except OSError as e:
            raise ResetError("OS_ERROR", f"removing {d.path} failed: {e}; {so_far()}") from None
        done.append(f"{d.path} removed")
