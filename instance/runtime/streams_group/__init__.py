"""A member of a Kafka streams group (``group.protocol=streams``, KIP-1071, Apache Kafka 4.2+).

Under this protocol the group coordinator assigns the tasks (active, standby, warm-up) from the
topology each member declares, creates the internal topics, and tells every member which
partitions each ``application.server`` endpoint serves. Modules: ``declaration`` (iqmesh's topology
as the protocol declares it), ``assignment`` (what the broker answered, as frozen values),
``status`` and ``errors`` (the broker's vocabulary as types), ``member`` (the heartbeat loop's
state), ``describe`` (StreamsGroupDescribe), ``broker_check`` (whether a broker offers it at all).
"""
