"""Replication (issue 4): the mechanisms of seeds/replication.rst, relay.txt and
server-startup-with-replication.txt, named as the seeds name them.

    replica.py     ApplierState / RelayState (values are Tarantool's status strings)
                   and Replica, one peer of the replica set
    uri.py         replication URIs (user:password@host:port)
    replicaset.py  the replica set: replication_init, replicaset_connect/update,
                   bootstrap-leader choice, replicaset_follow/sync, orphan
    applier.py     the replica side of one upstream: connect, JOIN, FETCH_SNAPSHOT,
                   REGISTER, SUBSCRIBE, applying transactions, ACKs
    streams.py     the applier's connection: rows off the wire, transactions out of rows
    apply.py       what the applier applies: snapshot rows, replicated transactions
    relay.py       the master side of one downstream: initial/final join, subscribe
                   stream, heartbeats, ACK reader, WAL GC consumer
    master.py      box_process_join/subscribe/fetch_snapshot/register: the checks a
                   master makes before it hands a connection to a relay
    instance_api.py  ReplicationInstanceApi: what all of these use of the instance
                   (core/instance/box.py's Box, which replication never imports)

Wire codecs of the replication requests live in core/iproto/replication.py.
"""
