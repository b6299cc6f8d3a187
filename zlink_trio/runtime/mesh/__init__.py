"""Mesh: this node's side of the links to other nodes.

=====================  ==================================================================
``setup``              ``NetworkOptions`` (listen address, secret, TLS, endpoint, link
                       bound), and the transport's lifetime
``peers``              the directory of live nodes, links to them, replies by correlation
``retained``           terminal results of remote operations, for redeliveries
``remote_calls``       command 39 to another node; request/reply round trips
``inbound``            frames other nodes send to this node (39, 47, 48, 60, 61)
``remote_create``      remote User Spot creation: command 47, both sides
``remote_close``       closing a Spot another node owns: command 48, both sides
``link_reply``         ``LinkReply``: the command 20 of a request that came over a link
``remote_relocation``  planned relocation between nodes: command 60, both sides
``remote_operation``   an operator's relocate / drain asked of another node: command 61
``follow_routes``      the Message Follow routes of the Spots that moved away
``message_follow``     Message Follow: sending a message on after its Spot moved
=====================  ==================================================================
"""
