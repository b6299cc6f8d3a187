"""The binary frame codec: ``encode(frame) -> bytes`` and ``decode(data) -> Frame``.

Theory of operation
-------------------
Frames travel one per websocket *binary* message, so there is no framing
layer: a message is a whole frame. Every frame starts with the 4-byte
header ``b"ZL"`` (magic), the version byte (:data:`VERSION`) and the command
byte (:class:`Command`), followed by the command's fields in a fixed order.
``docs/wire.md`` has the byte table of every frame; the field encodings
(``text8``, ``rid``, ``gen``, ...) are in :mod:`zlink_trio.wire._frame_layouts`.

The rules are data. :data:`FRAMES` maps every command byte to its frame class,
and each class declares its fields in wire order with their encodings (see
:mod:`zlink_trio.wire._frame_layouts`). From that table the layout compiler
makes one writer and one reader per command, and they are the only ones: the
writer of command 39 is :func:`encode_spot_message`, of command 20
:func:`encode_reply`, and :func:`encode` hands any frame's fields to its
command's writer; :class:`LinkDecoder` holds a link's readers (and the caches
they keep), and :func:`decode` uses a fresh one. Adding a command is adding a
class and a row.

The hot frames skip the frame objects on the way out: a Ready call hands
:func:`encode_spot_message` its cached route and its node's fence already
encoded (:func:`encode_route`, :func:`encode_owner`), a success reply hands
:func:`encode_reply` its outcome already encoded
(:func:`encode_message_outcome`). The writer checks everything else it is
given, as the frame constructors would.

The encoding is canonical: each frame has exactly one byte form, so for any
``data`` that decodes, ``encode(decode(data)) == data``. Flags are exactly 0
or 1, enums have no unknown values, lengths are exact and trailing bytes are
refused.

Who is at fault. :func:`decode` reads a peer's bytes and is total: any input
either decodes or raises :class:`RemoteProtocolError` (unknown magic, version
or command, truncation, trailing bytes, lengths past the end or past a cap,
invalid UTF-8, empty required text, all-zero rid, a generation of 0 or
>= 2**63, an unknown enum value, a Message Follow route whose hops are not
1..8 or whose target owner generation is not above the source's, a root above
64 MiB, a text websocket message). The caller fails that one link. Frame
constructors and :func:`encode` refuse what this side may not send with
:class:`LocalProtocolError` (a bug of the caller); limits that are not ints
in range are :class:`InvalidConfiguration`.

Times. ``deadline_ms`` and ``owner_lease_expires_ms`` are absolute
wall-clock times in milliseconds since the Unix epoch, not remaining
durations: a frame keeps one meaning however long it waits in a queue, is
relayed by Message Follow, or is stored byte for byte as an activation
recovery root whose deadline must equal the envelope's. The
runtime converts between its Trio clock and the wall clock when it builds
or reads a frame; nodes are expected to run NTP-synchronised clocks, which
the shared stores' wall-clock leases already require.

Limits. ``max_frame_bytes`` (default :data:`DEFAULT_MAX_FRAME_BYTES`, 1 MiB
of body plus 32 KiB of headroom for the fixed fields and metadata) bounds the
whole frame and is checked first; ``max_body_bytes`` (default 1 MiB, the
JSON codec's bound) bounds every application body; metadata is at most
16 KiB. Configure the websocket's ``max_message_size`` to the same
``max_frame_bytes``.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol, cast

from zlink_trio.core.errors import InvalidConfiguration, LocalProtocolError, RemoteProtocolError
from zlink_trio.wire._frame_layouts import (
    MAX_METADATA_BYTES,
    MAX_U32,
    NONCE_BYTES,
    Readers,
    compile_frames,
)
from zlink_trio.wire._frame_types import (
    MAX_FOLLOW_HOPS,
    MIN_FRAME_BYTES,
    ActivationRoute,
    Challenge,
    CloseOutcome,
    Command,
    CreateOutcome,
    Failure,
    FollowRoute,
    Frame,
    Hello,
    MessageOutcome,
    NodeAction,
    NodeOperation,
    NodeOperationOutcome,
    Outcome,
    Ping,
    Pong,
    ReadyRoute,
    RelayDone,
    RelocateOutcome,
    RelocateSpot,
    Reply,
    Route,
    RouteKind,
    SpotMessage,
    TerminalResult,
    UserSpotClose,
    UserSpotCreate,
    Welcome,
    WireCreateState,
)
from zlink_trio.wire.codec import MAX_BODY_BYTES, EncodedMessage

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence

__all__ = (
    "DEFAULT_MAX_FRAME_BYTES",
    "FRAMES",
    "FRAME_HEADROOM_BYTES",
    "HEADER_BYTES",
    "MAGIC",
    "MAX_BODY_BYTES",
    "MAX_FOLLOW_HOPS",
    "MAX_METADATA_BYTES",
    "MIN_FRAME_BYTES",
    "NONCE_BYTES",
    "VERSION",
    "ActivationRoute",
    "Challenge",
    "CloseOutcome",
    "Command",
    "CreateOutcome",
    "EncodedMessage",
    "Failure",
    "FollowRoute",
    "Frame",
    "Hello",
    "LinkDecoder",
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
    "ReplyWriter",
    "Route",
    "RouteKind",
    "SlotEncoder",
    "SpotMessage",
    "SpotMessageWriter",
    "TerminalResult",
    "UserSpotClose",
    "UserSpotCreate",
    "Welcome",
    "WireCreateState",
    "decode",
    "encode",
    "encode_message_outcome",
    "encode_owner",
    "encode_reply",
    "encode_route",
    "encode_spot_message",
)

#: The first two bytes of every frame.
MAGIC: Final = b"ZL"
#: The wire format version this module speaks (the third byte of every frame).
VERSION: Final = 1
_HEADER: Final = MAGIC + bytes((VERSION,))
#: Size of the common header: magic, version, command.
HEADER_BYTES: Final = 4
#: Room above the body bound for a frame's fixed fields and metadata (32 KiB).
FRAME_HEADROOM_BYTES: Final = 32 * 1024
#: Default bound of a whole frame: 1 MiB body + 32 KiB headroom.
DEFAULT_MAX_FRAME_BYTES: Final = MAX_BODY_BYTES + FRAME_HEADROOM_BYTES

#: Every command byte -> its frame class. The codec reads nothing else.
FRAMES: Final[dict[Command, type]] = {
    Command.CHALLENGE: Challenge,
    Command.HELLO: Hello,
    Command.WELCOME: Welcome,
    Command.PING: Ping,
    Command.PONG: Pong,
    Command.SPOT_MESSAGE: SpotMessage,
    Command.USER_SPOT_CREATE: UserSpotCreate,
    Command.USER_SPOT_CLOSE: UserSpotClose,
    Command.RELOCATE_SPOT: RelocateSpot,
    Command.NODE_OPERATION: NodeOperation,
    Command.RELAY_DONE: RelayDone,
    Command.REPLY: Reply,
}
_COMPILED: Final = compile_frames(_HEADER, {int(c): cls for c, cls in FRAMES.items()})
_FRAME_WRITERS: Final = _COMPILED.frame_writers


class SpotMessageWriter(Protocol):
    """Command 39's writer (:data:`encode_spot_message`)."""

    def __call__(self, route: Route | bytes, operation_id: int, reply_correlation: int,
                 deadline_ms: int, source: OwnerFence | bytes, source_spot_id: str | None,
                 metadata: bytes | None, payload: EncodedMessage, mb: int = ...) -> bytes:
        """The frame's bytes; ``mb`` is ``max_body_bytes`` (default 1 MiB)."""


class ReplyWriter(Protocol):
    """Command 20's writer (:data:`encode_reply`)."""

    def __call__(self, correlation: int, answers: Command, outcome: Outcome | bytes,
                 mb: int = ...) -> bytes:
        """The frame's bytes; ``mb`` is ``max_body_bytes`` (default 1 MiB)."""


class SlotEncoder(Protocol):
    """The pre-encoder of one slot: the bytes its frame's writer takes as they are."""

    def __call__(self, value: object, mb: int = ...) -> bytes:
        """``value``'s bytes, checked as the writer would check it."""


#: Command 39's writer: ``encode_spot_message(route, operation_id, reply_correlation,
#: deadline_ms, source, source_spot_id, metadata, payload, max_body_bytes)`` -> the
#: frame's bytes; ``route`` and ``source`` may be :func:`encode_route` and
#: :func:`encode_owner` bytes. Raises :class:`LocalProtocolError` for a value a
#: :class:`SpotMessage` could not hold, or a body above ``max_body_bytes``.
encode_spot_message: Final = cast("SpotMessageWriter",
                                  _COMPILED.writers[Command.SPOT_MESSAGE])
#: Command 20's writer: ``encode_reply(correlation, answers, outcome, max_body_bytes)``
#: -> the frame's bytes; ``outcome`` may be :func:`encode_message_outcome` bytes (which
#: name the answered command). Raises :class:`LocalProtocolError` as :class:`Reply`
#: and :func:`encode` would.
encode_reply: Final = cast("ReplyWriter", _COMPILED.writers[Command.REPLY])
#: ``encode_route(route)``: the route kind and fields of a command 39 route, checked.
encode_route: Final = cast("SlotEncoder", _COMPILED.slots[Command.SPOT_MESSAGE, "route"])
#: ``encode_owner(owner)``: the 24 bytes of an :class:`OwnerFence`, checked.
encode_owner: Final = cast("SlotEncoder", _COMPILED.slots[Command.SPOT_MESSAGE, "source"])
#: ``encode_message_outcome(reply, max_body_bytes)``: the outcome of a command 20 that
#: answers a 39 with success and ``reply`` (an :class:`EncodedMessage` or ``None``).
encode_message_outcome: Final = cast("SlotEncoder", _COMPILED.writers_by_class[MessageOutcome])


def _check_limits(max_frame_bytes: int, max_body_bytes: int) -> None:
    if type(max_frame_bytes) is not int or not MIN_FRAME_BYTES <= max_frame_bytes <= MAX_U32:
        raise InvalidConfiguration(
            f"max_frame_bytes must be an int in {MIN_FRAME_BYTES}..{MAX_U32}, "
            f"got {max_frame_bytes!r}"
        )
    if type(max_body_bytes) is not int or not 1 <= max_body_bytes <= MAX_U32:
        raise InvalidConfiguration(
            f"max_body_bytes must be an int in 1..{MAX_U32}, got {max_body_bytes!r}"
        )


def encode(
    frame: Frame,
    *,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> bytes:
    """Encode ``frame`` as one websocket binary message (its command's writer).

    Raises :class:`LocalProtocolError` if ``frame`` is not a frame, a body is
    above ``max_body_bytes`` or the frame is above ``max_frame_bytes``;
    :class:`InvalidConfiguration` if a limit is not an int in range.
    """
    _check_limits(max_frame_bytes, max_body_bytes)
    write = _FRAME_WRITERS.get(type(frame))
    if write is None:
        write = next((_FRAME_WRITERS[c] for c in type(frame).__mro__ if c in _FRAME_WRITERS),
                     None)
        if write is None:
            raise LocalProtocolError(f"cannot encode {frame!r}: it is not a frame")
    data = write(frame, max_body_bytes)
    if len(data) > max_frame_bytes:
        raise LocalProtocolError(
            f"{type(frame).__name__} frame is {len(data)} bytes, above the "
            f"{max_frame_bytes}-byte frame limit; send less or raise the limit"
        )
    return data


class LinkDecoder:
    """The decoder of one link's messages: :func:`decode` with fixed limits, and caches.

    Calling it gives, for every input, exactly what ``decode(data,
    max_frame_bytes=..., max_body_bytes=...)`` gives (a frame or the same
    :class:`RemoteProtocolError`). It owns the link's readers and the values they
    keep (owner fences, Ready routes, type names, bounded); a link makes one and
    drops it when it closes. Raises :class:`InvalidConfiguration` at once if a limit
    is not an int in range.
    """

    __slots__ = ("_by_command", "_by_header", "_max_body_bytes", "_max_frame_bytes", "readers")

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
                 max_body_bytes: int = MAX_BODY_BYTES) -> None:
        _check_limits(max_frame_bytes, max_body_bytes)
        self._max_frame_bytes = max_frame_bytes
        self._max_body_bytes = max_body_bytes
        #: The readers and their caches.
        self.readers = Readers(_COMPILED)
        self._by_command = self.readers.by_command
        self._by_header = {_HEADER + bytes((command,)): read
                           for command, read in self._by_command.items()}

    def __call__(self, data: bytes | bytearray | memoryview | str) -> Frame:
        """Decode one websocket message received from the peer (see :func:`decode`)."""
        if type(data) is bytes and len(data) <= self._max_frame_bytes:
            read = self._by_header.get(data[:4])
            if read is not None:
                return read(data, self._max_body_bytes)  # type: ignore[return-value]
        return self._decode_checked(data)

    def _decode_checked(self, data: bytes | bytearray | memoryview | str) -> Frame:
        if isinstance(data, str):
            raise RemoteProtocolError(
                "frames travel in binary websocket messages, got a text message")
        if isinstance(data, bytearray | memoryview):
            data = bytes(data)
        if not isinstance(data, bytes):
            raise RemoteProtocolError(f"a frame is bytes, got {type(data).__name__}")
        if len(data) > self._max_frame_bytes:
            raise RemoteProtocolError(
                f"frame is {len(data)} bytes, above the {self._max_frame_bytes}-byte frame limit"
            )
        _check_header(data)
        read = self._by_command.get(data[3])
        if read is None:
            raise RemoteProtocolError(f"unknown command {data[3]}")
        return read(data, self._max_body_bytes)  # type: ignore[return-value]


def _check_header(data: bytes) -> None:
    """Refuse a frame whose magic or version is not this module's, or that has none."""
    for what, end in (("magic", 2), ("version", 3), ("command", 4)):
        if len(data) < end:
            start = end - 1 if end > 2 else 0
            raise RemoteProtocolError(
                f"truncated frame: {what} needs {end - start} bytes at offset {start}, "
                f"only {len(data) - start} remain"
            )
        if what == "magic" and data[:2] != MAGIC:
            raise RemoteProtocolError(
                f"bad magic {data[:2]!r}; a zlink frame starts with {MAGIC!r}")
        if what == "version" and data[2] != VERSION:
            raise RemoteProtocolError(
                f"unsupported wire version {data[2]}; this node speaks version {VERSION}")


def decode(
    data: bytes | bytearray | memoryview | str,
    *,
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Frame:
    """Decode one websocket message received from a peer (with a fresh :class:`LinkDecoder`).

    Total: returns a frame or raises :class:`RemoteProtocolError` -- for a
    ``str`` (a text websocket message) too. Raises
    :class:`InvalidConfiguration` only if a limit is not an int in range.
    """
    return LinkDecoder(max_frame_bytes, max_body_bytes)(data)
