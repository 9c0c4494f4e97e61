"""Why a gateway started with ``--bootstrap`` knows no instance, said once and then at most every
30 s: a missing instances topic means the application has no instances (yet); any other failure
to read it is the bootstrap's. ``/readyz`` gives the same sentence."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException

#: the same problem is logged again after this long (a new problem at once)
REPEAT_S = 30.0


def describe(error: KafkaException, topic: str, bootstrap: str, application_id: str) -> str:
    """One sentence for a failure to read ``topic``."""
    code = error.args[0].code() if error.args and isinstance(error.args[0], KafkaError) else None
    if code in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
        return (f"application {application_id!r} has no instances (yet): its instances topic {topic} does not "
                f"exist on {bootstrap} (check --application-id, or start its instances)")
    detail = error.args[0].str() if error.args and isinstance(error.args[0], KafkaError) else str(error)
    return (f"application {application_id!r} has no instances known (yet): cannot read its instances topic "
            f"{topic} from {bootstrap} ({detail}; is the broker up at --bootstrap?)")


class ProblemLog:
    """The current problem (``""`` when none) and a log line for it at most every ``repeat_s``."""

    def __init__(self, log: logging.Logger, repeat_s: float = REPEAT_S) -> None:
        self.current = ""
        #: how many times a problem was reported (logged or not)
        self.reported = 0
        self._log = log
        self._repeat_s = repeat_s
        self._logged_at = float("-inf")

    def report(self, problem: str) -> None:
        now = time.monotonic()
        self.reported += 1
        if problem != self.current or now - self._logged_at >= self._repeat_s:
            self._log.warning("%s", problem)
            self._logged_at = now
        self.current = problem

    def clear(self) -> None:
        if self.current:
            self._log.info("the instances topic can be read again")
        self.current = ""
        self._logged_at = float("-inf")
