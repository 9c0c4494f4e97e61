"""Run a rendered StatefulSet's pods as local processes, with the semantics Kubernetes documents
(``python -m loadtest.k8s_sim smoke --overlay dev``).

manifests.py   the rendered objects; a pod's environment and command line as the kubelet builds them
volumes.py     ConfigMap/Secret volumes written out, a claim directory per pod that outlives it
network.py     bridge, a network namespace per pod (pause process), /etc/hosts as cluster DNS
probes.py      grpc / tcpSocket / httpGet / exec probes with the spec's timing
pod.py         one pod's kubelet: start, restart with back-off, probes, SIGTERM then SIGKILL
statefulset.py the controller: ordinals, Parallel/OrderedReady, rolling update, PDB, Services
namespace.py   the private user/net/mount/pid namespaces everything runs in
smoke.py       the smoke run on a dev broker: steps, counts exact after each
"""
