"""Python source for one message spec: a frozen dataclass per struct and its writer and reader.

Each struct gets ``_write_<struct>(w, v, version)`` and ``_read_<struct>(r, version)``; the message
module exposes ``encode``/``decode`` (bytes) and ``write``/``read`` (on a Writer/Reader, for
headers and bodies in one frame). Version checks are worked out here, so the generated code holds
only the comparisons a field needs within the versions the message is valid for. Semantics follow
Kafka's generator: fields in spec order; a field a version lacks must hold its default unless
``ignorable``; tagged fields travel only when they differ from their default; unknown tags are
skipped on reading.
"""

from __future__ import annotations

import base64
import json
import keyword
import re
import uuid
from dataclasses import dataclass
from enum import Enum

from instance.kafka_wire.errors import SpecError
from instance.kafka_wire.spec import FIXED, FieldSpec, FieldType, Kind, MessageSpec, StructSpec, Versions

_WRITE = {Kind.BOOL: "boolean", Kind.INT8: "int8", Kind.INT16: "int16", Kind.UINT16: "uint16", Kind.INT32: "int32",
          Kind.UINT32: "uint32", Kind.INT64: "int64", Kind.FLOAT64: "float64", Kind.UUID: "uuid"}
_PY = {Kind.BOOL: "bool", Kind.INT8: "int", Kind.INT16: "int", Kind.UINT16: "int", Kind.INT32: "int",
       Kind.UINT32: "int", Kind.INT64: "int", Kind.FLOAT64: "float", Kind.UUID: "uuid.UUID", Kind.STRING: "str",
       Kind.BYTES: "bytes", Kind.RECORDS: "bytes"}
_INT_RANGES = {Kind.INT8: (-(2**7), 2**7 - 1), Kind.INT16: (-(2**15), 2**15 - 1), Kind.UINT16: (0, 2**16 - 1),
               Kind.INT32: (-(2**31), 2**31 - 1), Kind.UINT32: (0, 2**32 - 1), Kind.INT64: (-(2**63), 2**63 - 1)}


def snake(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms`` (a Python keyword gets a trailing underscore)."""
    out = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()
    return out + "_" if keyword.iskeyword(out) else out


class Branch(Enum):
    """Whether a version range holds for every, no, or some of the versions possible at a point."""

    ALWAYS = "always"
    NEVER = "never"
    SOMETIMES = "sometimes"


def branch(vs: Versions, possible: Versions) -> tuple[Branch, str]:
    """How ``version in vs`` reads where ``version`` is known to be in ``possible``."""
    inside = vs.intersect(possible)
    if inside.empty:
        return Branch.NEVER, "False"
    if inside == possible:
        return Branch.ALWAYS, "True"
    if inside.low == possible.low:
        return Branch.SOMETIMES, f"version <= {inside.high}"
    if inside.high == possible.high:
        return Branch.SOMETIMES, f"version >= {inside.low}"
    return Branch.SOMETIMES, f"{inside.low} <= version <= {inside.high}"


def _union(a: Versions, b: Versions) -> Versions:
    if a.empty:
        return b
    if b.empty:
        return a
    if a.high + 1 < b.low or b.high + 1 < a.low:
        raise SpecError(f"versions {a} and {b} are not contiguous")
    return Versions(min(a.low, b.low), max(a.high, b.high))


@dataclass(frozen=True)
class _Field:
    """A field with what the generator works out about it."""

    spec: FieldSpec
    attr: str
    where: str
    untagged: Versions  # versions (within the possible ones) it travels in its place
    tagged: Versions    # versions (within the possible ones) it travels in the tagged section
    optional: bool      # its Python type admits None

    @property
    def type(self) -> FieldType:
        return self.spec.type


class _Source:
    """Lines of Python with an indentation level."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.level = 0

    def __call__(self, line: str = "") -> None:
        self.lines.append(("    " * self.level + line) if line else "")

    def indent(self) -> _Source:
        self.level += 1
        return self

    def dedent(self) -> None:
        self.level -= 1

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


class ModuleGenerator:
    """Writes the module of one message spec."""

    def __init__(self, spec: MessageSpec, source: str) -> None:
        self.spec = spec
        self.source = source
        self.structs = spec.structs()
        self.valid = spec.valid_versions
        self.uses_uuid = False
        self.uses_field = False
        self.out = _Source()

    # -- analysis ---------------------------------------------------------------------------------
    def _possible(self, struct: StructSpec) -> Versions:
        return struct.versions.intersect(self.valid)

    def _flexible(self, f: FieldSpec) -> Versions:
        return f.flexible_versions if f.flexible_versions is not None else self.spec.flexible_versions

    def _fields(self, struct: StructSpec) -> list[_Field]:
        possible = self._possible(struct)
        fields, attrs, tags = [], set(), set()
        for f in struct.fields:
            present = f.versions.intersect(possible)
            tagged = f.tagged_versions.intersect(present)
            untagged = Versions(present.low, min(present.high, f.tagged_versions.low - 1)) if f.tagged else present
            if not tagged.empty and not self.spec.flexible_versions.covers(tagged):
                raise SpecError(f"{struct.name}.{f.name}: tagged in versions {tagged} that are not flexible")
            if f.tagged:
                if f.tag in tags:
                    raise SpecError(f"{struct.name}.{f.name}: tag {f.tag} is used twice")
                tags.add(f.tag)
            _union(untagged, tagged)  # a field is in one place or the other, in one run of versions
            attr = snake(f.name)
            if attr in attrs:
                raise SpecError(f"{struct.name}: two fields are named {attr}")
            attrs.add(attr)
            optional = (not f.nullable_versions.empty or f.default == "null" or f.type.kind is Kind.RECORDS)
            fields.append(_Field(f, attr, f"{struct.name}.{f.name}", untagged, tagged, optional))
        return fields

    def _order(self) -> list[StructSpec]:
        """Structs before the structs that hold them (a default builds the inner struct)."""
        done: list[StructSpec] = []
        seen: set[str] = set()

        def visit(name: str) -> None:
            if name in seen:
                return
            seen.add(name)
            for f in self.structs[name].fields:
                if f.type.struct_name:
                    visit(f.type.struct_name)
            done.append(self.structs[name])

        visit(self.spec.name)
        return done

    # -- types and defaults -------------------------------------------------------------------------
    def _py_type(self, t: FieldType) -> str:
        if t.kind is Kind.ARRAY:
            assert t.element is not None
            return f"tuple[{self._py_type(t.element)}, ...]"
        if t.kind is Kind.STRUCT:
            return t.struct
        if t.kind is Kind.UUID:
            self.uses_uuid = True
        return _PY[t.kind]

    def _default(self, fd: _Field) -> str:
        """The field's default as a Python expression."""
        f, kind, raw = fd.spec, fd.type.kind, fd.spec.default
        if raw == "null":
            if f.nullable_versions.empty:
                raise SpecError(f"{fd.where}: default null but never nullable")
            return "None"
        raw = raw or ""
        if kind is Kind.BOOL:
            if raw.lower() not in ("", "true", "false"):
                raise SpecError(f"{fd.where}: bad boolean default {raw!r}")
            return "True" if raw.lower() == "true" else "False"
        if kind in _INT_RANGES:
            try:
                value = int(raw[2:], 16) if raw.lower().startswith("0x") else int(raw or "0", 10)
            except ValueError:
                raise SpecError(f"{fd.where}: bad integer default {raw!r}") from None
            low, high = _INT_RANGES[kind]
            if not low <= value <= high:
                raise SpecError(f"{fd.where}: default {value} out of range for {kind.value}")
            return str(value)
        if kind is Kind.FLOAT64:
            return repr(float(raw or "0"))
        if kind is Kind.STRING:
            return json.dumps(raw)
        if kind is Kind.UUID:
            if not raw:
                return "ZERO_UUID"
            return f"uuid.UUID({str(uuid.UUID(bytes=base64.urlsafe_b64decode(raw + '==')))!r})"
        if raw:
            raise SpecError(f"{fd.where}: a {kind.value} field cannot have a default")
        if kind is Kind.BYTES:
            return 'b""'
        if kind is Kind.RECORDS:
            return "None"
        if kind is Kind.ARRAY:
            return "()"
        return f"{fd.type.struct}()"

    def _differs(self, fd: _Field, value: str) -> str:
        """A test that ``value`` is not the field's default (singletons compared by identity)."""
        default = self._default(fd)
        if default in ("None", "True", "False"):
            return f"{value} is not {default}"
        return f"{value} != {default}"

    # -- module ----------------------------------------------------------------------------------------
    def generate(self) -> str:
        body = _Source()
        self.out = body
        for struct in self._order():
            self._dataclass(struct)
        for struct in self._order():
            self._writer(struct)
            self._reader(struct)
        self._entry_points()
        head = _Source()
        kind = self.spec.type
        key = f" (API key {self.spec.api_key})" if self.spec.api_key is not None else ""
        head(f'"""{self.spec.name}{key}: codecs generated by devtools.kafka_wire_generate')
        head(f"from {self.source}.")
        head()
        head('Do not edit: regenerate (``python -m devtools.kafka_wire_generate``)."""')
        head()
        head("from __future__ import annotations")
        head()
        if self.uses_uuid:
            head("import uuid")
        head(f"from dataclasses import dataclass{', field' if self.uses_field else ''}")
        head()
        text = "\n".join(body.lines)
        names = [n for n in ("ZERO_UUID", "Reader", "Writer", "lost", "null_read", "null_written",
                             "unsupported_version") if re.search(rf"\b{n}\b", text)]
        head(f"from instance.kafka_wire.primitives import {', '.join(names)}")
        head()
        head(f'MESSAGE_TYPE = "{kind}"')
        head(f"API_KEY = {self.spec.api_key}")
        head(f"VALID_VERSIONS = ({self.valid.low}, {self.valid.high})")
        flexible = self.spec.flexible_versions
        head(f"FLEXIBLE_VERSIONS = {None if flexible.empty else (flexible.low, flexible.high)}")
        return head.text() + body.text()

    def _dataclass(self, struct: StructSpec) -> None:
        o = self.out
        o()
        o()
        o("@dataclass(frozen=True)")
        o(f"class {struct.name}:")
        o.indent()
        o(f'"""{struct.name}, valid in versions {self._possible(struct)}."""')
        o()
        for fd in self._fields(struct):
            py = self._py_type(fd.type) + (" | None" if fd.optional else "")
            default = self._default(fd)
            if fd.type.kind is Kind.STRUCT and default != "None":
                self.uses_field = True
                o(f"{fd.attr}: {py} = field(default_factory={fd.type.struct})")
            else:
                o(f"{fd.attr}: {py} = {default}")
        o.dedent()

    # -- writing -----------------------------------------------------------------------------------------
    def _compact(self, f: FieldSpec, versions: Versions) -> str:
        return branch(self._flexible(f), versions)[1]

    def _write_element(self, t: FieldType, value: str, compact: str, where: str, writer: str) -> str:
        kind = t.kind
        if kind in FIXED:
            return f"{writer}.{_WRITE[kind]}({value})"
        if kind is Kind.STRING:
            return f"{writer}.string({value}, {compact})"
        if kind in (Kind.BYTES, Kind.RECORDS):
            return f"{writer}.byte_array({value}, {compact})"
        if kind is Kind.STRUCT:
            return f"_write_{snake(t.struct)}({writer}, {value}, version)"
        raise SpecError(f"{where}: cannot write {kind.value} here")

    def _write_value(self, fd: _Field, value: str, versions: Versions, writer: str = "w") -> None:
        """Write ``value`` of ``fd`` for ``version`` in ``versions`` (in its place or as a tagged value)."""
        o, t, f = self.out, fd.type, fd.spec
        compact = self._compact(f, versions)
        nullable, nullable_expr = branch(f.nullable_versions, versions)
        if fd.optional and t.kind not in FIXED:
            o(f"if {value} is None:")
            o.indent()
            if nullable is Branch.NEVER:
                o(f'raise null_written("{fd.where}", version)')
            else:
                if nullable is Branch.SOMETIMES:
                    o(f"if not ({nullable_expr}):")
                    o.indent()(f'raise null_written("{fd.where}", version)')
                    o.dedent()
                if t.kind is Kind.STRUCT:
                    o(f"{writer}.int8(-1)")
                else:
                    short = ", short=True" if t.kind is Kind.STRING else ""
                    o(f"{writer}.length(None, {compact}{short})")
            o.dedent()
            o("else:")
            o.indent()
        if t.kind is Kind.ARRAY:
            assert t.element is not None
            item = f"e_{fd.attr}"
            o(f"{writer}.length(len({value}), {compact})")
            o(f"for {item} in {value}:")
            o.indent()(self._write_element(t.element, item, compact, fd.where, writer))
            o.dedent()
        elif t.kind is Kind.STRUCT:
            if nullable is Branch.ALWAYS:
                o(f"{writer}.int8(1)")
            elif nullable is Branch.SOMETIMES:
                o(f"if {nullable_expr}:")
                o.indent()(f"{writer}.int8(1)")
                o.dedent()
            o(f"_write_{snake(t.struct)}({writer}, {value}, version)")
        else:
            o(self._write_element(t, value, compact, fd.where, writer))
        if fd.optional and t.kind not in FIXED:
            o.dedent()

    def _writer(self, struct: StructSpec) -> None:
        o = self.out
        possible = self._possible(struct)
        fields = self._fields(struct)
        o()
        o()
        o(f"def _write_{snake(struct.name)}(w: Writer, v: {struct.name}, version: int) -> None:")
        o.indent()
        flexible, flexible_expr = branch(self.spec.flexible_versions, possible)
        tagged = [fd for fd in fields if not fd.tagged.empty]
        if flexible is not Branch.NEVER and tagged:
            o("tagged: list[tuple[int, bytes]] = []")
        wrote = False
        for fd in fields:
            value = f"v.{fd.attr}"
            present, present_expr = branch(fd.untagged, possible)
            anywhere, anywhere_expr = branch(_union(fd.untagged, fd.tagged), possible)
            check_lost = not fd.spec.ignorable and anywhere is not Branch.ALWAYS
            if present is Branch.ALWAYS:
                self._write_value(fd, value, fd.untagged)
                wrote = True
            elif present is Branch.SOMETIMES:
                o(f"if {present_expr}:")
                o.indent()
                self._write_value(fd, value, fd.untagged)
                o.dedent()
                wrote = True
            if check_lost:
                cond = "" if anywhere is Branch.NEVER else f"not ({anywhere_expr}) and "
                o(f"if {cond}{self._differs(fd, value)}:")
                o.indent()(f'raise lost("{fd.where}", version)')
                o.dedent()
                wrote = True
        for fd in tagged:
            value = f"v.{fd.attr}"
            when, when_expr = branch(fd.tagged, possible)
            cond = "" if when is Branch.ALWAYS else f"{when_expr} and "
            o(f"if {cond}{self._differs(fd, value)}:")
            o.indent()
            o("t = Writer()")
            self._write_value(fd, value, fd.tagged, writer="t")
            o(f"tagged.append(({fd.spec.tag}, t.getvalue()))")
            o.dedent()
        section = "w.tagged_fields(tagged)" if tagged else "w.tagged_fields(())"
        if flexible is Branch.ALWAYS:
            o(section)
        elif flexible is Branch.SOMETIMES:
            o(f"if {flexible_expr}:")
            o.indent()(section)
            o.dedent()
        elif not wrote:
            o("return")
        o.dedent()

    # -- reading -----------------------------------------------------------------------------------------
    def _read_element(self, t: FieldType, compact: str, where: str, reader: str) -> str:
        kind = t.kind
        if kind in FIXED:
            return f"{reader}.{_WRITE[kind]}()"
        if kind is Kind.STRING:
            return f'{reader}.required_string({compact}, "{where}")'
        if kind is Kind.BYTES:
            return f'{reader}.required_byte_array({compact}, "{where}")'
        if kind is Kind.STRUCT:
            return f"_read_{snake(t.struct)}({reader}, version)"
        raise SpecError(f"{where}: cannot read {kind.value} here")

    def _read_value(self, fd: _Field, target: str, versions: Versions, reader: str = "r") -> None:
        o, t, f = self.out, fd.type, fd.spec
        compact = self._compact(f, versions)
        nullable, nullable_expr = branch(f.nullable_versions, versions)
        if t.kind is Kind.RECORDS:
            nullable, nullable_expr = Branch.ALWAYS, "True"
        if t.kind in FIXED:
            o(f"{target} = {self._read_element(t, compact, fd.where, reader)}")
        elif t.kind is Kind.STRUCT:
            inner = f"_read_{snake(t.struct)}({reader}, version)"
            if nullable is Branch.NEVER:
                o(f"{target} = {inner}")
            else:
                guard = "" if nullable is Branch.ALWAYS else f"({nullable_expr}) and "
                o(f"{target} = None if {guard}{reader}.int8() < 0 else {inner}")
        elif t.kind is Kind.ARRAY:
            assert t.element is not None
            element = self._read_element(t.element, compact, fd.where, reader)
            if nullable is Branch.NEVER:
                o(f'n_{fd.attr} = {reader}.required_array_length({compact}, "{fd.where}")')
                o(f"{target} = tuple(")
                o.indent()(f"{element} for _ in range(n_{fd.attr}))")
                o.dedent()
            else:
                n = f"n_{fd.attr}"
                o(f"{n} = {reader}.array_length({compact})")
                if nullable is Branch.SOMETIMES:
                    o(f"if {n} is None and not ({nullable_expr}):")
                    o.indent()(f'raise null_read("{fd.where}")')
                    o.dedent()
                o(f"{target} = None if {n} is None else tuple(")
                o.indent()(f"{element} for _ in range({n}))")
                o.dedent()
        else:
            name = "string" if t.kind is Kind.STRING else "byte_array"
            if nullable is Branch.NEVER:
                o(f'{target} = {reader}.required_{name}({compact}, "{fd.where}")')
            else:
                o(f"{target} = {reader}.{name}({compact})")
                if nullable is Branch.SOMETIMES:
                    o(f"if {target} is None and not ({nullable_expr}):")
                    o.indent()(f'raise null_read("{fd.where}")')
                    o.dedent()

    def _reader(self, struct: StructSpec) -> None:
        o = self.out
        possible = self._possible(struct)
        fields = self._fields(struct)
        o()
        o()
        o(f"def _read_{snake(struct.name)}(r: Reader, version: int) -> {struct.name}:")
        o.indent()
        for fd in fields:
            target = f"f_{fd.attr}"
            present, present_expr = branch(fd.untagged, possible)
            if present is Branch.ALWAYS:
                self._read_value(fd, target, fd.untagged)
            elif present is Branch.SOMETIMES:
                o(f"if {present_expr}:")
                o.indent()
                self._read_value(fd, target, fd.untagged)
                o.dedent()
                o("else:")
                o.indent()(f"{target} = {self._default(fd)}")
                o.dedent()
            else:
                py = self._py_type(fd.type) + (" | None" if fd.optional else "")
                o(f"{target}: {py} = {self._default(fd)}")
        flexible, flexible_expr = branch(self.spec.flexible_versions, possible)
        tagged = [fd for fd in fields if not fd.tagged.empty]
        if flexible is not Branch.NEVER:
            if flexible is Branch.SOMETIMES:
                o(f"if {flexible_expr}:")
                o.indent()
            if tagged:
                o("for tag, data in r.tagged_fields():")
                o.indent()
                for i, fd in enumerate(tagged):
                    when, when_expr = branch(fd.tagged, possible.intersect(self.spec.flexible_versions))
                    cond = "" if when is Branch.ALWAYS else f" and {when_expr}"
                    o(f"{'if' if i == 0 else 'elif'} tag == {fd.spec.tag}{cond}:")
                    o.indent()("t = Reader(data)")
                    self._read_value(fd, f"f_{fd.attr}", fd.tagged, reader="t")
                    o.dedent()
                o.dedent()
            else:
                o("r.tagged_fields()  # none known here: skipped")
            if flexible is Branch.SOMETIMES:
                o.dedent()
        if not fields:
            o(f"return {struct.name}()")
        else:
            o(f"return {struct.name}(")
            o.indent()
            for fd in fields:
                o(f"{fd.attr}=f_{fd.attr},")
            o.dedent()
            o(")")
        o.dedent()

    def _entry_points(self) -> None:
        o, name, fn = self.out, self.spec.name, snake(self.spec.name)
        o()
        o()
        o(f"def write(w: Writer, message: {name}, version: int) -> None:")
        o.indent()('"""Append ``message`` encoded in ``version`` to ``w``."""')
        o("_check_version(version)")
        o(f"_write_{fn}(w, message, version)")
        o.dedent()
        o()
        o()
        o(f"def read(r: Reader, version: int) -> {name}:")
        o.indent()(f'"""Read a {name} of ``version`` from ``r``."""')
        o("_check_version(version)")
        o(f"return _read_{fn}(r, version)")
        o.dedent()
        o()
        o()
        o(f"def encode(message: {name}, version: int) -> bytes:")
        o.indent()("w = Writer()")
        o("write(w, message, version)")
        o("return w.getvalue()")
        o.dedent()
        o()
        o()
        o(f"def decode(data: bytes, version: int) -> {name}:")
        o.indent()("return read(Reader(data), version)")
        o.dedent()
        o()
        o()
        o("def _check_version(version: int) -> None:")
        o.indent()("if not VALID_VERSIONS[0] <= version <= VALID_VERSIONS[1]:")
        o.indent()(f'raise unsupported_version("{name}", version)')
        o.dedent()
        o.dedent()


def generate_module(spec: MessageSpec, source: str) -> str:
    """The Python module for ``spec``; ``source`` says where the spec came from (in the docstring)."""
    return ModuleGenerator(spec, source).generate()
