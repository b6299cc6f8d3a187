"""Message Follow: a message that reaches the old owner after a relocation goes on.

Theory of operation
-------------------
When a relocation commits, the source installs one :class:`FollowRoute` for the Spot
in its :class:`FollowRoutes`: ObjectGeneration, the owner generation it held, the new
owner's fence and owner generation, and an expiry ``MessageFollowDuration`` (30 s by
default; 0 installs none) from now.  From then on a command 39 that arrives for the
Spot on the old route -- a caller whose route cache still names this node -- is not
run here and costs no store read: :func:`follow` sends it on to the new owner as
route kind 3 with the same operation ID, deadline, payload and reply route (this node
keeps the correlation and hands the reply back on the link the message came on).  The
messages the Spot's hold took in while it was sealed leave the same way, from the
source itself (:func:`relay_held`).

The relay streams
-----------------
The hold has no bound of its own (unlike a Spot's lanes), so it may be far larger than a
link may queue (``max_send_buffer_bytes``, 64 MiB, closes a link whose queue passes it).
:func:`relay_held` therefore never queues it at once: it registers the Spot's relay
queue (``FollowRoutes.start_relay``) in the continuation that disposed of the source,
then sends the queue one frame after another within the link's flow control -- while the
link holds more than its high-water mark (1 MiB) unsent, it waits until the writes
brought it down (``Link.wait_writable``), and it lets the other tasks run every
:data:`RELAY_BATCH` frames.  At most about that mark of the hold is encoded at any time,
and a frame another call queues on the link meanwhile waits behind no more.  Order is
kept: until the queue is drained, every message this node forwards to the Spot along
its route (:func:`queue_behind`) joins the queue's tail, and the relay ends in the
continuation that found the queue empty (a local caller's message goes to the new owner
directly, which keeps it waiting until the relay is over: "The end of the relay").
A link that takes nothing for the node's ``default_timeout`` is closed (its peer stopped
reading); what is left then ends ``Unavailable``, as when the new owner cannot be
reached.

The route is checked before anything is sent: another ObjectGeneration is
``InvalidOperation`` (the route belongs to another incarnation); an owner generation
newer than the one the route was installed for, or an expired or missing route, is
``Unavailable``.  An older one follows too: the Spot was here at that generation,
came back later and left again, and the caller's route predates all of it.

A Spot that moved again forwards again: each hop raises the owner generation by one (it
can never loop) and the frame counts its hops -- the ninth is refused with
``Unavailable`` (a message follows up to 8 hops).  The routes are kept in memory only
and dropped when they expire; nothing is resent when a forward fails (no call is ever
resent automatically).

A held message keeps what it came with: the operation ID its caller's frame carried (or
its local call drew), its deadline, payload and reply route: a move keeps a message's
operation ID, generation and reply route as they are.  Only a local call that never
drew an ID gets one when it leaves.

The end of the relay
--------------------
Until the hold is relayed, a sender *on the target node* (or one whose route already
names it) could overtake its own held message: its later call is admitted there at once.
So the target runs only the moved queue and followed messages at first, and keeps what
else it admits waiting (``Incarnation.relay_wait``) until the source says its relay is
over: :func:`relay_done` sends command 62 on the relay's link, after the hold's last
frame (a link keeps its order), and :func:`relay_finished` takes it at the target --
only from the node the Spot moved from, for that incarnation and owner generation. The
target stops waiting too once the link the move came on closed (a source that died
sends nothing), and at the latest ``default_timeout`` after its commit.

The receiver
------------
A followed message is checked where it arrives, too (:func:`check_followed`): only the
incarnation a relocation opened there takes it in, and only as that relocation left it
(its ``incarnation.arrival.Arrival``) -- the same ObjectGeneration (else
``InvalidOperation``), source and target owner generations one apart with the target's
the incarnation's own, and sent by the node it moved from (else ``Unavailable``: another
owner fence).  Ordinary messages are never filtered by generation; these are the move
relay's, which is (docs/concepts.md, "Generations").  An operation ID that already
reached the incarnation along the move -- moved with the queue or followed before -- is
a redelivery: it is refused with ``InvalidOperation`` and runs at most once.  A followed
message whose deadline passed on the way is not admitted (``DeadlineExceeded``): the
receiver remembers an operation ID until its deadline only.
"""

from __future__ import annotations

import functools
import logging
from contextlib import nullcontext
from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import DeadlineExceeded, InvalidOperation, Unavailable, ZLinkError
from zlink_trio.runtime.calls.deadlines import deadline_from_wall_ms
from zlink_trio.runtime.calls.delivery import SEND, Delivery
from zlink_trio.runtime.mesh.link_reply import LinkReply
from zlink_trio.runtime.mesh.remote_calls import send_spot_message
from zlink_trio.runtime.observe.events import follow_event
from zlink_trio.runtime.observe.fields import FollowEvent
from zlink_trio.wire.frames import ActivationRoute, RelayDone
from zlink_trio.wire.frames import FollowRoute as FollowFrameRoute

if TYPE_CHECKING:
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import OwnerFence
    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.incarnation.incarnation import Incarnation
    from zlink_trio.runtime.incarnation.work import MessageWork
    from zlink_trio.runtime.mesh.follow_routes import (
        FollowRoute,
        FollowRoutes,
        RelayItem,
        RelayQueue,
    )
    from zlink_trio.runtime.mesh.peers import Peers
    from zlink_trio.runtime.state import NodeState
    from zlink_trio.transport import Link
    from zlink_trio.wire.frames import SpotMessage
    from zlink_trio.wire.handshake import PeerIdentity

__all__ = ("MAX_HOPS", "RELAY_BATCH", "check_followed", "follow", "follow_now", "next_hop",
           "queue_behind", "relay_done", "relay_finished", "relay_held", "superseded")

logger: Final = logging.getLogger("zlink_trio.runtime.relocation")

#: How many Message Follow routes one message may take.
MAX_HOPS: Final = 8
#: A relay lets the other tasks run after this many frames, even while its link is
#: writable (the socket took them all at once).
RELAY_BATCH: Final = 64


def superseded(route: FollowRoute, frame: SpotMessage) -> bool:
    """Whether ``route`` does not apply to ``frame``, which is then handled as if this
    node had no route (a direct message: "no longer owns"; a followed one: Unavailable).

    So it is when ``frame`` names an owner generation this node took *after* installing
    the route (the Spot came back here and has since closed here: a later move would have
    replaced the route), and when a direct message names another ObjectGeneration than
    the route (it was sent to an incarnation that closed here; the route belongs to a
    later one). A *followed* message of another ObjectGeneration is not superseded:
    :func:`next_hop` refuses it with InvalidOperation.
    """
    incoming = frame.route
    if isinstance(incoming, ActivationRoute):
        return False
    if incoming.object_generation != route.object_generation:
        return not isinstance(incoming, FollowFrameRoute)
    held = incoming.target_owner_generation if isinstance(incoming, FollowFrameRoute) \
        else incoming.owner_generation
    return held > route.source_owner_generation


def _hop(route: FollowRoute, frame: SpotMessage) -> int | tuple[FollowEvent, ZLinkError]:
    """The hop count of ``frame`` sent on along ``route``, or why it may not go on."""
    incoming = frame.route
    if isinstance(incoming, ActivationRoute):
        return FollowEvent.DROP_ENVELOPE, InvalidOperation(
            f"an activation envelope of Spot {route.spot_id!r} reached a node it moved away "
            "from; nothing was created")
    if incoming.object_generation != route.object_generation:
        return FollowEvent.DROP_GENERATION, InvalidOperation(
            f"the message to Spot {route.spot_id!r} names ObjectGeneration "
            f"{incoming.object_generation}, but this node's Message Follow route is for "
            f"generation {route.object_generation}; the message was not run"
        )
    if isinstance(incoming, FollowFrameRoute):
        held, hops = incoming.target_owner_generation, incoming.hops + 1
    else:
        held, hops = incoming.owner_generation, 1
    if held > route.source_owner_generation:
        # Addressed to an owner generation this node never held before its latest move
        # (an older one did: the Spot came back and left again, and the caller's route
        # predates that -- it follows the same way).
        return FollowEvent.DROP_OWNER_GENERATION, Unavailable(
            f"the message to Spot {route.spot_id!r} names owner generation {held}, newer "
            f"than the {route.source_owner_generation} this node's Message Follow route "
            "was installed for; the message was not run. Send a new call"
        )
    if hops > MAX_HOPS:
        return FollowEvent.DROP_MAX_HOPS, Unavailable(
            f"the message to Spot {route.spot_id!r} followed {MAX_HOPS} relocations already; "
            "it was not run. Send a new call (it resolves the current owner)"
        )
    return hops


def next_hop(route: FollowRoute, frame: SpotMessage) -> int:
    """The hop count of ``frame`` sent on along ``route``; raises when it may not go on."""
    hop = _hop(route, frame)
    if isinstance(hop, int):
        return hop
    raise hop[1]


def _route_frame(route: FollowRoute, hops: int) -> FollowFrameRoute:
    return FollowFrameRoute(
        spot_id=route.spot_id, object_generation=route.object_generation,
        source_owner_generation=route.source_owner_generation,
        target_owner_generation=route.target_owner_generation, target=route.target,
        hops=hops)


def _forwarded(rt: NodeState, route: FollowRoute, frame: SpotMessage,
               reply: Completion | None) -> tuple[Delivery, FollowFrameRoute]:
    hops = _hop(route, frame)
    if not isinstance(hops, int):
        follow_event(rt.node_id, rt.metrics, hops[0], route.spot_id, route.object_generation, None,
                     hops[1].message)
        raise hops[1]
    call = Delivery(
        spot_id=route.spot_id, msg=None, size=len(frame.payload.body), intent=None,
        completion=reply, reply=SEND, deadline=deadline_from_wall_ms(frame.deadline_ms),
        op_id=f"{frame.operation_id:016x}", encoded=frame.payload, metadata=frame.metadata)
    return call, _route_frame(route, hops)


def follow_now(rt: NodeState, peers: Peers, route: FollowRoute, frame: SpotMessage,
               reply: Completion | None) -> bool:
    """Send ``frame`` on along ``route`` now if the link to the new owner is open.

    ``False`` (nothing sent) when it is not: call :func:`follow`, which dials it. Sending
    in the caller's continuation keeps one sender's messages in order. Raises
    Unavailable / InvalidOperation (module docstring) without sending anything.
    """
    link = peers.open_link_to(route.target)
    if link is None:
        return False
    call, route_frame = _forwarded(rt, route, frame, reply)
    _send(rt, peers, call, link, route_frame)
    return True


async def follow(rt: NodeState, peers: Peers, route: FollowRoute, frame: SpotMessage,
                 reply: Completion | None) -> None:
    """Send ``frame`` on along ``route``, dialing the new owner; see :func:`follow_now`."""
    call, route_frame = _forwarded(rt, route, frame, reply)
    try:
        link = await peers.link_to_owner(route.target, f"Spot {route.spot_id!r}")
    except Unavailable as exc:
        follow_event(rt.node_id, rt.metrics, FollowEvent.DROP_UNREACHABLE, route.spot_id,
                     route.object_generation, route_frame.hops, exc.message)
        raise
    _send(rt, peers, call, link, route_frame)


def _send(rt: NodeState, peers: Peers, call: Delivery, link: Link,
          route_frame: FollowFrameRoute) -> None:
    """Send one followed message; a hop when it left, a drop when the link refused it.

    A traced message's hop is a ``zlink.follow`` span (``observe.tracing``) in its trace.
    """
    try:
        metadata = call.metadata if rt.tracing.enabled else None
        with rt.tracing.span(
                "zlink.follow", rt.tracing.context_of(metadata),
                attributes={"zlink.spot_id": route_frame.spot_id,
                            "zlink.generation": route_frame.object_generation,
                            "zlink.follow.hops": route_frame.hops,
                            "zlink.mesh": rt.mesh}) if metadata is not None else nullcontext():
            send_spot_message(rt, peers, call, link, route_frame)
    except Unavailable as exc:
        follow_event(rt.node_id, rt.metrics, FollowEvent.DROP_UNREACHABLE, route_frame.spot_id,
                     route_frame.object_generation, route_frame.hops, exc.message)
        raise
    follow_event(rt.node_id, rt.metrics, FollowEvent.HOP, route_frame.spot_id,
                 route_frame.object_generation, route_frame.hops)


def queue_behind(rt: NodeState, peers: Peers, queue: RelayQueue, route: FollowRoute,
                 frame: SpotMessage, reply: Completion | None) -> None:
    """Send ``frame`` along ``route`` behind the relay under way (``queue``), in order.

    Checks the route as :func:`follow_now` does (and raises the same, sending nothing).
    """
    call, route_frame = _forwarded(rt, route, frame, reply)
    queue.append(functools.partial(_relay_one, rt, peers, call, route_frame))


def _relay_one(rt: NodeState, peers: Peers, call: Delivery, route_frame: FollowFrameRoute,
               to: Link | ZLinkError) -> None:
    """One relayed message: sent on the link ``to``, or ended with the error ``to``."""
    try:
        if isinstance(to, ZLinkError):
            follow_event(rt.node_id, rt.metrics, FollowEvent.DROP_UNREACHABLE,
                         route_frame.spot_id, route_frame.object_generation,
                         route_frame.hops, to.message)
            raise to
        _send(rt, peers, call, to, route_frame)
    except ZLinkError as exc:  # (the link refused it, or its message cannot be encoded)
        if call.completion is not None:
            call.completion.set_error(exc)


def _held_call(route: FollowRoute, work: MessageWork, size: int) -> Delivery:
    """The delivery of one held message along ``route`` (its reply route kept)."""
    reply = work.info.reply_type
    return Delivery(
        spot_id=route.spot_id, msg=work.msg, size=size, intent=None,
        completion=work.completion,
        reply=SEND if isinstance(work.completion, LinkReply) else reply,
        deadline=work.deadline,
        op_id=f"{work.operation_id:016x}" if work.operation_id else "", encoded=None)


def _relay_held_one(rt: NodeState, peers: Peers, route: FollowRoute,
                    route_frame: FollowFrameRoute, work: MessageWork, size: int,
                    to: Link | ZLinkError) -> None:
    # (The Delivery is built when its frame is: the queue holds no more than the hold.)
    _relay_one(rt, peers, _held_call(route, work, size), route_frame, to)


async def relay_held(rt: NodeState, peers: Peers, routes: FollowRoutes, route: FollowRoute,
                     held: list[tuple[MessageWork, int]]) -> None:
    """Relay the hold of a Spot that moved, in arrival order, along its new route.

    Each message keeps its operation ID (module docstring) and its reply route: a local
    caller's completion is completed with the decoded reply, a remote requester's (a
    ``LinkReply``) with the encoded one.
    One that cannot be sent ends with the error; nothing is resent.

    The Spot's relay queue is registered in ``routes`` before the first await: call
    this in the continuation that disposed of the source, and no message sent after
    the commit and forwarded along ``route`` can overtake a held one
    of the same sender -- it joins the queue's tail. The queue is then streamed
    within the link's flow control (module docstring, "The relay streams"); this
    returns once it is empty.
    """
    queue = routes.start_relay(route.spot_id)
    route_frame = _route_frame(route, 1)
    queue.extend(functools.partial(_relay_held_one, rt, peers, route, route_frame, work, size)
                 for work, size in held)
    try:
        await _stream(rt, peers, route, queue)
    finally:
        # (No await since the queue was last found empty: nothing is left behind.)
        routes.end_relay(route.spot_id, queue)
        _end_all(queue, Unavailable(
            f"the relay of Spot {route.spot_id!r} to its new owner was cancelled; the "
            "message was not sent. Send a new call"))


async def relay_done(rt: NodeState, peers: Peers, route: FollowRoute) -> None:
    """Command 62 to ``route.target``: the hold of the Spot that moved along ``route`` is
    relayed (call it once :func:`relay_held` returned, or without a hold). A target that
    cannot be reached within ``default_timeout`` ends its wait at its own deadline."""
    link: Link | None = peers.open_link_to(route.target)
    if link is None:
        with trio.move_on_after(rt.options.default_timeout):
            try:
                link = await peers.link_to_owner(route.target, f"Spot {route.spot_id!r}")
            except Unavailable:
                link = None
    if link is None:
        return
    try:
        link.send_nowait(RelayDone(spot_id=route.spot_id,
                                   object_generation=route.object_generation,
                                   owner_generation=route.target_owner_generation))
    except ZLinkError as exc:  # the link closed: the target's deadline ends its wait
        logger.info("the end of the relay of Spot %r was not sent: %s", route.spot_id, exc)


def relay_finished(host: Incarnation | None, peer: PeerIdentity, frame: RelayDone) -> bool:
    """Command 62 at the target: ``host`` (the Spot's incarnation here, if any) stops
    waiting for the relay when the frame names how it arrived and came from the node it
    moved from; ``False`` (ignored) for any other incarnation or sender."""
    arrival = None if host is None else host.arrival
    if (host is None or arrival is None or host.generation != frame.object_generation
            or arrival.owner_generation != frame.owner_generation
            or not _same_lifecycle(peer, arrival.source)):
        return False
    host.end_relay_wait()
    return True


def _end_all(queue: RelayQueue, error: ZLinkError) -> None:
    while queue:
        queue.popleft()(error)


async def _stream(rt: NodeState, peers: Peers, route: FollowRoute, queue: RelayQueue) -> None:
    """Send ``queue`` to ``route.target``, oldest first, within the link's flow control."""
    link: Link | None = peers.open_link_to(route.target)
    if link is None:
        try:
            link = await peers.link_to_owner(route.target, f"Spot {route.spot_id!r}")
        except Unavailable as exc:
            _end_all(queue, exc)
            return
    stall = rt.options.default_timeout
    sent = 0
    while queue:
        item: RelayItem = queue.popleft()
        item(link)
        sent += 1
        if not link.writable:
            with trio.move_on_after(stall) as waited:
                await link.wait_writable()
            if waited.cancelled_caught:
                logger.warning(
                    "closing the link to %s: it took nothing of the relay of Spot %r for "
                    "%s s (the peer is not reading)", route.target, route.spot_id, stall)
                link.close_soon()
                _end_all(queue, Unavailable(
                    f"the link to the new owner of Spot {route.spot_id!r} took nothing for "
                    f"{stall} s and was closed; the message was not sent. Send a new call"))
                return
        elif sent % RELAY_BATCH == 0:
            await trio.lowlevel.checkpoint()


def _same_lifecycle(peer: PeerIdentity, fence: OwnerFence) -> bool:
    return (peer.lifecycle_generation == fence.lifecycle_generation
            and peer.node_rid.value == fence.node_rid.value)


def check_followed(rt: NodeState, host: Incarnation, peer: PeerIdentity, frame: SpotMessage,
                   deadline: Deadline) -> None:
    """Let a followed message (route kind 3) that reached ``host``'s node from ``peer`` in,
    or raise why not (module docstring, "The receiver"): InvalidOperation for another
    ObjectGeneration or a redelivered operation ID, Unavailable when it does not follow
    the relocation that brought ``host`` here, DeadlineExceeded past its deadline.
    Records the operation ID when it lets the message in."""
    route = frame.route
    assert isinstance(route, FollowFrameRoute)
    spot_id = route.spot_id
    if route.object_generation != host.generation:
        follow_event(rt.node_id, rt.metrics, FollowEvent.DROP_GENERATION, spot_id,
                     route.object_generation, route.hops)
        raise InvalidOperation(
            f"the message followed Spot {spot_id!r} generation {route.object_generation}, "
            f"but this node hosts generation {host.generation}; the message was not run")
    arrival = host.arrival
    if arrival is None or route.target_owner_generation != arrival.owner_generation \
            or route.source_owner_generation + 1 != route.target_owner_generation:
        held = "no owner generation it moved in with" if arrival is None \
            else f"owner generation {arrival.owner_generation}"
        follow_event(rt.node_id, rt.metrics, FollowEvent.DROP_OWNER_GENERATION, spot_id,
                     route.object_generation, route.hops)
        raise Unavailable(
            f"the message followed Spot {spot_id!r} from owner generation "
            f"{route.source_owner_generation} to {route.target_owner_generation}, but this "
            f"node hosts it at {held}; no relocation here matches, so the message was not "
            "run. Send a new call")
    if not _same_lifecycle(peer, arrival.source):
        follow_event(rt.node_id, rt.metrics, FollowEvent.DROP_OWNER_GENERATION, spot_id,
                     route.object_generation, route.hops)
        raise Unavailable(
            f"a message following Spot {spot_id!r} came from node {peer.node_id!r}, but the "
            f"Spot moved here from {arrival.source}, the only node that relays to it; the "
            "message was not run. Send a new call")
    now = trio.current_time()
    if now >= deadline.at:
        raise DeadlineExceeded(
            f"the message followed Spot {spot_id!r} but its deadline passed on the way; it "
            "was not run. Use a longer .timeout()")
    if not arrival.first_delivery(frame.operation_id, deadline.at, now):
        raise InvalidOperation(
            f"operation {frame.operation_id:016x} already reached Spot {spot_id!r} here along "
            "its relocation; the redelivery was not run (an operation runs at most once)")
