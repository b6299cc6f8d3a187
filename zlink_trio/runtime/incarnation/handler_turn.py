"""One message's handler turn: the checks before it, the call, the reply after it.

Theory of operation
-------------------
:func:`run_handler` is the part of a :class:`~.host.Host` turn that runs a message:

* a request whose caller already gave up (its completion is done) or whose deadline
  passed while it was queued is not run (``DeadlineExceeded``) -- except the restored
  first record of a cold activation, which is durable and always runs;
* an owner past its lease deadline starts no turn (09 §4; a process paused with work
  queued wakes up here and another lifecycle may own the Spot now): ``Unavailable``;
* the handler is called (through the runtime's observers when any are installed,
  ``runtime.observers``: the test kit holds and records turns there);
* its reply is checked against the declared reply type; an exception becomes
  ``HandlerError`` (a one-way send's failure is logged);
* a turn that ended **after** the lease deadline does not reply: the caller gets
  ``Unavailable``, because another lifecycle may own the Spot by now and this
  incarnation's state, with the handler's effect, is lost with it. It is the fencing
  rule on the reply (Kleppmann's fencing token, checked by whoever acts on the
  result); ``tests/chaos`` found the acknowledgement a paused owner gave without it.

The host keeps what follows the turn (the first record's completion, the queue).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from zlink_trio.core.errors import DeadlineExceeded, Unavailable
from zlink_trio.runtime import observers
from zlink_trio.runtime.incarnation.app_calls import check_reply, handler_error
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.work import MessageWork
    from zlink_trio.runtime.state import NodeState

__all__ = ("TurnHost", "lease_passed", "run_handler")


class TurnHost(Protocol):
    """What a handler turn reads of its incarnation (a :class:`~.host.Host`)."""

    @property
    def rt(self) -> NodeState: ...
    @property
    def spot_type(self) -> SpotType: ...
    @property
    def spot_id(self) -> str: ...
    @property
    def generation(self) -> int: ...
    @property
    def instance(self) -> object | None: ...

    def log_fields(self) -> dict[str, object]:
        """The structured log fields of this incarnation (``runtime.observe.fields``)."""


def lease_passed(rt: NodeState) -> bool:
    """Whether the owner's lease deadline passed (before a renewal moved it)."""
    return rt.clock() >= rt.lease_expires_at  # (``rt.now()``, one call less per turn)


async def run_handler(host: TurnHost, item: MessageWork,
                      now: Callable[[], float] = trio.current_time) -> float | None:
    """Run ``item``'s handler and complete its request; see the module docstring.

    ``now`` reads the Trio clock (the host passes the run's clock itself); when it is
    the store clock too (``rt.clock is now``, ``memory://``), one reading serves both
    checks before the turn, and the lease check after it is what this returns: the
    Trio time the turn ended (``None`` when it read none then; the host reads it).
    """
    completion, first, rt = item.completion, item.first, host.rt
    if first is None:
        at = now()
        if completion is not None:
            if completion.done:
                return None  # the caller's deadline already completed it
            if at >= item.deadline.at:
                completion.set_error(DeadlineExceeded(
                    f"the request to Spot {host.spot_id!r} waited in its queue past its "
                    "deadline and was not run; use a longer .timeout() or send less work"
                ))
                return None
        if (at if rt.clock is now else rt.clock()) >= rt.lease_expires_at:
            _refuse_past_lease(host, item, "was not run")
            return None
    try:
        if observers.OBSERVERS:
            result: Any = await _observed(host, item)
        else:
            result = await getattr(host.instance, item.info.name)(item.msg)
    except Exception as exc:
        what = f"handler {host.spot_type.cls.__qualname__}.{item.info.name}"
        if completion is not None:
            completion.set_error(handler_error(what, exc))
        else:
            LOGGER.error("Spot %r: %s raised on a one-way send", host.spot_id, what,
                         exc_info=exc, extra=host.log_fields())
        return None
    if completion is None:
        return None
    expected = item.info.reply_type
    # The declared class exactly (or None for ``-> None``); else check_reply words it.
    mismatch = (None if type(result) is expected or (result is None and expected is None)
                else check_reply(host.spot_type, item.info, result))
    ended = now() if rt.clock is now else None
    if (rt.clock() if ended is None else ended) >= rt.lease_expires_at:
        _refuse_past_lease(host, item, "ran, but its effect is lost")
    elif mismatch is None:
        completion.set_result(result)
    else:
        completion.set_error(mismatch)
    return ended


def _refuse_past_lease(host: TurnHost, item: MessageWork, what: str) -> None:
    """End ``item`` with Unavailable: the owner's lease deadline has passed."""
    error = Unavailable(
        f"Spot {host.spot_id!r}: this node's lease ran out at {host.rt.lease_expires_at} "
        f"before the turn ended (the process was paused or cut off from the store); the "
        f"message {what} and no reply is given, because another node may own the Spot "
        "now. Retry the call: it resolves the current owner"
    )
    if item.completion is not None:
        item.completion.set_error(error)
    else:
        LOGGER.warning("%s", error.message.replace("no reply is given", "it was one-way"),
                       extra=host.log_fields())


async def _observed(host: TurnHost, item: MessageWork) -> object:
    """Run ``item``'s handler with every observer told (and able to hold it first)."""
    node_id, name, msg = host.rt.node_id, item.info.name, item.msg
    spot_id, generation = host.spot_id, host.generation
    for observer in list(observers.OBSERVERS):
        await observer.before_turn(node_id, spot_id, generation)
    for observer in observers.OBSERVERS:
        observer.turn_began(node_id, spot_id, generation, name, msg)
    try:
        result: object = await getattr(host.instance, name)(msg)
    except Exception as exc:
        for observer in observers.OBSERVERS:
            observer.turn_ended(node_id, spot_id, generation, name, msg, None, exc)
        raise
    for observer in observers.OBSERVERS:
        observer.turn_ended(node_id, spot_id, generation, name, msg, result, None)
    return result
