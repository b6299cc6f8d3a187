"""The chat-rooms sample: users are Actors, rooms are User Spots (docs/actors.md).

Run ``python -m zlink_trio.samples.chatrooms``: three nodes in one process share a
SQLite store and talk over loopback links; each serves an HTTP edge. Users connect to
any edge and become Actors on that node's Entry Spot, then join a room (a User Spot,
wherever it lives: the user moves there) and post; the room hands every post to each
of its members. Halfway through, one node is drained: its rooms move while posts keep
coming -- a room with its members in one commit (SpotWide), a hall first and then each
member after it (PerActor). The runner prints
``chatrooms=completed`` only when every member holds every post of its room, once
each and in order.

Modules, one concept each:

- ``chat``   -- the messages, the ``ChatUser`` Actor, the ``ChatRoom`` User Spot (SpotWide)
  and the ``ChatHall`` (PerActor)
- ``edge``   -- a node's HTTP edge (Starlette on Hypercorn's Trio worker)
- ``runner`` -- the three nodes, the traffic, the drain and the self-check
- ``node_main`` -- one node as its own process (``... chatrooms node NAME``), for
  multi-process runs
- ``__main__`` -- ``python -m zlink_trio.samples.chatrooms [node ...]``

It uses the public API only (``import zlink_trio as zl``).
"""
