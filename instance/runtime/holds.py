"""Holds: steps of the runtime a test keeps from advancing, so a passing state stays open to look at.

A restore or a standby catching up ends on its own, sooner on a fast machine than a slow one, so
a test that waits to catch it in the act races the machine. Kafka Streams' own tests hold such a
state by blocking in a listener; an iqmesh instance is a process, so a test holds it from
outside: an instance started with ``IQMESH_HOLDS=<dir>`` in its environment does not take the
step ``h`` while the file ``<dir>/<h.value>`` exists, and takes it again once the file is gone
(``LocalCluster.hold`` / ``release``). Everything else goes on meanwhile: the group heartbeat,
polling, commits, queries. Without the variable a check is one dictionary look-up.
"""

from __future__ import annotations

import enum
import os

#: the environment variable naming the directory of hold files
HOLDS_ENV = "IQMESH_HOLDS"


class Hold(enum.Enum):
    #: active tasks apply no restore batch: they stay RESTORING at the position they started from
    RESTORE = "restore"
    #: standby replicas apply no changelog record: their lag grows with the active's writes
    STANDBY = "standby"
    #: stream threads take no periodic (or requested) commit: what they process stays uncommitted,
    #: under exactly-once in a transaction left open, as a crash or an outage in mid-run finds it
    COMMIT = "commit"
    #: the membership assist's handover (runtime/membership.py) is skipped: peers neither commit nor
    #: pause for an announced join or leave, as when their acks come too late on a busy machine, so
    #: the rebalance finds uncommitted work
    HANDOVER = "handover"


def held(hold: Hold) -> bool:
    """Whether a test holds ``hold`` now."""
    where = os.environ.get(HOLDS_ENV)
    return bool(where) and os.path.exists(os.path.join(str(where), hold.value))
