"""The ``iqmesh`` command, one module per command group (``main`` puts them together).

Importing this package imports nothing: ``python -m iqmesh.health_probe``, run by the
kubelet every few seconds, pays only for what it uses.
"""
