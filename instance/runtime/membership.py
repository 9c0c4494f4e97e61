"""Membership changes that lose no commit, and a group that never waits for the dead.

Two brokers, one runtime. Apache Kafka accepts offset commits from the current generation while
a rebalance is being prepared, and expires a member whose session timed out. The dev broker
(noida-db) refuses commits once a rebalance has started and never expires a dead member (see
``tests/conformance/test_group_membership.py``). Everything this runtime does about that lives
here, behind one setting, ``iqmesh.membership.assist`` (default ``auto``: on for the dev broker,
off for Apache Kafka, which needs none of it; runtime/broker_kind.py tells them apart):

* **Handover.** Before this instance causes a rebalance (joining, leaving, removing a dead
  member) it announces an *intent* in its published InstanceInfo. Every live instance commits,
  stops consuming and lists the intent in its ``acks``; the announcer waits for all acks (bounded),
  then acts. So no member has uncommitted work when the rebalance starts, and nothing is processed
  twice. Peers resume at their next assignment (or, for a join that needed no rebalance — a static
  member coming back — when the intent is withdrawn, or after a timeout).
* **Joins one at a time**, each with its own handover (see ``_take_join_turn``).
* **Stuck rebalances.** A round unchanged for much longer than a healthy one is restarted by the
  smallest live instance (runtime/stuck_rebalance.py).
* **Dead members.** The smallest live instance removes the members of an instance whose heartbeats
  stopped for ``session.timeout.ms`` (Kafka's remove-members operation, KIP-345), after fencing its
  open transactions (found with ListTransactions) so they are aborted and the last stable offset
  moves on: the dev broker never aborts a transaction past ``transaction.timeout.ms``. A restarted
  instance fences the open transactions of its previous run the same way, and a restarted dynamic
  instance removes the members its previous run left behind, before it joins.
* **A producer never writes again after an abort.** On the dev broker, a read_committed consumer
  that has read past an abort marker silently skips every later record of the producer that
  aborted, committed or not (``tests/conformance/test_broker.py``). So each producer has a
  transactional id of its own (``transactional_id``): after an abort the thread makes a new
  producer with a new id (runtime/task_manager.py), and a restarted instance never reuses the id
  of its previous run. Apache Kafka's EOS v2 fences by group generation, not by id, so this costs
  nothing there.
* **A transactional producer never outlives a broker outage.** The dev broker, restarted, forgets
  its transactions: it aborts the ones open in its logs, yet answers the producer's later commit
  with success, and the records that producer sends after the restart form a transaction no
  coordinator knows, never ended, which pins the last stable offset of their partitions for good
  (ListTransactions lists nothing; fencing the id does not end it:
  ``tests/conformance/test_broker_restart.py``). So once librdkafka reports the broker gone, the
  producer drops what it holds and every later record, its transaction counts as aborted and the
  thread starts over with a new producer (runtime/collector.py, ``abandon_when_brokers_down``).
  At-least-once producers are dropped the same way: a member whose session expires in the outage
  would otherwise deliver what it held once the broker is back, after the member that took its
  tasks restored them and wrote newer counts, and whoever restores them next would read the older
  ones as the latest (seen in CI: a restored count lost half its input).
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from instance.config import StreamsConfig
from instance.runtime.group_admin import (
    GroupAdminError,
    GroupMember,
    describe_group_members,
    fence_transactional_id,
    fence_transactions,
    remove_members,
)
from instance.runtime.holds import Hold, held
from instance.runtime.stuck_rebalance import StuckRebalanceWatchdog
from kernel.instance_state import State
from kernel.metadata import ClusterView, InstanceInfo

log = logging.getLogger(__name__)

JOIN, LEAVE, REMOVE = "join", "leave", "remove"


class QuiescingThread(Protocol):
    """What the coordinator asks of a stream thread (runtime/stream_thread.py implements it): a
    Protocol, so this module does not import the thread that imports it."""

    @property
    def name(self) -> str: ...

    def is_alive(self) -> bool: ...

    def acked(self, intent: str) -> bool: ...

    def set_quiesce_requests(self, intents: frozenset[str]) -> None: ...


def intent_kind(intent: str) -> str:
    return intent.split(":", 1)[0]


def thread_client_prefix(instance_id: str) -> str:
    """``client.id`` prefix of an instance's stream-thread consumers (see StreamThread)."""
    return f"{instance_id}-StreamThread-"


def transactional_id(application_id: str, instance_id: str, thread_index: int) -> str:
    """A new transactional id for a producer of ``instance_id``'s stream thread ``thread_index``:
    never used before (see the module docstring), recognisable by ``owned_by``."""
    return f"{application_id}-{instance_id}-{thread_index}-{secrets.token_hex(4)}"


def owned_by(application_id: str, instance_id: str) -> Callable[[str], bool]:
    """Whether a transactional id is one of ``instance_id``'s (any run, any thread); an instance
    whose id extends ours with a dash is not matched."""
    pattern = re.compile(re.escape(f"{application_id}-{instance_id}-") + r"\d+(-[0-9a-f]{8})?")
    return lambda tid: pattern.fullmatch(tid) is not None


class MembershipCoordinator:
    """Announces this instance's membership changes and answers the peers' announcements."""

    def __init__(self, config: StreamsConfig, view: ClusterView, publish_now: Callable[[], None],
                 threads: Callable[[], Sequence[QuiescingThread]],
                 publish_tombstone: Callable[[str], None], view_loaded: threading.Event,
                 enabled: bool) -> None:
        self.config = config
        #: the resolved ``iqmesh.membership.assist`` (broker_kind.membership_assist)
        self.enabled = enabled
        self.me = config.instance_id
        self.view = view
        self._publish_now = publish_now
        self._threads = threads
        self._publish_tombstone = publish_tombstone
        #: transactional ids of producers this instance replaced -> when to fence next (monotonic)
        self._replaced: dict[str, float] = {}
        self._replaced_lock = threading.Lock()
        self._view_loaded = view_loaded
        #: intent -> when it was first seen withdrawn (see may_resume)
        self._gone_since: dict[str, float] = {}
        self.intent = ""
        self.acks: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self._join_done = threading.Event()
        self._join_started = False
        #: (dead instance, its last heartbeat) -> monotonic time from which to try again
        self._dead_handled: dict[tuple[str, int], float] = {}
        self._action = threading.Lock()  # one announced change at a time
        self.ack_timeout_s = 10.0
        #: a paused peer resumes after this even if no rebalance came (the announcer died)
        self.quiesce_timeout_s = max(10.0, config.session_timeout_ms / 1000.0)
        # healthy rounds take about a second here, and a member's on_revoke (commit, close
        # tasks) a few; Apache Kafka would wait max.poll.interval.ms
        self._watchdog = StuckRebalanceWatchdog(config.client_config("admin"), config.application_id,
                                                stuck_s=max(30.0, 3 * config.session_timeout_ms / 1000.0))

    @property
    def abandons_producers_on_outage(self) -> bool:
        """Whether a producer is dropped once every broker went away (module doc)."""
        return self.enabled

    # -- announcer side ---------------------------------------------------------------------------
    def _announce(self, kind: str, subject: str) -> str:
        self.intent = f"{kind}:{subject}:{self.me}:{int(time.time() * 1000)}"
        self._publish_now()
        return self.intent

    def withdraw(self, intent: str | None = None) -> None:
        if self.intent and (intent is None or self.intent == intent):
            self.intent = ""
            self._publish_now()

    def _await_acks(self, intent: str, exclude: str = "") -> bool:
        """Until every live peer (and, for a removal, every thread here) has paused for ``intent``."""
        deadline = time.monotonic() + self.ack_timeout_s
        missing: list[str] = []
        while time.monotonic() < deadline:
            missing = [i.instance_id for i in self.view.instances()
                       if i.instance_id not in (self.me, exclude) and self.view.is_alive(i)
                       and intent not in i.acks]
            if intent_kind(intent) == REMOVE:
                missing += [t.name for t in self._threads() if t.is_alive() and not t.acked(intent)]
            if not missing:
                return True
            with self.view.changed:
                self.view.changed.wait(0.1)
        log.warning("membership change %s: no acknowledgement from %s within %.0f s; going ahead",
                    intent, missing, self.ack_timeout_s)
        return False

    def prepare_join(self, static: bool) -> None:
        """Called by each stream thread before it subscribes; the first one does the work."""
        with self._lock:
            first = not self._join_started
            self._join_started = True
        if not first:
            self._join_done.wait(2 * self.ack_timeout_s + 30)
            return
        try:
            if self.enabled:
                # the announcement waits for the peers in our view: read the view whole first
                if not self._view_loaded.wait(self.ack_timeout_s):
                    log.warning("instance metadata not read within %.0f s; joining without a handover",
                                self.ack_timeout_s)
                if self.config.eos:
                    self._fence(self.me)  # before any thread of ours opens a transaction
                if not static:
                    self._remove_previous_incarnation()
                with self._action:
                    self._take_join_turn()
        except Exception as e:  # the join goes ahead: at worst peers redo uncommitted work
            log.warning("preparing the group join failed (%s); joining anyway", e)
        finally:
            self._join_done.set()

    def _take_join_turn(self, timeout_s: float = 60.0) -> None:
        """Announce our join and wait for the acks; if another instance announced its join
        earlier, withdraw ours until it is done, then announce again. Joins one at a time: on the
        dev broker a join arriving just as another round completes can strand a member's pending
        JoinGroup (runtime/stuck_rebalance.py), and each join gets a handover of its own."""
        deadline = time.monotonic() + timeout_s
        while True:
            intent = self._announce(JOIN, self.me)
            self._await_acks(intent)
            earlier = self._earlier_join(intent)
            if earlier is None or time.monotonic() > deadline:
                return
            self.withdraw(intent)
            log.info("joining after %s", earlier)
            while self.still_announced(earlier) and time.monotonic() < deadline:
                with self.view.changed:
                    self.view.changed.wait(0.2)

    def _earlier_join(self, intent: str) -> str | None:
        """A join announced before ``intent`` by a live instance, still pending."""
        def order(i: str) -> tuple[int, str]:
            return int(i.rsplit(":", 1)[1]), i
        pending = [i.intent for i in self.view.instances()
                   if i.instance_id != self.me and i.intent and intent_kind(i.intent) == JOIN
                   and self._announcing(i) and order(i.intent) < order(intent)]
        return min(pending, key=order) if pending else None

    def joined(self) -> None:
        """A thread got its assignment: a pending join announcement is done."""
        if self.intent and intent_kind(self.intent) == JOIN:
            self.withdraw()

    def prepare_leave(self, static: bool) -> None:
        """Before a clean shutdown: peers commit and pause, so the rebalance our LeaveGroup
        starts finds nothing uncommitted. A static member sends no LeaveGroup: nothing to do."""
        if self.enabled and not static:
            with self._action:
                self._await_acks(self._announce(LEAVE, self.me))

    def _remove_previous_incarnation(self) -> None:
        """Members with our client ids are a dead previous run of this instance (kill -9 and
        restart as a new dynamic member): remove them, or the rebalance would wait for them."""
        admin, group = self.config.client_config("admin"), self.config.application_id
        old = [m for m in describe_group_members(admin, group)
               if m.client_id.startswith(thread_client_prefix(self.me))]
        if old:
            with self._action:
                intent = self._announce(REMOVE, self.me)
                self._await_acks(intent, exclude=self.me)
                log.warning("removing %d group member(s) left by a previous run of %s", len(old), self.me)
                remove_members(admin, group, old)
                self.withdraw(intent)

    # -- peer side ----------------------------------------------------------------------------------
    def tick(self, in_group: bool) -> None:
        """From the metadata thread, after each read of the cluster view. ``in_group``: this
        instance is RUNNING or REBALANCING (a rebalance waiting for a dead member must be
        unblocked from there too)."""
        if not self.enabled:
            return
        self._fence_replaced()
        live = [i for i in self.view.instances() if self.view.is_alive(i)]
        wanted = {i.intent for i in self.view.instances() if i.intent and i.instance_id != self.me
                  and self._announcing(i)} if not held(Hold.HANDOVER) else set()
        if self.intent and intent_kind(self.intent) == REMOVE:
            wanted.add(self.intent)  # a removal we announce pauses our own threads too
        threads = [t for t in self._threads() if t.is_alive()]
        requests = frozenset(wanted)
        for t in threads:
            t.set_quiesce_requests(requests)
        acks = tuple(sorted(i for i in wanted if all(t.acked(i) for t in threads)))
        if acks != self.acks:
            self.acks = acks
            self._publish_now()
        if in_group:
            self._remove_dead_members(live)
            self._watch_rebalance(live)

    def _announcing(self, info: InstanceInfo) -> bool:
        """Heartbeating and not stopped (a leaving instance is PENDING_SHUTDOWN)."""
        return info.state not in (State.NOT_RUNNING, State.ERROR) and \
            self.view.heartbeat_age_ms(info) <= self.view.liveness_ms

    def still_announced(self, intent: str) -> bool:
        return intent == self.intent or any(
            i.intent == intent and self._announcing(i) for i in self.view.instances())

    def happened(self, intent: str, acked_at: float, revoked_at: float) -> bool:
        """At an assignment: is the change a thread paused for (at ``acked_at``) behind us?"""
        if acked_at >= revoked_at:
            return False  # announced during this rebalance: it may still be to come
        return intent_kind(intent) == JOIN or not self.still_announced(intent)

    def may_resume(self, intents: set[str], paused_since: float) -> bool:
        """A paused thread resumes without a new assignment once every change it paused for is
        over: a join withdrawn (it needed no rebalance), a leave or removal no longer announced
        for a few heartbeats (the rebalance it caused would have reached us by then), or after
        ``quiesce_timeout_s`` in any case."""
        now = time.monotonic()
        if now - paused_since > self.quiesce_timeout_s:
            return True
        settle_s = 3 * self.config.session_timeout_ms / 10_000  # three consumer heartbeats
        for i in intents:
            if self.still_announced(i):
                self._gone_since.pop(i, None)
                return False
            gone = self._gone_since.setdefault(i, now)
            if intent_kind(i) != JOIN and now - gone < settle_s:
                return False
        return True

    # -- dead members and stuck rebalances --------------------------------------------------------------
    def _is_janitor(self, live: list[InstanceInfo]) -> bool:
        """One instance removes dead members and restarts stuck rebalances: the smallest live one."""
        return bool(live) and min(i.instance_id for i in live) == self.me

    def _watch_rebalance(self, live: list[InstanceInfo]) -> None:
        if self._is_janitor(live) and any(i.state is State.REBALANCING for i in live):
            self._watchdog.poke()
        else:
            self._watchdog.reset()

    def _remove_dead_members(self, live: list[InstanceInfo]) -> None:
        """Members whose instance stopped heartbeating ``session.timeout.ms`` ago: a crashed one's,
        and a cleanly stopped static one's (it sends no LeaveGroup; Apache Kafka expires it after
        the session timeout, the dev broker never does, so a scale-in would leave its partitions
        unserved)."""
        if not self._is_janitor(live):
            return
        now = int(time.time() * 1000)
        for info in self.view.instances():
            key = (info.instance_id, info.heartbeat_ms)
            if (info.instance_id != self.me and self.view.heartbeat_age_ms(info, now) > self.config.session_timeout_ms
                    and time.monotonic() >= self._dead_handled.get(key, 0.0)):
                self._dead_handled[key] = float("inf")
                threading.Thread(target=self._remove_dead, args=(info,), daemon=True,
                                 name=f"{self.me}-remove-{info.instance_id}").start()

    def _remove_dead(self, info: InstanceInfo) -> None:
        try:
            with self._action:
                self._remove_dead_locked(info)
        except Exception:
            # not swallowed: logged and tried again in 5 s (a broker that expires dead members
            # needs none of this)
            log.exception("removing dead instance %s from the group failed", info.instance_id)
            self._dead_handled[(info.instance_id, info.heartbeat_ms)] = time.monotonic() + 5.0
            self.withdraw()

    def fence_later(self, transactional_id: str) -> None:
        """A producer this instance replaced (after an abort, a fence, or a broker that went away)
        may have left a transaction open, and the dev broker never times it out: its last stable
        offset would hold every read_committed reader (restores too) forever. Fence its id from
        the metadata thread, again every 5 s until the broker answers."""
        if self.enabled:
            with self._replaced_lock:
                self._replaced[transactional_id] = 0.0

    def _fence_replaced(self) -> None:
        now = time.monotonic()
        with self._replaced_lock:
            due = [tid for tid, at in self._replaced.items() if at <= now]
            for tid in due:
                self._replaced[tid] = float("inf")  # in flight
        for tid in due:
            threading.Thread(target=self._fence_one, args=(tid,), daemon=True, name=f"{self.me}-fence-own").start()

    def _fence_one(self, transactional_id: str) -> None:
        try:
            fence_transactional_id(self.config.client_config("producer"), transactional_id, timeout=10.0)
        except GroupAdminError as e:
            log.info("fencing replaced producer %s failed (%s); trying again in 5 s", transactional_id, e)
            with self._replaced_lock:
                self._replaced[transactional_id] = time.monotonic() + 5.0
            return
        with self._replaced_lock:
            self._replaced.pop(transactional_id, None)

    def _fence(self, instance_id: str) -> None:
        """Abort the open transactions of a dead instance (or of our previous run) now, or the last
        stable offset of every partition they wrote stays pinned and read_committed readers
        (restores too) wait."""
        config = self.config
        fenced = fence_transactions(config.client_config("admin"), owned_by(config.application_id, instance_id),
                                    producer=config.client_config("producer"))
        if fenced:
            log.warning("aborted %d open transaction(s) of %s: %s", len(fenced), instance_id, ", ".join(fenced))

    def _remove_dead_locked(self, info: InstanceInfo) -> None:
        admin, group = self.config.client_config("admin"), self.config.application_id
        dead = info.instance_id

        def left_behind() -> list[GroupMember]:
            return [m for m in describe_group_members(admin, group)
                    if m.client_id.startswith(thread_client_prefix(dead))]

        if info.state in (State.NOT_RUNNING, State.ERROR):
            # stopped cleanly: a dynamic member left the group, a static one stays until removed
            if not left_behind():
                return
            log.warning("stopped static instance %s still holds its partitions %d ms later; removing it "
                        "from the group (Apache Kafka would expire it)", dead,
                        int(time.time() * 1000) - info.heartbeat_ms)
        else:
            log.warning("instance %s missed its heartbeats for %d ms; removing it from the group",
                        dead, int(time.time() * 1000) - info.heartbeat_ms)
        intent = self._announce(REMOVE, dead)
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{self.me}-fence") as pool:
            # fencing needs no handover: it runs while the peers commit and pause
            fenced = pool.submit(self._fence, dead) if self.config.eos else None
            self._await_acks(intent, exclude=dead)
            if fenced is not None:
                fenced.result()
        members = left_behind()
        if members:
            errors = remove_members(admin, group, members)
            log.warning("removed %s from the group: %s", dead, errors)
        self._publish_tombstone(dead)
        self.view.remove(dead)
        self.withdraw(intent)
