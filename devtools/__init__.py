"""Development tooling, not part of the runtime: the dev broker (``broker``), local clusters of
``iqmesh run`` processes (``cluster``) and ``iqmesh demo`` (``demo``)."""
