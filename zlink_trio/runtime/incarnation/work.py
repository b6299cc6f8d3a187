"""The work items a Spot's incarnation runs as turns: messages, timer ticks, lifecycle work.

A :class:`MessageWork` is one admitted message -- decoded, matched to its handler, with
the completion its reply goes to (``None`` for a one-way send), the call's deadline and
its operation ID (the caller's, kept when the message moves with a relocation or follows
it); the restored first record of a cold activation carries its
:class:`~zlink_trio.runtime.incarnation.first_record.FirstRecord`.  A timer tick is a
:class:`~zlink_trio.runtime.incarnation.timers.TimerWork`.  Both wait in the
incarnation's application lane (``core.lanes``) until their turn.  A
:class:`LifecycleWork` is a request of the framework's own -- a relocation's seal,
``ctx.close()``'s BeginClose -- and waits in the lifecycle lane, ahead of them.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import attrs

from zlink_trio.runtime.incarnation.timers import TimerWork

if TYPE_CHECKING:
    import trio

    from zlink_trio.core.deadline import Deadline
    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.incarnation.first_record import FirstRecord

__all__ = ("LifecycleKind", "LifecycleWork", "MessageWork", "Work")


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
    #: The trace context of the call (``observe.tracing``): the handler turn is a span
    #: in it. ``None``: untraced.
    trace: object | None = None



class LifecycleKind(enum.Enum):
    """What a :class:`LifecycleWork` asks of the incarnation's task."""

    #: A relocation sealed the incarnation: its turn is the first moment no handler runs,
    #: where the coordinator captures the queue (``Incarnation.wait_no_turn``).
    SEAL = "seal"
    #: ``ctx.close()`` was called: its turn runs the BeginClose, right after the turn
    #: that asked for it.
    BEGIN_CLOSE = "begin_close"


@attrs.define(eq=False)
class LifecycleWork:
    """Lifecycle work waiting for (or running in) a turn of the lifecycle lane."""

    kind: LifecycleKind
    #: Set once its turn ran or it was dropped (a seal's coordinator waits for it).
    ran: trio.Event | None = None

    def finished(self) -> None:
        """Its turn ran, or it will never run: wake whoever waits for it."""
        if self.ran is not None:
            self.ran.set()


#: What an incarnation's lanes hold.
Work = MessageWork | TimerWork | LifecycleWork
