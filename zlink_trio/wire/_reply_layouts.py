"""The field layout of the reply (command 20) and its success tails.

Theory of operation
-------------------
A reply's fixed head -- correlation, terminal result, failure code and the
command it answers -- is followed by a tail: a failure's message (a
:class:`Failure` answers any command the same way, so it needs no row), or
the success tail of the answered command. :data:`OUTCOMES` holds those tails
as :mod:`zlink_trio.wire._frame_rules` rows, one per outcome class, tagged by
the command they answer (39, 47, 48, 60); ``read_reply`` refuses a reply to
any other command, and an OK reply whose tail is not its command's. As in
:mod:`zlink_trio.wire._frame_layouts`, ``write_reply`` appends the fields of
an already validated frame and ``read_reply`` reads a peer's bytes through
the checking :class:`Reader`, refusing anything out of range with
:class:`RemoteProtocolError` (``docs/wire.md`` has the byte tables).

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from zlink_trio.core.errors import RemoteProtocolError
from zlink_trio.wire._frame_rules import Bodies, Rule, rule, rule_for
from zlink_trio.wire._frame_types import (
    CloseOutcome,
    Command,
    CreateOutcome,
    Failure,
    MessageOutcome,
    NodeOperationOutcome,
    Outcome,
    RelocateOutcome,
    Reply,
    TerminalResult,
    WireCreateState,
)

if TYPE_CHECKING:
    from zlink_trio.wire._frame_fields import Reader, Writer

__all__ = ("OUTCOMES", "OUTCOME_FOR", "read_reply", "reply_bodies", "write_reply")

_CREATE_STATES: Final = frozenset(int(state) for state in WireCreateState)


def _write_created(w: Writer, outcome: CreateOutcome) -> None:
    w.u8(outcome.state)
    w.spot_ref(outcome.ref)
    w.optional_payload(outcome.reply)


def _read_created(r: Reader, max_body_bytes: int) -> CreateOutcome:
    raw_state = r.u8("create state")
    if raw_state not in _CREATE_STATES:
        raise RemoteProtocolError(
            f"unknown create state {raw_state}; known: 1 (existing), 2 (created), 3 (rejected)"
        )
    state = WireCreateState(raw_state)
    ref = r.spot_ref("SpotRef")
    reply = r.optional_payload("create reply", max_body_bytes)
    if state is WireCreateState.EXISTING and reply is not None:
        raise RemoteProtocolError("an EXISTING create result carries an application reply")
    return CreateOutcome(state=state, ref=ref, reply=reply)


def _write_closed(w: Writer, outcome: CloseOutcome) -> None:
    w.flag(outcome.closed)


def _read_closed(r: Reader, max_body_bytes: int) -> CloseOutcome:
    return CloseOutcome(closed=r.flag("closed"))


def _write_answered(w: Writer, outcome: MessageOutcome) -> None:
    w.optional_payload(outcome.reply)


def _read_answered(r: Reader, max_body_bytes: int) -> MessageOutcome:
    return MessageOutcome(reply=r.optional_payload("reply", max_body_bytes))


def _reply_body(outcome: CreateOutcome | MessageOutcome) -> Bodies:
    return (outcome.reply,)


def _write_relocated(w: Writer, outcome: RelocateOutcome) -> None:
    w.spot_ref(outcome.ref)


def _read_relocated(r: Reader, max_body_bytes: int) -> RelocateOutcome:
    return RelocateOutcome(ref=r.spot_ref("SpotRef"))


def _write_operated(w: Writer, outcome: NodeOperationOutcome) -> None:
    w.blob32(outcome.report)


def _read_operated(r: Reader, max_body_bytes: int) -> NodeOperationOutcome:
    return NodeOperationOutcome(report=r.blob32("node operation report", max_body_bytes))


#: A success tail: what an OK reply carries after the answered command.
Success = CreateOutcome | CloseOutcome | MessageOutcome | RelocateOutcome | NodeOperationOutcome

_OUTCOME_RULES: Final = (
    rule(MessageOutcome, Command.SPOT_MESSAGE, _write_answered, _read_answered, _reply_body),
    rule(CreateOutcome, Command.USER_SPOT_CREATE, _write_created, _read_created, _reply_body),
    rule(CloseOutcome, Command.USER_SPOT_CLOSE, _write_closed, _read_closed),
    rule(RelocateOutcome, Command.RELOCATE_SPOT, _write_relocated, _read_relocated),
    rule(NodeOperationOutcome, Command.NODE_OPERATION, _write_operated, _read_operated),
)
#: Command 20's success tails: outcome class -> its row (tag: the command it answers).
OUTCOMES: Final[dict[type, Rule[Success]]] = {row.cls: row for row in _OUTCOME_RULES}
#: Answered command -> the row of its success tail.
OUTCOME_FOR: Final[dict[int, Rule[Success]]] = {row.tag: row for row in _OUTCOME_RULES}
_KNOWN: Final = ", ".join(str(tag) for tag in OUTCOME_FOR)


def write_reply(w: Writer, frame: Reply) -> None:
    """Command 20: correlation, terminal result, failure code, answered command, tail."""
    outcome = frame.outcome
    w.u64(frame.correlation)
    w.u8(frame.terminal_result)
    w.u16(frame.failure_code)
    w.u8(frame.answers)
    if isinstance(outcome, Failure):
        w.text16(outcome.message)
    else:
        rule_for(OUTCOMES, outcome).write(w, outcome)


def read_reply(r: Reader, max_body_bytes: int) -> Reply:
    """Command 20."""
    correlation = r.u64_nonzero("correlation")
    result = r.u8("terminal result")
    code = r.u16("failure code")
    if result == TerminalResult.OK and code != 0:
        raise RemoteProtocolError(f"an OK reply has failure code {code}; it must be 0")
    if result == TerminalResult.FAILED and code == 0:
        raise RemoteProtocolError("a FAILED reply has failure code 0; it must be a ZLinkError code")
    if result not in (TerminalResult.OK, TerminalResult.FAILED):
        raise RemoteProtocolError(f"unknown terminal result {result}; known: 0 (ok), 1 (failed)")
    answers = r.u8("answered command")
    tail = OUTCOME_FOR.get(answers)
    if tail is None:
        raise RemoteProtocolError(f"a reply cannot answer command {answers}; known: {_KNOWN}")
    outcome: Outcome
    if result == TerminalResult.FAILED:
        outcome = Failure(code=code, message=r.text16("failure message"))
    else:
        outcome = tail.read(r, max_body_bytes)
    return Reply(correlation=correlation, answers=Command(answers), outcome=outcome)


def reply_bodies(frame: Reply) -> Bodies:
    """The application reply a successful 39 or 47 answer carries."""
    outcome = frame.outcome
    return () if isinstance(outcome, Failure) else rule_for(OUTCOMES, outcome).bodies(outcome)
