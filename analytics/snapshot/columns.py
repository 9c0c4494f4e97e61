"""The rows of a snapshot dataset, and how the executors build them.

Every store's dataset has the raw ``key`` and ``value`` bytes, ``partition``, ``offset`` and
``timestamp`` of the changelog record that set the value (null from the instances source, which
sees no records), plus decoded columns where the serde has a Spark type: ``key_string`` /
``value_long`` / ``value_int`` / ``value_json`` (the JSON text) and, for JSON, ``value_variant``
(Spark 4's VARIANT, queryable as ``value_variant:field``). A custom serde leaves only the bytes.

The executors decode while they build Arrow batches (one pass, in the Python worker that already
holds the bytes) and hand the batches to Spark with ``mapInArrow``: no per-row pickling. A whole
column is decoded at once where Arrow or numpy can (a UTF-8 check, big-endian ints): that is what
makes the job fast, so it is kept beside the project's serdes rather than replaced by them. It
reads the serdes' own definitions (names and aliases: ``serde_by_name``; byte formats:
``IntSerde.wire`` / ``LongSerde.wire``), and a column it cannot take whole falls back to the
serdes' ``deserialize``, value by value.
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from kernel.serdes import IntSerde, JsonSerde, LongSerde, Serde, StringSerde, json_default, serde_by_name

BATCH_ROWS = 65_536


def _lenient(serde: Serde) -> Callable[[bytes], Any]:
    """``serde.deserialize``, with None for bytes it refuses (not UTF-8, a wrong length)."""
    deserialize = serde.deserialize

    def decode(b: bytes) -> Any:
        try:
            return deserialize(b)
        except ValueError:  # UnicodeDecodeError is one
            return None
    return decode


@dataclass(frozen=True)
class Decoded:
    """A decoded column: ``<side>_<suffix>``; bytes it cannot decode become null. ``wire``: the
    fixed-width big-endian format of an integer serde, decoded whole with numpy."""

    suffix: str
    ddl: str
    arrow: pa.DataType
    decode: Callable[[bytes], Any]
    wire: struct.Struct | None = None
    #: whether Arrow may cast the column whole (a UTF-8 string); not a framed one (schema id first)
    whole: bool = True


_DECODED = {
    StringSerde.name: Decoded("string", "STRING", pa.string(), _lenient(StringSerde())),
    IntSerde.name: Decoded("int", "INT", pa.int32(), _lenient(IntSerde()), IntSerde.wire),
    LongSerde.name: Decoded("long", "BIGINT", pa.int64(), _lenient(LongSerde()), LongSerde.wire),
    # the JSON text as written (the driver parses it into VARIANT)
    JsonSerde.name: Decoded("json", "STRING", pa.string(), _lenient(StringSerde())),
}


#: a registry's settings as a Layout holds them (hashable, picklable to the executors)
Registry = tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=8)
def _avro_decoder(registry: Registry) -> Callable[[bytes], Any]:
    """One registry client per executor process and registry (schemas cached by id)."""
    from instance.serde.schema_registry import avro_decoder

    return avro_decoder(dict(registry))


def _registry_json(serde: str, registry: Registry) -> Decoded | None:
    """The JSON text of a Schema Registry serde's values (instance/serde/schema_registry.py).
    JSON Schema needs no registry (the payload is the JSON); Avro needs its settings (else bytes
    only); Protobuf stays bytes (decoding needs the application's generated classes)."""
    from confluent_kafka.serialization import SerializationError

    from instance.serde.schema_registry import strip_frame

    if serde == "json-schema":
        def payload(b: bytes) -> str | None:
            try:
                return strip_frame(b).decode()
            except ValueError:  # UnicodeDecodeError is one
                return None
        return Decoded("json", "STRING", pa.string(), payload, whole=False)
    if serde != "avro" or not registry:
        return None

    def decode(b: bytes) -> str | None:
        try:  # a registry that cannot be reached fails the job: only bad bytes become null
            return json.dumps(_avro_decoder(registry)(b), separators=(",", ":"), default=json_default)
        except (SerializationError, ValueError):
            return None
    return Decoded("json", "STRING", pa.string(), decode, whole=False)


def decoded(serde: str, registry: Registry = ()) -> Decoded | None:
    """The decoded column of a serde named as the store catalog names it (None: bytes only);
    ``registry``: the Schema Registry settings for Avro values."""
    if serde in ("avro", "json-schema", "protobuf"):
        return _registry_json(serde, registry)
    try:
        name = serde_by_name(serde).name
    except ValueError:  # a custom serde
        return None
    return _DECODED.get(name)


def _decode_array(d: Decoded, raw: pa.Array, values: Sequence[bytes | None]) -> pa.Array:
    """Vectorized where Arrow can (UTF-8 check, fixed-width big-endian ints), else per value."""
    import pyarrow.compute as pc

    if d.whole and d.arrow == pa.string():
        try:
            return raw.cast(pa.string())
        except pa.ArrowInvalid:
            pass  # some value is not UTF-8: those become null below
    elif d.wire is not None:
        big = np.dtype(d.wire.format)  # ">i" -> big-endian int32, as the serde writes it
        native = big.newbyteorder("=")
        if len(raw) == raw.null_count or pc.all(pc.equal(pc.binary_length(raw), d.wire.size)).as_py():
            present = b"".join(x for x in values if x is not None)
            decoded_ = np.frombuffer(present, dtype=big).astype(native)
            if raw.null_count == 0:
                return pa.array(decoded_, d.arrow)
            mask = np.asarray(raw.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            full = np.zeros(len(raw), dtype=native)
            full[~mask] = decoded_
            return pa.array(full, d.arrow, mask=mask)
    dec = d.decode
    return pa.array([None if x is None else dec(x) for x in values], d.arrow)


@dataclass(frozen=True)
class Layout:
    """The columns of one store's rows as the executors emit them (``timestamp_ms``; the driver
    turns it into a TIMESTAMP and adds the VARIANT columns)."""

    key_serde: str
    value_serde: str
    #: instances source: one extra row per partition carries its read metadata (JSON), key null
    with_status: bool = False
    #: the Schema Registry settings Avro values are decoded with (``--config schema.registry.url=``)
    registry: Registry = ()

    def columns(self) -> list[tuple[str, str, pa.DataType]]:
        cols = [("key", "BINARY", pa.binary()), ("value", "BINARY", pa.binary())]
        for side, serde in (("key", self.key_serde), ("value", self.value_serde)):
            d = decoded(serde, self.registry)
            if d is not None:
                cols.append((f"{side}_{d.suffix}", d.ddl, d.arrow))
        cols += [("partition", "INT", pa.int32()), ("offset", "BIGINT", pa.int64()),
                 ("timestamp_ms", "BIGINT", pa.int64())]
        if self.with_status:
            cols.append(("status", "STRING", pa.string()))
        return cols

    def ddl(self) -> str:
        return ", ".join(f"`{n}` {t}" for n, t, _ in self.columns())

    def schema(self) -> pa.Schema:
        return pa.schema([(n, a) for n, _, a in self.columns()])

    def json_sides(self) -> list[str]:
        return [side for side, serde in (("key", self.key_serde), ("value", self.value_serde))
                if (d := decoded(serde, self.registry)) is not None and d.suffix == "json"]

    def batches(self, partition: int, keys: Sequence[bytes], values: Sequence[bytes | None],
                offsets: Sequence[int | None], timestamps: Sequence[int | None]) -> Iterator[pa.RecordBatch]:
        """Arrow batches of at most BATCH_ROWS rows (a value of None: a tombstone)."""
        schema = self.schema()
        kd, vd = decoded(self.key_serde, self.registry), decoded(self.value_serde, self.registry)
        for at in range(0, len(keys), BATCH_ROWS):
            k, v = keys[at:at + BATCH_ROWS], values[at:at + BATCH_ROWS]
            ka, va = pa.array(k, pa.binary()), pa.array(v, pa.binary())
            arrays: list[Any] = [ka, va]
            if kd is not None:
                arrays.append(_decode_array(kd, ka, k))
            if vd is not None:
                arrays.append(_decode_array(vd, va, v))
            arrays += [pa.array(np.full(len(k), partition, dtype=np.int32)),
                       pa.array(offsets[at:at + BATCH_ROWS], pa.int64()),
                       pa.array(timestamps[at:at + BATCH_ROWS], pa.int64())]
            if self.with_status:
                arrays.append(pa.nulls(len(k), pa.string()))
            yield pa.RecordBatch.from_arrays(arrays, schema=schema)

    def status_batch(self, partition: int, status_json: str) -> pa.RecordBatch:
        """The one row that carries a partition's read metadata (instances source)."""
        schema = self.schema()
        arrays = [pa.nulls(1, f.type) for f in schema]
        arrays[schema.get_field_index("partition")] = pa.array([partition], pa.int32())
        arrays[schema.get_field_index("status")] = pa.array([status_json], pa.string())
        return pa.RecordBatch.from_arrays(arrays, schema=schema)
