"""Run a rendered StatefulSet's pods as local processes, with the semantics Kubernetes documents
(``manifests``: the rendered objects, a pod's environment and command line)."""
