"""The source side of the mesh: command 39 to another node, and request/reply round trips.

Theory of operation
-------------------
:func:`send_spot_message` hands a direct call to another node as one command 39 frame
and returns at *outbound admission* -- the moment the target's link accepted the
frame -- exactly like a local call returns at queue admission:

* route kind 1 (Ready) carries the authority's generations and the owner's lifecycle
  fence, taken from the store record or the positive route cache;
* route kind 2 (cold activation) carries the target Mesh, the target's lifecycle fence
  and descriptor version, the Spot ID and stable type -- no authority generation exists
  yet, and the source reserves nothing (``statecharts.cold_activation`` steps 8-9).

A request registers its correlation before the frame is queued; the target's command 20
completes the caller's :class:`Completion` with the decoded reply or the typed error.
Nothing is ever resent: a link that closes first ends the request :class:`Unavailable`.

:func:`round_trip` is the same for 47 and 48, whose caller waits for the reply itself.

The wire carries the operation ID as a 64-bit integer: the first 16 hex digits of the
call's uuid4 (random, non-zero with overwhelming probability; 1 otherwise), or, for a
call that has no operation ID (a direct call to a Ready Spot), 64 random bits
(from ``lowlevel.pooled_random``; from the injected generator one at a time).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar, cast

from zlink_trio.core.errors import (
    InvalidOperation,
    LocalProtocolError,
    RemoteProtocolError,
    StaleRoute,
    TypeMismatch,
    Unavailable,
    ZLinkError,
)
from zlink_trio.lowlevel.pooled_random import SYSTEM
from zlink_trio.runtime.calls.completion import Completion
from zlink_trio.runtime.observe.events import stale
from zlink_trio.runtime.observe.fields import StaleReason
from zlink_trio.wire.frames import (
    EncodedMessage,
    Failure,
    MessageOutcome,
    ReadyRoute,
    Reply,
    SpotMessage,
    encode_route,
    encode_spot_message,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import OwnerFence
    from zlink_trio.core.route_cache import CachedRoute
    from zlink_trio.runtime.calls.delivery import Delivery
    from zlink_trio.runtime.mesh.peers import Peers
    from zlink_trio.runtime.state import NodeState
    from zlink_trio.transport import Link
    from zlink_trio.wire.frames import Frame, Route

__all__ = (
    "completer",
    "operation_number",
    "outcome_of",
    "ready_route_bytes",
    "reply_value",
    "round_trip",
    "send_ready_call",
    "send_spot_message",
)


OutcomeT = TypeVar("OutcomeT")


def operation_number(op_id: str) -> int:
    """The wire operation ID (u64, non-zero) of the uuid4 ``op_id``."""
    return int(op_id.replace("-", "")[:16], 16) or 1


def _operation_number(rt: NodeState, call: Delivery) -> int:
    """The wire operation ID of ``call``: its operation ID's, or 64 fresh random bits.

    A call that has no operation ID yet (a direct call to a Ready Spot: only the wire
    needs one) gets no uuid4 drawn and formatted just to keep its first 16 hex digits.
    """
    if call.op_id:
        return operation_number(call.op_id)
    if rt.rng is None:  # the system's randomness, drawn many IDs at a time
        return SYSTEM.number64()
    return int.from_bytes(rt.random_bytes(8)) or 1




def _metadata(rt: NodeState, call: Delivery) -> bytes | None:
    """Command 39's metadata of ``call``: its own (a relayed or enveloped message's), or
    the trace context of a traced call (``observe.tracing``), written once."""
    if call.metadata is None and call.trace is not None:
        call.metadata = rt.tracing.metadata_of(call.trace)
    return call.metadata


def _encoded(rt: NodeState, call: Delivery) -> EncodedMessage:
    if call.encoded is not None:
        return call.encoded
    return rt.codec.encode(call.msg)


def reply_value(rt: NodeState, expected: object, outcome: MessageOutcome) -> object:
    """The reply value of a 39 request that asked for ``expected`` (a class, None or SEND).

    A relayed call (``expected`` not a class or None) passes the encoded reply through.
    """
    encoded = outcome.reply
    if expected is None:
        if encoded is not None:
            raise TypeMismatch(
                f"the remote handler replied {encoded.type_name!r}, but the request asked "
                "for reply=None; pass the handler's reply class"
            )
        return None
    if not isinstance(expected, type):
        return encoded
    if encoded is None:
        raise TypeMismatch(
            f"the remote handler replied nothing, but the request asked for "
            f"reply={expected.__qualname__}; pass reply=None"
        )
    return rt.codec.decode(encoded.type_name, encoded.body, expected)


def completer(rt: NodeState, call: Delivery) -> Callable[[Reply], None]:
    """What completes ``call``'s completion with a command 20 answering it."""
    completion = call.completion
    assert completion is not None

    def on_reply(reply: Reply) -> None:
        outcome = reply.outcome
        try:
            if isinstance(outcome, Failure):
                raise outcome.to_error()
            if not isinstance(outcome, MessageOutcome):
                raise RemoteProtocolError(
                    f"the reply to a Spot message carried {type(outcome).__name__}; the peer "
                    "is broken or speaks another protocol version"
                )
            completion.set_result(reply_value(rt, call.reply, outcome))
        except ZLinkError as exc:
            if isinstance(exc, StaleRoute | Unavailable):  # the next call resolves afresh
                rt.route_cache.invalidate(call.spot_id)
                if isinstance(exc, StaleRoute):
                    stale(rt.node_id, rt.metrics, StaleReason.ANSWERED, call.spot_id)
            completion.set_error(exc)
        except Exception as exc:  # never let one bad reply take the link down
            completion.set_error(InvalidOperation(
                f"the reply to the request to Spot {call.spot_id!r} could not be decoded "
                f"({type(exc).__name__}: {exc}); it ran on the owner"))

    return on_reply


def _on_lost(rt: NodeState, spot_id: str,
             completion: Completion) -> Callable[[Unavailable], None]:
    """The link closed before the reply: the call fails, the next one resolves afresh."""
    def on_lost(exc: Unavailable) -> None:
        rt.route_cache.invalidate(spot_id)
        completion.set_error(exc)

    return on_lost


def send_spot_message(rt: NodeState, peers: Peers, call: Delivery, link: Link,
                      route: Route) -> None:
    """Queue ``call`` on ``link`` as command 39; returns at outbound admission.

    Raises what the link raises (Unavailable when it is closed, InvalidOperation for a
    frame above the negotiated bound); nothing stays registered then.
    """
    completion = call.completion
    correlation = 0
    if completion is not None:
        correlation = peers.expect_reply(link, call.deadline, completer(rt, call),
                                            _on_lost(rt, call.spot_id, completion))
    frame = SpotMessage(
        route=route, operation_id=_operation_number(rt, call),
        reply_correlation=correlation,
        deadline_ms=call.deadline.wall_ms, source=rt.owner, source_spot_id=None,
        metadata=_metadata(rt, call), payload=_encoded(rt, call))
    # A lone request is written at once by this task (it waits for the reply next);
    # with others in flight the link's writer joins the frames of one scheduler pass.
    write = correlation != 0 and peers.pending <= 1
    try:
        link.send_nowait(frame, write=write)
    except BaseException:
        if correlation:
            peers.forget(correlation)
        raise
    peers.queued_on(link)  # over TLS the requester's flush writes it


def ready_route_bytes(spot_id: str, object_generation: int, owner_generation: int,
                      owner: OwnerFence) -> bytes:
    """Command 39's route kind 1 to ``owner`` for a Spot, checked (:class:`ReadyRoute`).

    A :class:`CachedRoute` to another node keeps these bytes (``wire_route``), so that
    every call on it reuses them.
    """
    return encode_route(ReadyRoute(spot_id=spot_id, object_generation=object_generation,
                                   owner_generation=owner_generation, target=owner))


def send_ready_call(rt: NodeState, peers: Peers, call: Delivery, link: Link,
                    route: CachedRoute) -> None:
    """Queue ``call`` on ``link`` as command 39, route kind 1 from the cached ``route``.

    The same frame as ``send_spot_message(rt, peers, call, link, ReadyRoute(...))``,
    written by command 39's writer (``frames.encode_spot_message``) from the call's
    fields, the route's bytes the cached route keeps and this node's encoded fence: no
    frame object is built per call. Returns at outbound admission; raises what
    :func:`send_spot_message` raises, and nothing stays registered then.
    """
    data_route = route.wire_route
    if data_route is None:  # a route built without its bytes (not by the resolver)
        assert route.owner is not None
        assert route.owner_generation is not None
        data_route = ready_route_bytes(call.spot_id, route.object_generation,
                                       route.owner_generation, route.owner)
    completion = call.completion
    correlation = 0
    if completion is not None:
        correlation = peers.expect_reply(link, call.deadline, completer(rt, call),
                                            _on_lost(rt, call.spot_id, completion))
    try:
        try:
            data = encode_spot_message(data_route, _operation_number(rt, call), correlation,
                                       call.deadline.wall_ms, peers.own_fence_bytes(),
                                       None, call.metadata if call.trace is None
                                       else _metadata(rt, call), _encoded(rt, call))
        except LocalProtocolError as exc:
            raise link.cannot_send(exc) from exc
        # As in send_spot_message: a lone request is written at once by this task.
        link.send_encoded_nowait(data, write=correlation != 0 and peers.pending <= 1)
    except BaseException:
        if correlation:
            peers.forget(correlation)
        raise
    if link.unwritten:  # (a lone request's write took it all: nothing to flush)
        peers.queued_on(link)


def outcome_of(reply: Reply, expected: type[OutcomeT], what: str) -> OutcomeT:
    """The outcome of ``reply`` as ``expected``; its typed error for a ``Failure``.

    Any other outcome is a :class:`RemoteProtocolError` (a broken peer).
    """
    outcome = reply.outcome
    if isinstance(outcome, Failure):
        raise outcome.to_error()
    if not isinstance(outcome, expected):
        raise RemoteProtocolError(f"{what} was answered with {outcome!r}; the peer is broken "
                                  "or speaks another protocol version")
    return outcome


async def round_trip(rt: NodeState, peers: Peers, link: Link, deadline: Deadline,
                     make: Callable[[int], Frame], what: str) -> Reply:
    """Send the frame ``make(correlation)`` on ``link`` and wait for its command 20.

    DeadlineExceeded at ``deadline``; Unavailable if the link closes first.
    """
    slot = Completion()
    correlation = peers.expect_reply(link, deadline, slot.set_result, slot.set_error)
    try:
        link.send_nowait(make(correlation))
        return cast("Reply", await slot.wait(deadline, what, rt.deadlines))
    finally:
        peers.forget(correlation)
