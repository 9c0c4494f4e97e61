"""What users see while the StatefulSet changes under load (``python -m loadtest.scenarios
--help``): the rendered dev overlay run by loadtest.k8s_sim on the dev broker or Apache Kafka,
ingest flowing, loadtest.loadgen querying, and one action per scenario: none (steady), a
rolling update, scale 3 -> 5 -> 3, a pod killed (-9), a node lost with its volume.

ingest.py    the input at a steady rate, and the truth (word counts of acknowledged lines)
observe.py   the routing table (settled?), the counts at the end, records restored
run.py       one scenario: cluster up, load and ingest on, the action, the measurements
report.py    the Markdown table of the results
"""

SCENARIOS = ("steady", "rolling-update", "scale", "kill", "node-lost")
