"""The one failure of a reset: ``code`` is the CODE of the command's error line (a Kafka error
name such as ``NON_EMPTY_GROUP`` or ``TOPIC_AUTHORIZATION_FAILED``, or one of ours such as
``STATE_DIR_LOCKED``), the message says what was and was not done."""

from __future__ import annotations


class ResetError(Exception):
    """A reset refused or stopped; ``code`` names why."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
