"""Java-style ``.properties`` files: what ``--config-file`` and the ``file`` config provider read."""

from __future__ import annotations

from pathlib import Path

from instance.errors import ConfigException


def load_properties_file(path: str | Path) -> dict[str, str]:
    """Read a Java-style ``.properties`` file (``name=value``, ``#`` comments)."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(Path(path).read_text().splitlines(), 1):
        s = line.strip()
        if not s or s.startswith(("#", "!")):
            continue
        sep = min((i for i in (s.find("="), s.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise ConfigException(f"{path}:{lineno}: expected name=value, got {line!r}")
        out[s[:sep].strip()] = s[sep + 1:].strip()
    return out
