"""The ``group.protocol`` setting: its values and the check of the settings beside it. Below the
runtime (runtime/rebalance_protocol.py, which speaks the protocols, imports it): the configuration
checks it without importing the runtime."""

from __future__ import annotations

from collections.abc import Mapping

CLASSIC, CONSUMER, STREAMS = "classic", "consumer", "streams"
PROTOCOLS = (CLASSIC, CONSUMER, STREAMS)
#: the only broker-side assignor that keeps a task's co-partitioned input partitions together
REMOTE_ASSIGNOR = "range"


def problems(protocol: str, extra: Mapping[str, str]) -> list[str]:
    """What is wrong with the group protocol settings (checked with the rest of the configuration)."""
    found = []
    if protocol not in PROTOCOLS:
        found.append(f"group.protocol must be {CLASSIC}, {CONSUMER} or {STREAMS}, got {protocol!r}")
    for name, value in extra.items():
        if name.split(".")[-2:] == ["group", "protocol"]:
            found.append(f"{name}: set group.protocol instead (every stream thread's consumer uses it)")
        elif name.endswith("group.remote.assignor") and value.strip().lower() != REMOTE_ASSIGNOR:
            found.append(f"{name}={value}: only the broker's {REMOTE_ASSIGNOR} assignor keeps a task's "
                         "co-partitioned input partitions on one member; remove the setting")
    return found
