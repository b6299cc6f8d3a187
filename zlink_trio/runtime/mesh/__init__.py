"""Mesh: this node's side of the links to other nodes, and what travels on them.

Below the coordinators: the coordinators send through these modules (a call as command
39, an operation's frame as a round trip, a reply as command 20, a message along its
Message Follow route), and the frames other nodes send are handed up to
``coordinators.inbound``.  Nothing here takes the whole node: a function gets the
``NodeState`` and the :class:`~.peers.Peers` it uses.

=====================  ==================================================================
``setup``              ``NetworkOptions`` (listen address, secret, TLS, endpoint, link
                       bound), and the transport's lifetime
``peers``              the directory of live nodes, links to them, replies by correlation
``retained``           terminal results of remote operations, for redeliveries
``remote_calls``       command 39 to another node; request/reply round trips
``link_reply``         ``LinkReply``: the command 20 of a request that came over a link
``follow_routes``      the Message Follow routes of the Spots that moved away
``message_follow``     Message Follow: sending a message on after its Spot moved
=====================  ==================================================================
"""
