"""The enumerated values of the frame header and bodies: command, route kind, results.

Theory of operation
-------------------
Every frame's fourth byte is a :class:`Command`; command 39 carries a
:class:`RouteKind`, command 61 a :class:`NodeAction`, command 20 a
:class:`TerminalResult` and, after 47, a
:class:`WireCreateState`. They are :class:`IntEnum` values whose numbers are
the wire bytes: a number keeps its meaning for good and a retired one is not
reused (``docs/wire.md``, "Versioning"). Decoding refuses a number that is not
a member with :class:`RemoteProtocolError` (:func:`zlink_trio.wire.frames.decode`
and :mod:`zlink_trio.wire._frame_layouts`).

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = ("Command", "NodeAction", "RouteKind", "TerminalResult", "WireCreateState")


class Command(IntEnum):
    """The command byte of the frame header.

    20, 39, 47 and 48 are the protocol's Spot commands (docs/wire.md); 1..5
    are zlink_trio's own handshake and keepalive commands, 60 and 62 its own
    planned-relocation handover and the end of its relay, 61 its own operator request.
    """

    #: Server -> client, first frame on a link: the server's nonce.
    CHALLENGE = 1
    #: Client -> server: who the client is, its nonce and its MAC over the challenge.
    HELLO = 2
    #: Server -> client: who the server is, its nonce and its MAC over the transcript.
    WELCOME = 3
    #: Keepalive probe; the peer answers with PONG carrying the same token.
    PING = 4
    #: Keepalive answer.
    PONG = 5
    #: The terminal reply to a 39 request, 47, 48 or 60.
    REPLY = 20
    #: A Spot message: direct call, cold-activation envelope or Message Follow relay
    #: (``statecharts.cold_activation`` step 8; docs/concepts.md, "Message Follow").
    SPOT_MESSAGE = 39
    #: Remote User Spot creation.
    USER_SPOT_CREATE = 47
    #: Remote User Spot close.
    USER_SPOT_CLOSE = 48
    #: Planned relocation: the source asks the target to take a sealed Spot over.
    RELOCATE_SPOT = 60
    #: An operator request to a node: relocate a Spot it owns, drain or undrain
    #: (``NodeAction``).
    NODE_OPERATION = 61
    #: The source of a committed relocation relayed all it held for the Spot (one-way).
    RELAY_DONE = 62


class RouteKind(IntEnum):
    """Command 39's route kind (docs/wire.md, "Spot message")."""

    #: To the owner of an already-Ready authority, fenced by its generations.
    READY = 1
    #: A cold-activation envelope for a Missing Spot.
    ACTIVATION = 2
    #: Relayed by an old owner along its committed Message Follow route to the new owner.
    FOLLOW = 3


class NodeAction(IntEnum):
    """What a command 61 asks its target node to do."""

    #: Relocate the Spot it owns that the frame names (to the node named, if any).
    RELOCATE = 1
    #: Drain: take no new Spots and relocate every Spot it hosts.
    DRAIN = 2
    #: Undrain: take new Spots again (the undo of DRAIN's placement mark).
    UNDRAIN = 3


class TerminalResult(IntEnum):
    """Command 20's ``terminalResult``."""

    OK = 0
    FAILED = 1


class WireCreateState(IntEnum):
    """How a remote create ended (command 20 after 47); 0 is never valid."""

    EXISTING = 1
    CREATED = 2
    REJECTED = 3
