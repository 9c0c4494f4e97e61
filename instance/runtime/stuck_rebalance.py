"""A rebalance that never completes is restarted by removing every member of the group.

On the dev broker (noida-db 0.2.3) a member's pending JoinGroup is forgotten when the group moves
on (a join, leave or removal) within its 20 ms wait after a round completed: that member can
neither be counted nor send another JoinGroup, nothing expires it, and the round waits for it
until the rebalance timeout (``max.poll.interval.ms``, 5 minutes). Measured: removing the one
stuck member is not enough (its instant rejoin lands in the next window); removing **all**
members with one LeaveGroup answers every pending JoinGroup with UNKNOWN_MEMBER_ID, every client
rejoins at once as a new member, and the emptied group's initial delay gathers them in one round.

On Apache Kafka a round cannot lose a member this way, so the watchdog only fires on a round stuck
much longer than any healthy one (30 s; a member still in on_revoke after that long, e.g. an
exactly-once commit timing out, would lose that commit and rebuild its stores); removing members
is Kafka's own admin operation (KIP-345).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from instance.runtime.group_admin import GroupDescription, Kafka, describe_group, remove_members

log = logging.getLogger(__name__)

REBALANCING_STATES = frozenset({"PREPARING_REBALANCING", "COMPLETING_REBALANCING"})


class StuckRebalanceWatchdog:
    """Watches one group while a rebalance is under way; ``poke()`` from a periodic thread."""

    def __init__(self, kafka: Kafka, group: str, stuck_s: float, check_every_s: float = 2.0,
                 describe: Callable[[Kafka, str], GroupDescription] = describe_group) -> None:
        #: how the group is reached: the instance's admin client settings (runtime/group_admin.py)
        self.kafka = kafka
        self.group = group
        self.stuck_s = stuck_s
        self.check_every_s = check_every_s
        self._describe = describe
        #: (state, member ids) seen, and since when (monotonic)
        self._seen: tuple[str, frozenset[str]] | None = None
        self._since = 0.0
        self._next_check = 0.0
        self._busy = threading.Lock()
        self.restarts = 0

    def reset(self) -> None:
        """No rebalance under way as far as the caller can tell."""
        self._seen = None

    def poke(self) -> None:
        """Check the group in the background (at most every ``check_every_s``)."""
        now = time.monotonic()
        if now < self._next_check or not self._busy.acquire(blocking=False):
            return
        self._next_check = now + self.check_every_s
        threading.Thread(target=self._check_then_release, daemon=True, name=f"{self.group}-rebalance-watch").start()

    def _check_then_release(self) -> None:
        try:
            self.check()
        except Exception:  # not swallowed: logged, checked again at the next poke
            log.exception("checking group %s for a stuck rebalance failed", self.group)
        finally:
            self._busy.release()

    def check(self) -> bool:
        """Describe the group; restart a round unchanged for ``stuck_s``. True if restarted."""
        desc = self._describe(self.kafka, self.group)
        now = time.monotonic()
        if desc.state not in REBALANCING_STATES or not desc.members:
            self._seen = None
            return False
        seen = (desc.state, frozenset(m.member_id for m in desc.members))
        if seen != self._seen:
            self._seen, self._since = seen, now
            return False
        if now - self._since < self.stuck_s:
            return False
        log.warning("group %s has been %s with the same %d member(s) for %.0f s; removing them all so they "
                    "rejoin", self.group, desc.state, len(desc.members), now - self._since)
        errors = remove_members(self.kafka, self.group, desc.members)
        log.warning("group %s: members removed: %s", self.group, errors)
        self._seen = None
        self.restarts += 1
        return True
