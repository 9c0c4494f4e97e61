"""The one error line of every ``iqmesh`` command, and of the snapshot job under spark-submit.

Here rather than in the CLI so that the snapshot job prints it without importing the CLI, which
imports the job.
"""

from __future__ import annotations

import sys

from kernel.echo import clip


def report_error(command: str, code: str, message: str) -> None:
    """The one error line: ``iqmesh COMMAND: error: CODE: message`` on stderr."""
    line = " ".join(clip(message).split())  # one line, whatever the message held
    print(f"iqmesh {command}: error: {code}: {line}", file=sys.stderr, flush=True)
