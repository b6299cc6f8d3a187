"""Actors: members of Entry and User Spots (docs/actors.md), on this node.

An Actor runs like a Spot -- an :class:`~zlink_trio.runtime.incarnation.incarnation
.Incarnation` of an :class:`~zlink_trio.runtime.declaration.spot_types.ActorType`, with
its own handlers, queue, turns and timers -- and its authority is an ACTOR record in the
Location Store that names its container. This wing adds what only Actors have:

- ``membership`` -- the ActorMembership chart's driver: create an Actor in a container
  on this node, join and leave (one fenced store step each), close, find and list
- ``manager``    -- ``node.actors`` / ``ctx.actors``: the public builders and methods
"""
