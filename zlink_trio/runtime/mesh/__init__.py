"""Mesh: this node's side of the links to other nodes.

=====================  ==================================================================
``setup``              listen address, secret, and the transport's lifetime
``peers``              the directory of live nodes, links to them, replies by correlation
``retained``           terminal results of remote operations, for redeliveries
``remote_calls``       command 39 to another node; request/reply round trips
``inbound``            frames other nodes send to this node's Spots (39, 47, 48)
``remote_create``      remote User Spot creation: command 47, both sides
``remote_close``       closing a Spot another node owns: command 48, both sides
=====================  ==================================================================
"""
