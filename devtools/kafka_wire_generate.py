"""Regenerate ``instance/kafka_wire/generated/`` from the message specs inside kafka-clients.

``python -m devtools.kafka_wire_generate`` resolves Apache Kafka ``SPEC_KAFKA_VERSION`` (Maven, once,
as the local broker does), reads ``common/message/<Name>.json`` from its ``kafka-clients`` jar and
writes one module per spec in ``SPECS``; ``--check`` only says whether the checked-in modules are
what the specs give (exit status 1 when not); ``--jar PATH`` reads another kafka-clients jar.
"""

from __future__ import annotations

import argparse
import os
import sys
import zipfile
from pathlib import Path

from instance.kafka_wire.codegen import generate_module, snake
from instance.kafka_wire.spec import parse_spec

#: the release whose specs the checked-in modules come from
SPEC_KAFKA_VERSION = "4.4.0"
#: the messages the runtime speaks (headers first); add a name and regenerate for another API
SPECS = (
    "RequestHeader", "ResponseHeader",
    "ApiVersionsRequest", "ApiVersionsResponse",
    "FindCoordinatorRequest", "FindCoordinatorResponse",
    "StreamsGroupHeartbeatRequest", "StreamsGroupHeartbeatResponse",
    "StreamsGroupDescribeRequest", "StreamsGroupDescribeResponse",
    "OffsetCommitRequest", "OffsetCommitResponse",
    "OffsetFetchRequest", "OffsetFetchResponse",
)
OUT = Path(__file__).resolve().parent.parent / "instance" / "kafka_wire" / "generated"


def cached_jar(version: str = SPEC_KAFKA_VERSION) -> Path | None:
    """The kafka-clients jar if Kafka ``version`` was resolved already (instance/local/kafka_broker.py's
    cache layout), without resolving it."""
    cache = Path(os.environ.get("IQMESH_CACHE") or Path.home() / ".cache" / "iqmesh")
    jar = cache / f"kafka-{version}" / "lib" / f"kafka-clients-{version}.jar"
    return jar if jar.is_file() and (jar.parent.parent / "resolved").is_file() else None


def resolved_jar(version: str = SPEC_KAFKA_VERSION) -> Path:
    """The kafka-clients jar of Kafka ``version``, resolved with Maven if needed."""
    from instance.local.kafka_broker import kafka_classpath

    return kafka_classpath(version) / f"kafka-clients-{version}.jar"


def render(jar: Path, version: str = SPEC_KAFKA_VERSION) -> dict[str, str]:
    """File name -> module text for every spec in ``SPECS``, plus the package's ``__init__``."""
    files: dict[str, str] = {}
    with zipfile.ZipFile(jar) as z:
        for name in SPECS:
            path = f"common/message/{name}.json"
            spec = parse_spec(z.read(path).decode())
            files[f"{snake(name)}.py"] = generate_module(spec, f"Apache Kafka {version}'s {path}")
    listing = "\n".join(f"    {snake(name)!r}," for name in SPECS)
    files["__init__.py"] = (
        f'"""Codecs generated from Apache Kafka {version}\'s message specs (devtools/kafka_wire_generate.py).\n\n'
        'Do not edit: regenerate (``python -m devtools.kafka_wire_generate``)."""\n\n'
        f'KAFKA_VERSION = "{version}"\n'
        f"MODULES = (\n{listing}\n)\n")
    return files


def differences(files: dict[str, str], out: Path = OUT) -> list[str]:
    """Names of the files in ``out`` that differ from ``files`` (or are missing, or are extra)."""
    have = {p.name for p in out.glob("*.py")} if out.is_dir() else set()
    changed = [n for n, text in files.items() if not (out / n).is_file() or (out / n).read_text() != text]
    return sorted(changed + sorted(have - set(files)))


def write(files: dict[str, str], out: Path = OUT) -> None:
    out.mkdir(exist_ok=True)
    for extra in {p.name for p in out.glob("*.py")} - set(files):
        (out / extra).unlink()
    for name, text in files.items():
        (out / name).write_text(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.kafka_wire_generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="only compare with the checked-in modules")
    parser.add_argument("--jar", type=Path, help="a kafka-clients jar (default: Kafka's, resolved with Maven)")
    args = parser.parse_args(argv)
    files = render(args.jar or resolved_jar())
    changed = differences(files)
    if args.check:
        if changed:
            print(f"generated codecs differ from the specs: {', '.join(changed)}", file=sys.stderr)
            return 1
        return 0
    write(files)
    print(f"wrote {len(files)} modules to {OUT} ({len(changed)} changed)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
