"""Where a snapshot is written: a temporary sibling of ``--out``, moved into place only when every
store and the manifest are written, so a failed run never leaves a half snapshot (and never
touches the previous one). Paths go through Hadoop's FileSystem API (the JVM Spark already runs),
so ``--out`` may be local, ``hdfs:`` or ``s3a:`` alike, as a job on a cluster needs.

Replacing an earlier snapshot is two renames (old aside, new in) and a delete: a reader between
the renames finds no snapshot, never a mixed one. A directory that is not a snapshot (no
``manifest.json``) is never replaced.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

from analytics.snapshot.options import SnapshotError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

MANIFEST = "manifest.json"


class SnapshotDir:
    def __init__(self, spark: SparkSession, out: str) -> None:
        jvm: Any = spark._jvm
        self._path_cls = jvm.org.apache.hadoop.fs.Path
        self.final = self._path_cls(out.rstrip("/") or "/")
        self.fs = self.final.getFileSystem(spark._jsc.hadoopConfiguration())
        if self.fs.exists(self.final) and not self.fs.exists(self._path_cls(self.final, MANIFEST)):
            raise SnapshotError(f"refusing to replace {out}: it exists and is not a snapshot (no {MANIFEST})")
        self.tmp = self._path_cls(f"{self.final.toString()}.tmp-{uuid.uuid4().hex[:12]}")
        if not self.fs.mkdirs(self.tmp):
            raise SnapshotError(f"cannot create {self.tmp.toString()}")
        self.committed = False

    def path(self, name: str) -> str:
        """Where to write ``name`` (a store's dataset) before the move."""
        return str(self._path_cls(self.tmp, name).toString())

    def write_text(self, name: str, text: str) -> None:
        stream = self.fs.create(self._path_cls(self.tmp, name), True)
        try:
            stream.write(bytearray(text.encode()))
        finally:
            stream.close()

    def commit(self) -> None:
        """Move the finished snapshot into place (replacing an earlier one)."""
        old = None
        if self.fs.exists(self.final):
            old = self._path_cls(f"{self.final.toString()}.old-{uuid.uuid4().hex[:12]}")
            if not self.fs.rename(self.final, old):
                raise SnapshotError(f"cannot move the previous snapshot {self.final.toString()} aside")
        if not self.fs.rename(self.tmp, self.final):
            if old is not None:
                self.fs.rename(old, self.final)
            raise SnapshotError(f"cannot move {self.tmp.toString()} to {self.final.toString()}")
        self.committed = True
        if old is not None:
            self.fs.delete(old, True)

    def abort(self) -> None:
        if not self.committed:
            self.fs.delete(self.tmp, True)


def read_text(spark: SparkSession, path: str) -> str:
    """A small text file on any Hadoop path (a previous manifest)."""
    rows = spark.read.text(path, wholetext=True).collect()
    if not rows:
        raise FileNotFoundError(path)
    return str(rows[0][0])
