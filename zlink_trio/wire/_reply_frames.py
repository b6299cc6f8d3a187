"""The reply frame (command 20): the terminal result of a 39 request, a 47, a 48 or a 60.

Theory of operation
-------------------
A :class:`Reply` names the command it ``answers`` and carries one
``outcome``: a :class:`Failure` (a :class:`ZLinkError` code and message,
answering any command the same way) or that command's success tail --
:class:`MessageOutcome` after 39, :class:`CreateOutcome` after 47,
:class:`CloseOutcome` after 48, :class:`RelocateOutcome` after 60,
:class:`NodeOperationOutcome` after 61. The
constructor refuses a success tail of another command, and an EXISTING
create outcome with an application reply (spec 06 §3.3). ``terminal_result``
and ``failure_code`` are derived from the outcome, so a reply cannot say OK
and carry a failure.

:meth:`Failure.from_error` cuts a message to what ``text16`` carries, so any
:class:`ZLinkError` can be reported; ``encode`` checks the size of an
application reply against its configurable limit.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import LocalProtocolError, ZLinkError, error_for_code
from zlink_trio.wire._frame_checks import (
    T,
    check_optional_payload,
    check_ref,
    check_u64_nonzero,
    int_in,
    text8_size,
)
from zlink_trio.wire._frame_enums import Command, TerminalResult, WireCreateState
from zlink_trio.wire._frame_fields import MAX_TEXT16_BYTES, MAX_U16

if TYPE_CHECKING:
    from zlink_trio.core.records import SpotRef
    from zlink_trio.wire.codec import EncodedMessage

__all__ = (
    "CloseOutcome",
    "CreateOutcome",
    "Failure",
    "MessageOutcome",
    "NodeOperationOutcome",
    "Outcome",
    "RelocateOutcome",
    "Reply",
)


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


def _check_bool(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if type(value) is not bool:
        raise LocalProtocolError(f"{attribute.name} must be a bool, got {value!r}")


@attrs.frozen(kw_only=True)
class CloseOutcome:
    """Success tail after 48: whether the incarnation was closed."""

    closed: bool = attrs.field(validator=_check_bool)


@attrs.frozen(kw_only=True)
class MessageOutcome:
    """Success tail after a 39 request: the handler's reply, if it returned one."""

    reply: EncodedMessage | None = attrs.field(default=None, validator=check_optional_payload)


@attrs.frozen(kw_only=True)
class RelocateOutcome:
    """Success tail after 60: the SpotRef of the Spot at its new owner.

    Same Spot ID, ObjectGeneration and mesh as the request; the target's node rid.
    """

    ref: SpotRef = attrs.field(validator=check_ref)


def _check_report(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if type(value) is not bytes:
        raise LocalProtocolError(f"report must be bytes (UTF-8 JSON), got {value!r}")


@attrs.frozen(kw_only=True)
class NodeOperationOutcome:
    """Success tail after 61: the operation's report, UTF-8 JSON the runtime reads.

    The codec carries the bytes as they are (bounded like an application body); the
    runtime (``runtime.mesh.remote_operation``) defines and checks the JSON.
    """

    report: bytes = attrs.field(validator=_check_report)


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
Outcome = (CreateOutcome | CloseOutcome | MessageOutcome | RelocateOutcome
           | NodeOperationOutcome | Failure)

_SUCCESS_FOR: dict[Command, type[object]] = {
    Command.SPOT_MESSAGE: MessageOutcome,
    Command.USER_SPOT_CREATE: CreateOutcome,
    Command.USER_SPOT_CLOSE: CloseOutcome,
    Command.RELOCATE_SPOT: RelocateOutcome,
    Command.NODE_OPERATION: NodeOperationOutcome,
}
_ANSWERABLE = ", ".join(command.name for command in _SUCCESS_FOR)


@attrs.frozen(kw_only=True)
class Reply:
    """Command 20: the terminal result of a 39 request, a 47, a 48, a 60 or a 61.

    ``answers`` names the request's command; ``outcome`` is a
    :class:`Failure` or the success tail of that command.
    """

    correlation: int = attrs.field(validator=check_u64_nonzero)
    answers: Command = attrs.field()
    outcome: Outcome = attrs.field()

    @answers.validator
    def _answers(self, attribute: attrs.Attribute[Command], value: Command) -> None:
        if not isinstance(value, Command) or value not in _SUCCESS_FOR:
            raise LocalProtocolError(f"a reply answers one of {_ANSWERABLE}, got {value!r}")

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
