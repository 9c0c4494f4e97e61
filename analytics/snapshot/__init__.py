"""A consistent cluster-wide snapshot of an application's stores, built by a PySpark job.

``iqmesh snapshot`` / ``spark-submit analytics/snapshot/job.py``: see :mod:`analytics.snapshot.job`.
Modules: ``options`` (flags, errors), ``catalog`` (the application's published metadata), ``cut``
(the offsets a snapshot stands at), ``changelog`` and ``instances`` (the two sources), ``columns``
(row layout and decoding), ``output`` (temporary directory moved into place, manifest).
Importing this package imports neither pyspark nor confluent-kafka.
"""

from analytics.snapshot.options import SnapshotError, SnapshotOptions

__all__ = ["SnapshotError", "SnapshotOptions"]
