"""The frame classes of the binary wire protocol (one frozen attrs class per command).

Theory of operation
-------------------
A frame object holds wire-level values: ints of the exact widths the wire
carries, ``str`` texts, :class:`NodeRid`, :class:`OwnerFence` and
:class:`SpotRef` from :mod:`zlink_trio.core`, and application payloads as
:class:`EncodedMessage` from the typed JSON codec. Times are integers of
milliseconds since the Unix epoch (``*_ms``); the runtime converts its Trio
clock to wall-clock time when it builds a frame.

Constructors validate every field and raise :class:`LocalProtocolError` when
a value cannot be sent (a local bug: the runtime builds frames from values it
has already validated). Values nested in a frame -- :class:`NodeRid`,
:class:`OwnerFence`, :class:`SpotRef` -- validate themselves with
:class:`InvalidOperation` when *they* are constructed. Limits that are
configurable (payload body size, frame size) are checked by ``encode``.

The classes live by the part of the protocol they serve, and this module
gathers them, with :data:`Frame`, the union of every frame:

- :mod:`~zlink_trio.wire._frame_enums`: :class:`Command` and the enums the bodies carry;
- :mod:`~zlink_trio.wire._link_frames`: the handshake (1..3) and keepalive (4, 5);
- :mod:`~zlink_trio.wire._request_frames`: Spot message (39), remote create (47), close (48),
  planned relocation (60);
- :mod:`~zlink_trio.wire._reply_frames`: the reply (20) and its outcomes.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from zlink_trio.wire._frame_enums import (
    Command,
    NodeAction,
    RouteKind,
    TerminalResult,
    WireCreateState,
)
from zlink_trio.wire._link_frames import MIN_FRAME_BYTES, Challenge, Hello, Ping, Pong, Welcome
from zlink_trio.wire._reply_frames import (
    CloseOutcome,
    CreateOutcome,
    Failure,
    MessageOutcome,
    NodeOperationOutcome,
    Outcome,
    RelocateOutcome,
    Reply,
)
from zlink_trio.wire._request_frames import (
    MAX_FOLLOW_HOPS,
    ActivationRoute,
    FollowRoute,
    NodeOperation,
    ReadyRoute,
    RelayDone,
    RelocateSpot,
    Route,
    SpotMessage,
    UserSpotClose,
    UserSpotCreate,
)

__all__ = (
    "MAX_FOLLOW_HOPS",
    "MIN_FRAME_BYTES",
    "ActivationRoute",
    "Challenge",
    "CloseOutcome",
    "Command",
    "CreateOutcome",
    "Failure",
    "FollowRoute",
    "Frame",
    "Hello",
    "MessageOutcome",
    "NodeAction",
    "NodeOperation",
    "NodeOperationOutcome",
    "Outcome",
    "Ping",
    "Pong",
    "ReadyRoute",
    "RelayDone",
    "RelocateOutcome",
    "RelocateSpot",
    "Reply",
    "Route",
    "RouteKind",
    "SpotMessage",
    "TerminalResult",
    "UserSpotClose",
    "UserSpotCreate",
    "Welcome",
    "WireCreateState",
)

#: Every frame the codec encodes and decodes.
Frame = (
    Challenge | Hello | Welcome | Ping | Pong | SpotMessage | UserSpotCreate | UserSpotClose
    | RelocateSpot | NodeOperation | RelayDone | Reply
)
