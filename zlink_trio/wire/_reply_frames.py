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
create outcome with an application reply (only CREATED and REJECTED carry
``on_create``'s reply). ``terminal_result``
and ``failure_code`` are derived from the outcome, so a reply cannot say OK
and carry a failure.

:meth:`Failure.from_error` cuts a message to what ``text16`` carries, so any
:class:`ZLinkError` can be reported; ``encode`` checks the size of an
application reply against its configurable limit.

Layout. A reply's fixed head -- correlation, terminal result, failure code and
the command it answers -- is followed by a tail: a failure's ``text16`` message,
or the answered command's success tail, each outcome class being its tail's
layout (attrs fields with their encodings, :mod:`zlink_trio.wire._frame_layouts`).
:data:`OUTCOME` writes and reads the head's last three bytes and the tail
together, since they carry both ``answers`` and ``outcome``; a success tail
written ahead of time (``frames.encode_message_outcome``) is all of it, answered
command included.

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Final, TypeVar

import attrs

from zlink_trio.core.errors import LocalProtocolError, ZLinkError, error_for_code
from zlink_trio.wire._frame_enums import Command, TerminalResult, WireCreateState
from zlink_trio.wire._frame_layouts import (
    BLOB32,
    FLAG,
    ID,
    MAX_TEXT16_BYTES,
    MAX_U16,
    OPTIONAL_PAYLOAD,
    SPOT_REF,
    TEXT16,
    U8,
    Carrier,
    Check,
    Composite,
    Enum8,
    Int,
    instance_writer,
    layout_of,
    wire,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.core.records import SpotRef
    from zlink_trio.wire._frame_layouts import Code
    from zlink_trio.wire.codec import EncodedMessage

T = TypeVar("T")

__all__ = (
    "OUTCOME",
    "CloseOutcome",
    "CreateOutcome",
    "Failure",
    "MessageOutcome",
    "NodeOperationOutcome",
    "Outcome",
    "RelocateOutcome",
    "Reply",
)

_STATE: Final = Enum8(WireCreateState)


def _existing_with_reply(state: WireCreateState, reply: EncodedMessage | None) -> str | None:
    if state is WireCreateState.EXISTING and reply is not None:
        return "an EXISTING create result carries an application reply"
    return None


@attrs.frozen(kw_only=True)
class CreateOutcome:
    """Success tail after 47: the create state, the attempt's SpotRef, an optional reply.

    EXISTING never carries a reply: the request it came with was not used.
    """

    state: WireCreateState = attrs.field(validator=_STATE.validator,
                                         metadata=wire(_STATE, "create state"))
    ref: SpotRef = attrs.field(validator=SPOT_REF.validator, metadata=wire(SPOT_REF, "SpotRef"))
    reply: EncodedMessage | None = attrs.field(
        default=None, validator=OPTIONAL_PAYLOAD.validator,
        metadata=wire(OPTIONAL_PAYLOAD, "create reply",
                      check=Check(("state", "reply"), _existing_with_reply)))

    def __attrs_post_init__(self) -> None:
        if self.state is WireCreateState.EXISTING and self.reply is not None:
            raise LocalProtocolError("an EXISTING create result has no application reply")


@attrs.frozen(kw_only=True)
class CloseOutcome:
    """Success tail after 48: whether the incarnation was closed."""

    closed: bool = attrs.field(validator=FLAG.validator, metadata=wire(FLAG, "closed"))


@attrs.frozen(kw_only=True)
class MessageOutcome:
    """Success tail after a 39 request: the handler's reply, if it returned one."""

    reply: EncodedMessage | None = attrs.field(default=None, validator=OPTIONAL_PAYLOAD.validator,
                                               metadata=wire(OPTIONAL_PAYLOAD, "reply"))


@attrs.frozen(kw_only=True)
class RelocateOutcome:
    """Success tail after 60: the SpotRef of the Spot at its new owner.

    Same Spot ID, ObjectGeneration and mesh as the request; the target's node rid.
    """

    ref: SpotRef = attrs.field(validator=SPOT_REF.validator, metadata=wire(SPOT_REF, "SpotRef"))


def _check_report(instance: object, attribute: attrs.Attribute[T], value: T) -> None:
    if type(value) is not bytes:
        raise LocalProtocolError(f"report must be bytes (UTF-8 JSON), got {value!r}")


@attrs.frozen(kw_only=True)
class NodeOperationOutcome:
    """Success tail after 61: the operation's report, UTF-8 JSON the runtime reads.

    The codec carries the bytes as they are (bounded like an application body); the
    runtime (``runtime.coordinators.remote_operation``) defines and checks the JSON.
    """

    report: bytes = attrs.field(validator=_check_report,
                                metadata=wire(BLOB32, "node operation report"))


_CODE: Final = Int("H", 1, MAX_U16, f"a ZLinkError code in 1..{MAX_U16}")


@attrs.frozen(kw_only=True)
class Failure:
    """Failure tail of any reply: the :class:`ZLinkError` code and its message."""

    code: int = attrs.field(validator=_CODE.validator)
    message: str = attrs.field(validator=TEXT16.validator)

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

#: Answered command -> the class of its success tail.
_SUCCESS_FOR: Final[dict[Command, type]] = {
    Command.SPOT_MESSAGE: MessageOutcome,
    Command.USER_SPOT_CREATE: CreateOutcome,
    Command.USER_SPOT_CLOSE: CloseOutcome,
    Command.RELOCATE_SPOT: RelocateOutcome,
    Command.NODE_OPERATION: NodeOperationOutcome,
}
_ANSWERABLE: Final = ", ".join(command.name for command in _SUCCESS_FOR)
_KNOWN: Final = ", ".join(str(int(command)) for command in _SUCCESS_FOR)
_FAILED_HEAD: Final = struct.Struct(">BHB")


def _ok_head(command: Command) -> bytes:
    """Terminal result OK (0), failure code 0 and the answered command."""
    return bytes((TerminalResult.OK, 0, 0, command))


@attrs.frozen
class _ReplyOutcome(Carrier):
    """The reply after its correlation: result, code and answered command, then the tail.

    Carries ``answers`` and ``outcome``; a :class:`Failure` answers any command the
    same way, a success tail only its own.
    """

    carries: tuple[str, ...] = ("answers",)

    @property
    def expected(self) -> str:
        return "a Failure or the success tail of the answered command"

    def accepts(self, value: object) -> bool:
        return isinstance(value, (Failure, *_SUCCESS_FOR.values()))

    def write_all(self, code: Code, values: Sequence[str], name: str) -> str:
        answers, outcome = values
        success = code.const(_SUCCESS_FOR, "success")
        code.raise_if(f"not isinstance({answers}, {code.const(Command, 'C')}) "
                      f"or {answers} not in {success}",
                      f"_cannot('answers', {answers}, {'one of ' + _ANSWERABLE!r})")
        writers = {cls: instance_writer(code.names, _ok_head(command), layout_of(cls))
                   for command, cls in _SUCCESS_FOR.items()}
        target = code.var("w")
        with code.block(f"if type({outcome}) is {code.const(Failure, 'C')}"):
            code.emit(f"{target} = {code.const(_FAILED_HEAD, 'S')}.pack("
                      f"{int(TerminalResult.FAILED)}, {outcome}.code, {answers}) + "
                      f"_text16({outcome}.message)")
        with code.block(f"elif type({outcome}) is {success}[{answers}]"):
            code.emit(f"{target} = {code.const(writers, 'variants')}[type({outcome})]"
                      f"({outcome}, mb)")
        with code.block("else"):
            code.emit(f"raise _cannot({name!r}, {outcome}, 'a Failure or a ' + "
                      f"{success}[{answers}].__name__)")
        return target

    def read_all(self, code: Code, what: str) -> tuple[str, ...]:
        result = U8.read(code, "terminal result")
        failure_code = Int("H", 0, MAX_U16).read(code, "failure code")
        answered = U8.read(code, "answered command")
        code.flush()
        ok, failed = int(TerminalResult.OK), int(TerminalResult.FAILED)
        code.raise_if(f"{result} == {ok} and {failure_code} != 0",
                      f"_remote(f'an OK reply has failure code {{{failure_code}}}; it must be 0')")
        code.raise_if(f"{result} == {failed} and {failure_code} == 0",
                      "_remote('a FAILED reply has failure code 0; it must be a ZLinkError "
                      "code')")
        code.raise_if(f"{result} > {failed}",
                      f"_remote(f'unknown terminal result {{{result}}}; known: 0 (ok), "
                      "1 (failed)')")
        answers = code.var("a")
        members = {int(command): command for command in _SUCCESS_FOR}
        code.emit(f"{answers} = {code.const(members, 'members')}.get({answered})")
        code.raise_if(f"{answers} is None",
                      f"_remote(f'a reply cannot answer command {{{answered}}}; "
                      f"known: {_KNOWN}')")
        outcome = code.var("x")
        with code.block(f"if {result} == {failed}"):
            message = TEXT16.read(code, "failure message")
            code.emit(f"{outcome} = _new({code.const(Failure, 'C')})")
            code.emit(f"{code.const(Failure.__dict__['code'].__set__, 'set')}"
                      f"({outcome}, {failure_code})")
            code.emit(f"{code.const(Failure.__dict__['message'].__set__, 'set')}"
                      f"({outcome}, {message})")
        for command, cls in _SUCCESS_FOR.items():
            with code.block(f"elif {answered} == {int(command)}"):
                code.emit(f"{outcome} = {Composite(layout_of(cls)).read(code, '')}")
                code.flush()
        return answers, outcome


#: Command 20 after the correlation: see :class:`_ReplyOutcome`.
OUTCOME: Final = _ReplyOutcome()


@attrs.frozen(kw_only=True)
class Reply:
    """Command 20: the terminal result of a 39 request, a 47, a 48, a 60 or a 61.

    ``answers`` names the request's command; ``outcome`` is a
    :class:`Failure` or the success tail of that command. The writer takes
    ``outcome`` pre-encoded too (``frames.encode_message_outcome``): those bytes
    name the answered command themselves.
    """

    correlation: int = attrs.field(validator=ID.validator, metadata=wire(ID, "correlation"))
    answers: Command = attrs.field()
    outcome: Outcome = attrs.field(metadata=wire(OUTCOME, "outcome", slot=True))

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
