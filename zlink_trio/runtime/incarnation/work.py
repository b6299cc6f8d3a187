"""The work items a Spot's incarnation runs as turns: application messages and timer ticks.

A :class:`MessageWork` is one admitted message -- decoded, matched to its handler,
with the completion its reply goes to (``None`` for a one-way send), the call's
deadline and its operation ID (the caller's, kept when the message moves with a
relocation or follows it: 06 §6, §6.1); the restored first record of a cold activation carries its
:class:`~zlink_trio.runtime.incarnation.first_record.FirstRecord`.  A timer tick is
a :class:`~zlink_trio.runtime.incarnation.timers.TimerWork`.  Both wait in the incarnation's
lanes (``core.lanes``) until their turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from zlink_trio.runtime.incarnation.timers import TimerWork

if TYPE_CHECKING:
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.incarnation.first_record import FirstRecord

__all__ = ("MessageWork", "Work")


@attrs.define(eq=False)
class MessageWork:
    """An application message waiting for (or running in) a turn."""

    msg: object
    info: HandlerInfo
    completion: Completion | None
    deadline: Deadline
    first: FirstRecord | None = None
    #: The operation ID as the wire carries it (u64): the caller's, from the frame that
    #: brought the message, or from a local call that drew one; 0 while it has none (a
    #: local call to a Ready Spot draws none until it leaves the node).
    operation_id: int = 0



#: What an incarnation's lanes hold.
Work = MessageWork | TimerWork
