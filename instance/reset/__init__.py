"""``iqmesh reset``: Kafka's ``kafka-streams-application-reset`` for an iqmesh application, plus the
local state directories (Kafka Streams' ``cleanUp()``).

positions.py (where input offsets go: the ``--to-*`` / ``--shift-by`` / ``--by-duration`` rules),
internal.py (which topics are the application's own), group.py (the group's members: refuse or
remove), offsets.py (partitions, offsets and commits through the admin client), state_dirs.py (the
local state), resetter.py (the plan, then its application), errors.py (ResetError: the CODE and
message of the command's error line). The command line is iqmesh/reset.py. Imports nothing here.
"""
