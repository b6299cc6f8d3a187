"""Capturing a sealed Spot for its move: state, timers and not-yet-run work.

:func:`capture` runs on the source once its host is sealed and no turn runs (the
``Incarnation`` chart's ``sealed``): it asks a ``PreserveStateWith`` adapter for the
Spot's bytes, lists the timers registered after activation and the ticks already
queued, and encodes the queued messages in order, each with its operation ID.  For
each queued request it registers a reply correlation on the link to the target: the
target runs the message and answers that correlation, and the original caller -- a
local completion, or a requester on another link -- is completed with the answer,
exactly as if the Spot had run it here.  A failure here (the adapter raised or
returned no bytes, a timer's callback is not a method of the Spot, a message that
cannot be encoded) raises before anything was sent, and the coordinator aborts the
move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import HandlerError, ZLinkError
from zlink_trio.runtime.calls.delivery import SEND, Delivery
from zlink_trio.runtime.coordinators.relocation_payload import (
    MovedMessage,
    MovedTimer,
    RelocationPayload,
)
from zlink_trio.runtime.declaration.policies import PreserveStateWith
from zlink_trio.runtime.declaration.spot_types import relocation_of
from zlink_trio.runtime.incarnation.timers import TimerWork, method_name
from zlink_trio.runtime.incarnation.work import MessageWork
from zlink_trio.runtime.mesh.link_reply import LinkReply
from zlink_trio.runtime.mesh.remote_calls import completer

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.incarnation.incarnation import Incarnation
    from zlink_trio.transport import Link

__all__ = ("capture",)


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _state(host: Incarnation) -> bytes | None:
    policy = relocation_of(host.spot_type)
    if not isinstance(policy, PreserveStateWith):
        return None
    try:
        data = policy.adapter.capture(host.instance)
    except Exception as exc:
        error = HandlerError(
            f"the relocation adapter of {host.spot_type.stable_type!r} raised "
            f"{type(exc).__qualname__}: {exc} (in capture); the move was aborted and the Spot "
            "keeps serving where it is", error_type=type(exc).__qualname__)
        raise error from exc
    if not isinstance(data, bytes):
        raise HandlerError(
            f"the relocation adapter of {host.spot_type.stable_type!r} returned "
            f"{type(data).__name__} from capture, not bytes; the move was aborted",
            error_type="TypeError")
    return data


def capture(rt: NodeRuntime, host: Incarnation, record: AuthorityRecord,
            link: Link) -> tuple[RelocationPayload, list[int]]:
    """The payload of ``host`` (sealed, idle) and the reply correlations registered.

    Raises HandlerError / InvalidOperation (module docstring); then no correlation
    stays registered.
    """
    instance = host.instance
    now = trio.current_time()
    timers = [MovedTimer(name, _ms(due_in), None if period is None else _ms(period))
              for name, due_in, period in host.timers.movable(instance, now)]
    messages: list[MovedMessage] = []
    correlations: list[int] = []
    try:
        state = _state(host)
        for item in host.lanes.application.queued_items():
            if isinstance(item, TimerWork):  # a tick already due: it fires at the target
                timers.append(MovedTimer(method_name(instance, item.callback), 0, None))
                continue
            assert isinstance(item, MessageWork)  # (lifecycle work has a lane of its own)
            encoded = rt.codec.encode(item.msg)
            correlation = 0
            if item.completion is not None:
                call = Delivery(
                    spot_id=record.spot_id, msg=item.msg, size=len(encoded.body),
                    intent=None, completion=item.completion,
                    reply=SEND if isinstance(item.completion, LinkReply)
                    else item.info.reply_type,
                    deadline=item.deadline, op_id="", encoded=encoded)  # (for its reply)
                correlation = rt.peers.expect_reply(link, item.deadline, completer(rt, call),
                                                    item.completion.set_error)
                correlations.append(correlation)
            messages.append(MovedMessage(encoded, item.deadline.wall_ms, correlation,
                                         item.operation_id))
    except ZLinkError:
        for correlation in correlations:
            rt.peers.forget(correlation)
        raise
    payload = RelocationPayload(
        spot_id=record.spot_id, object_generation=record.object_generation,
        stable_type=record.stable_type, mesh=record.mesh,
        owner_generation=record.owner_generation, state=state, timers=tuple(timers),
        messages=tuple(messages))
    return payload, correlations
