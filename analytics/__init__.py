"""Analytics over an iqmesh application's state (the PySpark snapshot job: :mod:`analytics.snapshot`)."""
