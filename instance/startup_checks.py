"""What ``iqmesh run`` checks before the instance joins its group, so that a mistake is one error
line at start rather than a failure after the group rebalanced around the new member."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from instance.errors import ConfigException


def check_state_dir(state_dir: str | Path, application_id: str) -> None:
    """``state.dir`` must be a directory (created if missing) in which files can be written: the
    application's directory is created there and a probe file written and removed."""
    root = Path(state_dir)
    if root.exists() and not root.is_dir():
        raise ConfigException(f"state.dir {root} is a file, not a directory: give --state-dir a directory")
    app_dir = root / application_id
    probe = app_dir / f".iqmesh-write-check-{uuid.uuid4().hex[:8]}"
    try:
        app_dir.mkdir(parents=True, exist_ok=True)
        probe.write_bytes(b"")
        os.unlink(probe)
    except OSError as e:
        raise ConfigException(f"state.dir {root} cannot be written ({e.strerror or e}: {e.filename or app_dir}): "
                              "give --state-dir a writable directory") from e
