"""Exception handlers: what happens to a record that cannot be deserialized, written, or processed.

Kafka Streams' three settings, by their Java class names or short ones:

- ``default.deserialization.exception.handler``: ``log-and-fail`` (default) or ``log-and-continue``;
- ``default.production.exception.handler``: ``fail`` (default) or ``continue``; covers records the
  producer refuses (too large, ...) and sink serialization errors;
- ``processing.exception.handler`` (KIP-1033): ``log-and-fail`` (default) or ``log-and-continue``;
  covers exceptions raised by processors and punctuators.

With ``errors.dead.letter.queue.topic.name`` set (KIP-1034), every built-in handler also writes the
input record's original key and value bytes to that topic, with headers naming the exception and
the input's topic, partition and offset (the topic must exist, as in Kafka Streams). A custom
handler is ``module:attribute``, a class implementing the matching Protocol below (given
``configure(properties)`` if it has one). :class:`ErrorHandling` applies the handlers' answers:
sends the dead-letter records, counts dropped records, and raises on FAIL with a message that names
the setting that would skip such records.
"""

from __future__ import annotations

import collections
import enum
import importlib
import logging
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from instance.errors import (
    ConfigException,
    ProcessingException,
    ProductionException,
    SerializationException,
    StreamsException,
)
from instance.topology.processor import Headers, Record, RecordContext

log = logging.getLogger(__name__)

DESERIALIZATION = "default.deserialization.exception.handler"
PRODUCTION = "default.production.exception.handler"
PROCESSING = "processing.exception.handler"
DEAD_LETTER_TOPIC = "errors.dead.letter.queue.topic.name"

# header names of a dead-letter record (Kafka Streams' ExceptionHandlerUtils)
HEADER_EXCEPTION = "__streams.errors.exception"
HEADER_MESSAGE = "__streams.errors.message"
HEADER_STACKTRACE = "__streams.errors.stacktrace"
HEADER_TOPIC = "__streams.errors.topic"
HEADER_PARTITION = "__streams.errors.partition"
HEADER_OFFSET = "__streams.errors.offset"


class HandlerResponse(enum.Enum):
    CONTINUE = 0
    FAIL = 1


@dataclass(frozen=True, slots=True)
class ErrorHandlerContext:
    """Where the failing record came from (Kafka Streams' ``ErrorHandlerContext``). ``topic`` is
    None when there is no input record (a punctuation, or a delivery report)."""

    task_id: str
    topic: str | None
    partition: int
    offset: int
    timestamp: int
    headers: Headers
    processor_node_id: str | None
    source_raw_key: bytes | None
    source_raw_value: bytes | None

    def where(self) -> str:
        node = f", processor {self.processor_node_id}" if self.processor_node_id else ""
        if not self.task_id:
            return "input record unknown: the broker refused the record after it was sent"
        if self.topic is None:
            return f"task {self.task_id}{node}, no input record"
        return f"input topic={self.topic} partition={self.partition} offset={self.offset}, task {self.task_id}{node}"


@dataclass(frozen=True, slots=True)
class DeadLetterRecord:
    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


@dataclass(frozen=True, slots=True)
class HandlerResult:
    response: HandlerResponse
    dead_letter_records: tuple[DeadLetterRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class ProducedRecord:
    """A record the producer refused, or a sink could not serialize (key/value then None)."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    timestamp: int


class DeserializationExceptionHandler(Protocol):
    def handle(self, context: ErrorHandlerContext, exception: Exception) -> HandlerResult: ...


class ProductionExceptionHandler(Protocol):
    def handle(self, context: ErrorHandlerContext, record: ProducedRecord,
               exception: Exception) -> HandlerResult: ...


class ProcessingExceptionHandler(Protocol):
    def handle(self, context: ErrorHandlerContext, record: Record | None,
               exception: Exception) -> HandlerResult: ...


def dead_letter_record(topic: str, context: ErrorHandlerContext, exception: BaseException) -> DeadLetterRecord:
    """The input record's original bytes and headers, plus headers describing the failure."""
    def s(v: object) -> bytes:
        return str(v).encode()
    stack = "".join(traceback.format_exception(exception))
    headers = (*context.headers,
               (HEADER_EXCEPTION, s(f"{type(exception).__module__}.{type(exception).__qualname__}")),
               (HEADER_MESSAGE, s(exception)),
               (HEADER_STACKTRACE, s(stack)),
               (HEADER_TOPIC, None if context.topic is None else s(context.topic)),
               (HEADER_PARTITION, s(context.partition)),
               (HEADER_OFFSET, s(context.offset)))
    return DeadLetterRecord(topic, context.source_raw_key, context.source_raw_value, max(context.timestamp, 0),
                            headers)


class _Builtin:
    """Built-in handlers: the answer is fixed; a dead-letter record if the topic is configured."""

    response = HandlerResponse.FAIL

    def __init__(self) -> None:
        self.dead_letter_topic: str | None = None

    def configure(self, properties: Mapping[str, Any]) -> None:
        self.dead_letter_topic = properties.get(DEAD_LETTER_TOPIC) or None

    def _result(self, context: ErrorHandlerContext, exception: Exception) -> HandlerResult:
        if self.dead_letter_topic is None:
            return HandlerResult(self.response)
        return HandlerResult(self.response, (dead_letter_record(self.dead_letter_topic, context, exception),))


class LogAndFailExceptionHandler(_Builtin):
    def handle(self, context: ErrorHandlerContext, exception: Exception) -> HandlerResult:
        log.error("record does not deserialize (%s): %s. To skip such records set %s=log-and-continue "
                  "(with %s=<topic> to keep them in a dead-letter topic)", context.where(), exception,
                  DESERIALIZATION, DEAD_LETTER_TOPIC)
        return self._result(context, exception)


class LogAndContinueExceptionHandler(_Builtin):
    response = HandlerResponse.CONTINUE

    def handle(self, context: ErrorHandlerContext, exception: Exception) -> HandlerResult:
        log.warning("skipping a record that does not deserialize (%s): %s", context.where(), exception)
        return self._result(context, exception)


class DefaultProductionExceptionHandler(_Builtin):
    def handle(self, context: ErrorHandlerContext, record: ProducedRecord, exception: Exception) -> HandlerResult:
        return self._result(context, exception)


class ContinueProductionExceptionHandler(_Builtin):
    response = HandlerResponse.CONTINUE

    def handle(self, context: ErrorHandlerContext, record: ProducedRecord, exception: Exception) -> HandlerResult:
        return self._result(context, exception)


class LogAndFailProcessingExceptionHandler(_Builtin):
    def handle(self, context: ErrorHandlerContext, record: Record | None, exception: Exception) -> HandlerResult:
        log.error("processing failed (%s): %r. To skip such records set %s=log-and-continue",
                  context.where(), exception, PROCESSING)
        return self._result(context, exception)


class LogAndContinueProcessingExceptionHandler(_Builtin):
    response = HandlerResponse.CONTINUE

    def handle(self, context: ErrorHandlerContext, record: Record | None, exception: Exception) -> HandlerResult:
        log.warning("processing failed, continuing (%s): %r", context.where(), exception)
        return self._result(context, exception)


_J = "org.apache.kafka.streams.errors."
_BUILTINS: dict[str, dict[str, type]] = {
    DESERIALIZATION: {"log-and-fail": LogAndFailExceptionHandler, "fail": LogAndFailExceptionHandler,
                      "log-and-continue": LogAndContinueExceptionHandler,
                      _J + "LogAndFailExceptionHandler": LogAndFailExceptionHandler,
                      _J + "LogAndContinueExceptionHandler": LogAndContinueExceptionHandler},
    PRODUCTION: {"fail": DefaultProductionExceptionHandler, "continue": ContinueProductionExceptionHandler,
                 _J + "DefaultProductionExceptionHandler": DefaultProductionExceptionHandler},
    PROCESSING: {"log-and-fail": LogAndFailProcessingExceptionHandler,
                 "log-and-continue": LogAndContinueProcessingExceptionHandler,
                 _J + "LogAndFailProcessingExceptionHandler": LogAndFailProcessingExceptionHandler,
                 _J + "LogAndContinueProcessingExceptionHandler": LogAndContinueProcessingExceptionHandler},
}


def load_custom(setting: str, name: str, choices: list[str]) -> Any:
    """``module:attribute`` (or ``module.attribute``), imported; ValueError naming the choices."""
    module, sep, attr = name.partition(":")
    if not sep:
        module, _, attr = name.rpartition(".")
    if not module or not attr:
        raise ValueError(f"{setting} must be one of {', '.join(choices)} or module:attribute, got {name!r}")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as e:
        raise ValueError(f"{setting}: cannot load {name!r}: {e}") from None


def make_handler(setting: str, name: str, properties: Mapping[str, Any]) -> Any:
    """The handler a setting's value names, configured (ValueError if none)."""
    builtins = _BUILTINS[setting]
    cls = builtins.get(name)
    if cls is None:
        cls = load_custom(setting, name, sorted(n for n in builtins if not n.startswith("org.")))
        if not isinstance(cls, type) or not hasattr(cls, "handle"):
            raise ValueError(f"{setting}: {name} is not a class with a handle() method")
    handler = cls()
    configure = getattr(handler, "configure", None)
    if configure is not None:
        configure(properties)
    return handler


Sender = Callable[[str, bytes | None, bytes | None, int, int, Any], None]


#: the dropped-records reason of records the processors drop (late for a window, a null key or
#: value where one is needed), next to the handlers' reasons
LATE_OR_INVALID = "late-or-invalid"


class ErrorHandling:
    """The handlers of one stream thread (or test driver), and what they dropped."""

    def __init__(self, properties: Mapping[str, Any], send: Sender | None = None) -> None:
        """``send``: where dead-letter records go (the owner's current producer; None: nowhere,
        a dead-letter topic then fails the record)."""
        def setting(name: str, default: str) -> str:
            return str(properties.get(name) or default)
        try:
            self.deserialization: DeserializationExceptionHandler = make_handler(
                DESERIALIZATION, setting(DESERIALIZATION, "log-and-fail"), properties)
            self.production: ProductionExceptionHandler = make_handler(
                PRODUCTION, setting(PRODUCTION, "fail"), properties)
            self.processing: ProcessingExceptionHandler = make_handler(
                PROCESSING, setting(PROCESSING, "log-and-fail"), properties)
        except ValueError as e:
            raise ConfigException(str(e)) from None
        self.dead_letter_topic: str | None = properties.get(DEAD_LETTER_TOPIC) or None
        #: dropped records by reason (Kafka Streams' dropped-records metric)
        self.dropped: collections.Counter[str] = collections.Counter()
        #: the same, by task id (the task's dropped-records metric; "" when no task is known)
        self.dropped_by_task: collections.Counter[str] = collections.Counter()
        self.send = send

    # -- contexts ------------------------------------------------------------------------------
    @staticmethod
    def context(task_id: str, rc: RecordContext, node: str | None) -> ErrorHandlerContext:
        msg = rc.msg
        if rc.topic is None or msg is None:  # punctuation
            return ErrorHandlerContext(task_id, None, rc.partition, -1, rc.timestamp, (), node, None, None)
        return ErrorHandlerContext(task_id, rc.topic, rc.partition, rc.offset, rc.timestamp,
                                   rc.current_headers(), node, msg.key(), msg.value())

    # -- the three kinds ------------------------------------------------------------------------
    def deserialization_error(self, task_id: str, rc: RecordContext, exc: Exception) -> None:
        ctx = self.context(task_id, rc, None)
        result = self._ask(lambda: self.deserialization.handle(ctx, exc))
        if result.response is HandlerResponse.FAIL:
            raise SerializationException(
                f"record does not deserialize: {exc}; set {DESERIALIZATION}=log-and-continue to skip such "
                f"records", ctx.topic, ctx.partition, ctx.offset) from exc
        self.dropped["deserialization-error"] += 1
        self.dropped_by_task[task_id] += 1

    def production_error(self, ctx: ErrorHandlerContext, record: ProducedRecord, exc: Exception) -> None:
        """A record the producer refused (or a sink could not serialize); raises on FAIL."""
        # no dead-letter record for a failed dead-letter record: that would loop
        result = self._ask(lambda: self.production.handle(ctx, record, exc),
                           dead_letters=record.topic != self.dead_letter_topic)
        part = f" partition {record.partition}" if record.partition >= 0 else ""
        size = f", {len(record.key or b'') + len(record.value or b'')} bytes" if record.key or record.value else ""
        what = f"a record for topic {record.topic}{part} ({ctx.where()}{size})"
        if result.response is HandlerResponse.FAIL:
            raise ProductionException(f"could not write {what}: {exc}; set {PRODUCTION}=continue to skip such "
                                      f"records") from exc
        log.error("skipped %s, which could not be written: %s (%s=continue)", what, exc, PRODUCTION)
        self.dropped["production-error"] += 1
        self.dropped_by_task[ctx.task_id] += 1

    def processing_error(self, ctx: ErrorHandlerContext, record: Record | None, exc: Exception) -> None:
        result = self._ask(lambda: self.processing.handle(ctx, record, exc))
        if result.response is HandlerResponse.FAIL:
            raise ProcessingException(f"processing failed ({ctx.where()}): {exc!r}; set {PROCESSING}="
                                      f"log-and-continue to skip such records") from exc
        self.dropped["processing-error"] += 1
        self.dropped_by_task[ctx.task_id] += 1

    def delivery_failed(self, err: Any, msg: Any) -> None:
        """A failed delivery report (the collector's hook): which input record produced it is no
        longer known; the refused record's own bytes stand in for the dead-letter record."""
        ts = msg.timestamp()[1]
        ctx = ErrorHandlerContext("", None, -1, -1, ts, tuple(msg.headers() or ()), None, msg.key(), msg.value())
        partition = msg.partition()  # None in a report for a record that never got a partition
        record = ProducedRecord(msg.topic(), -1 if partition is None else partition, msg.key(), msg.value(), ts)
        self.production_error(ctx, record, ProductionException(f"{err.name()}: {err.str()}"))

    def invalid_timestamp(self, task_id: str = "") -> None:
        self.dropped["invalid-timestamp"] += 1
        self.dropped_by_task[task_id] += 1

    # -- applying an answer ----------------------------------------------------------------------
    def _ask(self, handle: Callable[[], HandlerResult], dead_letters: bool = True) -> HandlerResult:
        try:
            result = handle()
        except Exception as e:
            raise StreamsException(f"the exception handler itself failed: {e!r}") from e
        if not isinstance(result, HandlerResult):
            raise StreamsException(f"an exception handler returned {result!r}, not a HandlerResult")
        if dead_letters:
            for dl in result.dead_letter_records:
                self._send_dead_letter(dl)
        return result

    def _send_dead_letter(self, dl: DeadLetterRecord) -> None:
        if self.send is None:
            raise StreamsException("no producer for dead-letter records")
        try:
            self.send(dl.topic, dl.key, dl.value, dl.timestamp, -1, list(dl.headers))
        except ProductionException as e:  # e.g. the input record is too large for the DLQ too
            log.error("could not write a dead-letter record to %s: %s", dl.topic, e)
            self.dropped["dead-letter-error"] += 1
