"""Kafka's JSON message specs (``common/message/*.json`` in kafka-clients) read into frozen values.

The format, as Kafka's message README and its generator define it: a message has ``validVersions``
and ``flexibleVersions`` (from which on strings, bytes and arrays are compact and every struct ends
with tagged fields); each field has ``versions`` it is present in, optional ``nullableVersions``,
``taggedVersions`` with a ``tag`` (then it travels in the tagged section, omitted when it holds its
default), a ``default``, ``ignorable`` (may be dropped silently by a version that lacks it) and, for
strings and bytes only, a ``flexibleVersions`` override. Struct fields either define their fields
inline or name one of the message's ``commonStructs``. The files allow ``//`` comments.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from enum import Enum
from typing import Any

from instance.kafka_wire.errors import SpecError

#: "N+" ends at the highest version a 16-bit version number can take
OPEN_END = 0x7FFF


@dataclass(frozen=True)
class Versions:
    """An inclusive range of versions; empty when ``high < low``."""

    low: int
    high: int

    @staticmethod
    def parse(text: str | None, default: Versions | None = None) -> Versions:
        """``"3"``, ``"1-4"``, ``"2+"`` or ``"none"``; None gives ``default`` (an error without one)."""
        if text is None:
            if default is None:
                raise SpecError("a version range is required here")
            return default
        text = str(text).strip()
        if text == "none":
            return NONE
        try:
            if text.endswith("+"):
                return Versions(int(text[:-1]), OPEN_END)
            low, sep, high = text.partition("-")
            return Versions(int(low), int(high) if sep else int(low))
        except ValueError:
            raise SpecError(f"not a version range: {text!r}") from None

    @property
    def empty(self) -> bool:
        return self.high < self.low

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    def intersect(self, other: Versions) -> Versions:
        return Versions(max(self.low, other.low), min(self.high, other.high))

    def covers(self, other: Versions) -> bool:
        """Every version of ``other`` is in this range (an empty ``other`` is covered)."""
        return other.empty or (self.low <= other.low and other.high <= self.high)

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.high == OPEN_END:
            return f"{self.low}+"
        return str(self.low) if self.low == self.high else f"{self.low}-{self.high}"


NONE = Versions(0, -1)


class Kind(Enum):
    """The spec's field types."""

    BOOL = "bool"
    INT8 = "int8"
    INT16 = "int16"
    UINT16 = "uint16"
    INT32 = "int32"
    UINT32 = "uint32"
    INT64 = "int64"
    FLOAT64 = "float64"
    STRING = "string"
    BYTES = "bytes"
    UUID = "uuid"
    RECORDS = "records"
    STRUCT = "struct"
    ARRAY = "array"


#: the fixed-size types: never null, never length-prefixed
FIXED = frozenset({Kind.BOOL, Kind.INT8, Kind.INT16, Kind.UINT16, Kind.INT32, Kind.UINT32, Kind.INT64,
                   Kind.FLOAT64, Kind.UUID})
_PRIMITIVES = {k.value: k for k in Kind if k not in (Kind.STRUCT, Kind.ARRAY)}


@dataclass(frozen=True)
class FieldType:
    """A field's type: a primitive, a struct (by name) or an array of either."""

    kind: Kind
    struct: str = ""
    element: FieldType | None = None

    @staticmethod
    def parse(text: str) -> FieldType:
        if text.startswith("[]"):
            element = FieldType.parse(text[2:])
            if element.kind is Kind.ARRAY:
                raise SpecError(f"nested arrays are not allowed: {text}")
            return FieldType(Kind.ARRAY, element=element)
        if text in _PRIMITIVES:
            return FieldType(_PRIMITIVES[text])
        if not re.fullmatch(r"[A-Z][A-Za-z0-9]*", text):
            raise SpecError(f"unknown field type {text!r}")
        return FieldType(Kind.STRUCT, struct=text)

    @property
    def struct_name(self) -> str:
        """The struct this type is or holds, else ``""``."""
        if self.kind is Kind.ARRAY and self.element is not None:
            return self.element.struct
        return self.struct

    @property
    def nullable_kind(self) -> bool:
        """Whether the spec may declare it nullable (never a fixed-size type)."""
        return self.kind not in FIXED


@dataclass(frozen=True)
class FieldSpec:
    """One field of a struct, as the spec declares it."""

    name: str
    type: FieldType
    versions: Versions
    nullable_versions: Versions = NONE
    tagged_versions: Versions = NONE
    tag: int | None = None
    default: str | None = None
    ignorable: bool = False
    flexible_versions: Versions | None = None
    fields: tuple[FieldSpec, ...] = ()

    @property
    def tagged(self) -> bool:
        return self.tag is not None


@dataclass(frozen=True)
class StructSpec:
    """A struct: the message itself, an inline struct of a field, or a common struct."""

    name: str
    versions: Versions
    fields: tuple[FieldSpec, ...]


@dataclass(frozen=True)
class MessageSpec:
    """One spec file: a request, a response or a header."""

    name: str
    type: str
    api_key: int | None
    valid_versions: Versions
    flexible_versions: Versions
    fields: tuple[FieldSpec, ...]
    common_structs: tuple[StructSpec, ...] = ()

    @property
    def root(self) -> StructSpec:
        return StructSpec(self.name, self.valid_versions, self.fields)

    def structs(self) -> dict[str, StructSpec]:
        """Every struct the message uses by name (the message itself first, then in order of
        appearance), inline and common; one name stands for one struct."""
        found: dict[str, StructSpec] = {self.name: self.root}
        known = {s.name: s for s in self.common_structs}

        def define(fields: tuple[FieldSpec, ...]) -> None:
            for f in fields:
                if f.fields:
                    struct = StructSpec(f.type.struct_name, f.versions, f.fields)
                    if known.get(struct.name, struct) != struct:
                        raise SpecError(f"{self.name}: struct {struct.name} is defined twice")
                    known[struct.name] = struct
                    define(f.fields)

        def visit(fields: tuple[FieldSpec, ...]) -> None:
            for f in fields:
                name = f.type.struct_name
                if not name or name in found:
                    continue
                if name not in known:
                    raise SpecError(f"{self.name}: field {f.name} has type {name}, which is neither defined "
                                    "inline nor a common struct")
                found[name] = known[name]
                visit(known[name].fields)

        for s in self.common_structs:
            define(s.fields)
        define(self.fields)
        visit(self.fields)
        return found


# -- reading -----------------------------------------------------------------------------------------

_KNOWN_FIELD_KEYS = frozenset({"name", "type", "versions", "nullableVersions", "taggedVersions", "tag", "default",
                               "ignorable", "flexibleVersions", "fields", "about", "entityType", "mapKey",
                               "zeroCopy"})


def strip_comments(text: str) -> str:
    """The JSON without ``//`` comments (kept inside strings)."""
    out: list[str] = []
    i, n, in_string = 0, len(text), False
    while i < n:
        c = text[i]
        if in_string:
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif c == "/" and text.startswith("//", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _default(raw: Any) -> str | None:
    """Defaults are strings in the spec, sometimes written as JSON numbers or booleans."""
    if raw is None:
        return None
    if isinstance(raw, bool):
        return "true" if raw else "false"
    return str(raw)


def _field(raw: dict[str, Any], owner: str) -> FieldSpec:
    unknown = set(raw) - _KNOWN_FIELD_KEYS
    if unknown:
        raise SpecError(f"{owner}: field {raw.get('name')} has keys this generator does not know: {sorted(unknown)}")
    name = str(raw["name"])
    tagged = Versions.parse(raw.get("taggedVersions"), NONE)
    versions = Versions.parse(raw.get("versions"), None if tagged.empty else tagged)
    ftype = FieldType.parse(str(raw["type"]))
    nullable = Versions.parse(raw.get("nullableVersions"), NONE)
    if not nullable.empty and not ftype.nullable_kind:
        raise SpecError(f"{owner}.{name}: a {ftype.kind.value} cannot be nullable")
    tag = raw.get("tag")
    if (tag is None) != tagged.empty:
        raise SpecError(f"{owner}.{name}: tag and taggedVersions go together")
    if tag is not None and not versions.covers(tagged):
        raise SpecError(f"{owner}.{name}: taggedVersions {tagged} outside versions {versions}")
    flexible = raw.get("flexibleVersions")
    if flexible is not None and ftype.kind not in (Kind.STRING, Kind.BYTES):
        raise SpecError(f"{owner}.{name}: only strings and bytes may override flexibleVersions")
    fields = tuple(_field(f, f"{owner}.{name}") for f in raw.get("fields") or ())
    if fields and not ftype.struct_name:
        raise SpecError(f"{owner}.{name}: only struct and struct-array fields have fields")
    return FieldSpec(name=name, type=ftype, versions=versions, nullable_versions=nullable, tagged_versions=tagged,
                     tag=None if tag is None else int(tag), default=_default(raw.get("default")),
                     ignorable=bool(raw.get("ignorable", False)),
                     flexible_versions=None if flexible is None else Versions.parse(flexible), fields=fields)


def parse_spec(text: str) -> MessageSpec:
    """One spec file's text (comments allowed) as a MessageSpec."""
    try:
        raw = json.loads(strip_comments(text))
    except json.JSONDecodeError as e:
        raise SpecError(f"not a JSON message spec: {e}") from e
    name = str(raw["name"])
    api_key = raw.get("apiKey")
    common = tuple(
        StructSpec(str(s["name"]), Versions.parse(s.get("versions")),
                   tuple(_field(f, f"{name}.{s['name']}") for f in s.get("fields") or ()))
        for s in raw.get("commonStructs") or ())
    return MessageSpec(name=name, type=str(raw.get("type", "")), api_key=None if api_key is None else int(api_key),
                       valid_versions=Versions.parse(raw.get("validVersions")),
                       flexible_versions=Versions.parse(raw.get("flexibleVersions"), NONE),
                       fields=tuple(_field(f, name) for f in raw.get("fields") or ()), common_structs=common)
