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

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import LocalProtocolError, ZLinkError, error_for_code
from zlink_trio.core.identity import NodeRid
from zlink_trio.wire._frame_fields import (
    MAX_GEN,
    MAX_METADATA_BYTES,
    MAX_TEXT16_BYTES,
    MAX_U16,
    MAX_U32,
    NONCE_BYTES,
    T,
    check_deadline,
    check_gen,
    check_optional_payload,
    check_owner,
    check_payload,
    check_ref,
    check_text8,
    check_u64,
    check_u64_nonzero,
    int_in,
    text8_size,
)

if TYPE_CHECKING:
    from zlink_trio.core.records import OwnerFence, SpotRef
    from zlink_trio.wire.codec import EncodedMessage

__all__ = (
    "MIN_FRAME_BYTES",
    "ActivationRoute",
    "Challenge",
    "CloseOutcome",
    "Command",
    "CreateOutcome",
    "Failure",
    "Frame",
    "Hello",
    "MessageOutcome",
    "Outcome",
    "Ping",
    "Pong",
    "ReadyRoute",
    "Reply",
    "RouteKind",
    "SpotMessage",
    "TerminalResult",
    "UserSpotClose",
    "UserSpotCreate",
    "Welcome",
    "WireCreateState",
)

#: Smallest frame-size limit a node may announce or configure; every handshake frame fits.
MIN_FRAME_BYTES = 1024


class Command(IntEnum):
    """The command byte of the frame header.

    20, 39, 47 and 48 are the spec's numbers (spec 06 §3.3, §4.1, §7.1); 1..5
    are zlink_trio's own handshake and keepalive commands.
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
    #: The terminal reply to a 39 request, 47 or 48 (spec 06 §3.3, §7.1).
    REPLY = 20
    #: A Spot message: direct call or cold-activation envelope (spec 06 §4.1 step 8).
    SPOT_MESSAGE = 39
    #: Remote User Spot creation (spec 06 §3.3).
    USER_SPOT_CREATE = 47
    #: Remote User Spot close (spec 06 §7.1).
    USER_SPOT_CLOSE = 48


class RouteKind(IntEnum):
    """Command 39's route kind (spec 06 §4.1)."""

    #: To the owner of an already-Ready authority, fenced by its generations.
    READY = 1
    #: A cold-activation envelope for a Missing Spot.
    ACTIVATION = 2


class TerminalResult(IntEnum):
    """Command 20's ``terminalResult``."""

    OK = 0
    FAILED = 1


class WireCreateState(IntEnum):
    """How a remote create ended (command 20 after 47); 0 is never valid."""

    EXISTING = 1
    CREATED = 2
    REJECTED = 3


# --------------------------------------------------------------------------- validators


def _check_nonce(instance: object, attribute: attrs.Attribute[bytes], value: bytes) -> None:
    if not isinstance(value, bytes) or len(value) != NONCE_BYTES or type(value) is not bytes:
        raise LocalProtocolError(f"{attribute.name} must be exactly {NONCE_BYTES} bytes")


def _check_frame_limit(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, MIN_FRAME_BYTES, MAX_U32):
        raise LocalProtocolError(
            f"{attribute.name} must be an int in {MIN_FRAME_BYTES}..{MAX_U32}, got {value!r}"
        )


def _check_lease(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 0, MAX_GEN):
        raise LocalProtocolError(
            f"{attribute.name} must be milliseconds since the Unix epoch in 0..{MAX_GEN}, "
            f"got {value!r}"
        )


def _check_capacity(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 1, MAX_U32):
        raise LocalProtocolError(f"{attribute.name} must be an int in 1..{MAX_U32}, got {value!r}")


def _check_optional_text8(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if value is not None:
        check_text8(instance, attribute, value)


def _check_rid(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, NodeRid):
        raise LocalProtocolError(f"{attribute.name} must be a NodeRid, got {value!r}")


def _check_bool(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if type(value) is not bool:
        raise LocalProtocolError(f"{attribute.name} must be a bool, got {value!r}")


def _check_metadata(
    instance: object, attribute: attrs.Attribute[bytes | None], value: bytes | None
) -> None:
    if value is None:
        return
    if not isinstance(value, bytes) or len(value) > MAX_METADATA_BYTES or type(value) is not bytes:
        raise LocalProtocolError(
            f"{attribute.name} must be None or bytes of at most {MAX_METADATA_BYTES} bytes"
        )


# --------------------------------------------------------------------------- handshake


@attrs.frozen(kw_only=True)
class Challenge:
    """Command 1: the server's fresh nonce, sent first on every accepted link."""

    nonce: bytes = attrs.field(validator=_check_nonce)


@attrs.frozen(kw_only=True)
class _Introduction:
    """The fields HELLO and WELCOME share (each side introduces itself the same way).

    ``mac`` is opaque here (HMAC-SHA256 over the transcript, computed by the
    handshake); ``max_frame_bytes`` is the largest frame the sender accepts.
    """

    node_id: str = attrs.field(validator=check_text8)
    node_rid: NodeRid = attrs.field(validator=_check_rid)
    lifecycle_generation: int = attrs.field(validator=check_gen)
    mesh: str = attrs.field(validator=check_text8)
    max_frame_bytes: int = attrs.field(validator=_check_frame_limit)
    nonce: bytes = attrs.field(validator=_check_nonce)
    mac: bytes = attrs.field(validator=_check_nonce)


@attrs.frozen(kw_only=True)
class Hello(_Introduction):
    """Command 2: the client introduces itself."""


@attrs.frozen(kw_only=True)
class Welcome(_Introduction):
    """Command 3: the server introduces itself and proves the key; same fields as HELLO."""


@attrs.frozen(kw_only=True)
class Ping:
    """Command 4: keepalive probe; ``token`` is any u64, echoed by PONG."""

    token: int = attrs.field(validator=check_u64)


@attrs.frozen(kw_only=True)
class Pong:
    """Command 5: keepalive answer carrying the PING's token."""

    token: int = attrs.field(validator=check_u64)


# --------------------------------------------------------------------------- command 39


@attrs.frozen(kw_only=True)
class ReadyRoute:
    """Route kind 1: to the owner of a Ready authority, with its generation fence."""

    spot_id: str = attrs.field(validator=check_text8)
    object_generation: int = attrs.field(validator=check_gen)
    owner_generation: int = attrs.field(validator=check_gen)
    target: OwnerFence = attrs.field(validator=check_owner)


@attrs.frozen(kw_only=True)
class ActivationRoute:
    """Route kind 2: cold activation of a Missing Spot (no authority generation exists yet)."""

    target_mesh: str = attrs.field(validator=check_text8)
    target: OwnerFence = attrs.field(validator=check_owner)
    spot_id: str = attrs.field(validator=check_text8)
    stable_type: str = attrs.field(validator=check_text8)
    #: The StoreVersion of the target's descriptor claim the source selected.
    descriptor_version: int = attrs.field(validator=check_gen)


def _check_route(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, ReadyRoute | ActivationRoute):
        raise LocalProtocolError(f"route must be a ReadyRoute or an ActivationRoute, got {value!r}")


@attrs.frozen(kw_only=True)
class SpotMessage:
    """Command 39: one application message to a Spot (spec 06 §4.1 step 8, §5).

    ``reply_correlation`` is 0 for a one-way send (no command 20 follows).
    ``metadata`` is ``None`` when the metadata flag is 0; ``b""`` is present
    but empty. ``deadline_ms`` is the operation's single end-to-end deadline.
    """

    route: ReadyRoute | ActivationRoute = attrs.field(validator=_check_route)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    reply_correlation: int = attrs.field(validator=check_u64)
    deadline_ms: int = attrs.field(validator=check_deadline)
    source: OwnerFence = attrs.field(validator=check_owner)
    source_spot_id: str | None = attrs.field(validator=_check_optional_text8)
    metadata: bytes | None = attrs.field(validator=_check_metadata)
    payload: EncodedMessage = attrs.field(validator=check_payload)

    @property
    def route_kind(self) -> RouteKind:
        """The route kind byte this frame carries."""
        return RouteKind.READY if isinstance(self.route, ReadyRoute) else RouteKind.ACTIVATION


# --------------------------------------------------------------------------- commands 47, 48


@attrs.frozen(kw_only=True)
class UserSpotCreate:
    """Command 47: commit a reservation the source made, on the target (spec 06 §3.3).

    The reservation fence is ``expected_store_version``, ``object_generation``,
    ``owner_generation``, ``target``, ``owner_lease_expires_ms`` and
    ``pending_capacity``. The creation request is not carried: the target
    reads it from the store's Pending creation projection.
    """

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    spot_id: str = attrs.field(validator=check_text8)
    stable_type: str = attrs.field(validator=check_text8)
    expected_store_version: int = attrs.field(validator=check_gen)
    object_generation: int = attrs.field(validator=check_gen)
    owner_generation: int = attrs.field(validator=check_gen)
    target: OwnerFence = attrs.field(validator=check_owner)
    owner_lease_expires_ms: int = attrs.field(validator=_check_lease)
    pending_capacity: int = attrs.field(validator=_check_capacity)
    deadline_ms: int = attrs.field(validator=check_deadline)


@attrs.frozen(kw_only=True)
class UserSpotClose:
    """Command 48: close a remote User Spot incarnation (spec 06 §7.1)."""

    correlation: int = attrs.field(validator=check_u64_nonzero)
    operation_id: int = attrs.field(validator=check_u64_nonzero)
    source: OwnerFence = attrs.field(validator=check_owner)
    ref: SpotRef = attrs.field(validator=check_ref)
    target: OwnerFence = attrs.field(validator=check_owner)
    expected_owner_generation: int = attrs.field(validator=check_gen)
    expected_store_version: int = attrs.field(validator=check_gen)
    deadline_ms: int = attrs.field(validator=check_deadline)


# --------------------------------------------------------------------------- command 20


def _check_state(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not isinstance(value, WireCreateState):
        raise LocalProtocolError(f"state must be a WireCreateState, got {value!r}")


@attrs.frozen(kw_only=True)
class CreateOutcome:
    """Success tail after 47: the create state, the attempt's SpotRef, an optional reply.

    EXISTING never carries a reply (spec 06 §3.3).
    """

    state: WireCreateState = attrs.field(validator=_check_state)
    ref: SpotRef = attrs.field(validator=check_ref)
    reply: EncodedMessage | None = attrs.field(default=None, validator=check_optional_payload)

    def __attrs_post_init__(self) -> None:
        if self.state is WireCreateState.EXISTING and self.reply is not None:
            raise LocalProtocolError("an EXISTING create result has no application reply")


@attrs.frozen(kw_only=True)
class CloseOutcome:
    """Success tail after 48: whether the incarnation was closed."""

    closed: bool = attrs.field(validator=_check_bool)


@attrs.frozen(kw_only=True)
class MessageOutcome:
    """Success tail after a 39 request: the handler's reply, if it returned one."""

    reply: EncodedMessage | None = attrs.field(default=None, validator=check_optional_payload)


def _check_failure_code(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if not int_in(value, 1, MAX_U16):
        raise LocalProtocolError(
            f"failure code must be a ZLinkError code in 1..{MAX_U16}, got {value!r}"
        )


def _check_text16(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    size = text8_size(value)
    if not 0 <= size <= MAX_TEXT16_BYTES:
        raise LocalProtocolError(
            f"{attribute.name} must be a str of at most {MAX_TEXT16_BYTES} UTF-8 bytes"
        )


@attrs.frozen(kw_only=True)
class Failure:
    """Failure tail of any reply: the :class:`ZLinkError` code and its message."""

    code: int = attrs.field(validator=_check_failure_code)
    message: str = attrs.field(validator=_check_text16)

    @classmethod
    def from_error(cls, error: ZLinkError) -> Failure:
        """The failure that reports ``error``; long messages are cut at 65535 bytes."""
        raw = error.message.encode("utf-8", "backslashreplace")[:MAX_TEXT16_BYTES]
        return cls(code=error.code, message=raw.decode("utf-8", "ignore"))

    def to_error(self) -> ZLinkError:
        """Rebuild the peer's error (unknown codes become a plain ZLinkError)."""
        return error_for_code(self.code, self.message)


#: What a command 20 reply carries after ``failureCode``.
Outcome = CreateOutcome | CloseOutcome | MessageOutcome | Failure

_SUCCESS_FOR = {
    Command.SPOT_MESSAGE: MessageOutcome,
    Command.USER_SPOT_CREATE: CreateOutcome,
    Command.USER_SPOT_CLOSE: CloseOutcome,
}


@attrs.frozen(kw_only=True)
class Reply:
    """Command 20: the terminal result of a 39 request, a 47 or a 48.

    ``answers`` names the request's command; ``outcome`` is a
    :class:`Failure` or the success tail of that command.
    """

    correlation: int = attrs.field(validator=check_u64_nonzero)
    answers: Command = attrs.field()
    outcome: Outcome = attrs.field()

    @answers.validator
    def _answers(self, attribute: attrs.Attribute[Command], value: Command) -> None:
        if not isinstance(value, Command) or value not in _SUCCESS_FOR:
            raise LocalProtocolError(
                f"a reply answers SPOT_MESSAGE, USER_SPOT_CREATE or USER_SPOT_CLOSE, got {value!r}"
            )

    @outcome.validator
    def _outcome(self, attribute: attrs.Attribute[Outcome], value: Outcome) -> None:
        if isinstance(value, Failure):
            return
        expected = _SUCCESS_FOR[self.answers]
        if type(value) is not expected:
            raise LocalProtocolError(
                f"a reply to {self.answers.name} carries a Failure or a {expected.__name__}, "
                f"got {value!r}"
            )

    @property
    def terminal_result(self) -> TerminalResult:
        """``OK`` unless the outcome is a :class:`Failure`."""
        return TerminalResult.FAILED if isinstance(self.outcome, Failure) else TerminalResult.OK

    @property
    def failure_code(self) -> int:
        """The failure's ZLinkError code, 0 when OK."""
        return self.outcome.code if isinstance(self.outcome, Failure) else 0


#: Every frame the codec encodes and decodes.
Frame = (
    Challenge | Hello | Welcome | Ping | Pong | SpotMessage | UserSpotCreate | UserSpotClose | Reply
)
