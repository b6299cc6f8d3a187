"""The target side of the mesh: frames other nodes send to this node's Spots.

Theory of operation
-------------------
:func:`inbound_handler` returns what the mesh's
:class:`~zlink_trio.runtime.mesh.peers.Peers` calls for every command 39, 47 and 48 an
authenticated link delivers, in arrival order, from the link's reader; each is handed
to the coordinator that serves it:

* **39, route kind 1** (direct call): admitted synchronously -- no task per message.
  The frame must name this lifecycle (else :class:`StaleRoute`: the node no longer owns
  the Spot, and nothing runs) and a local incarnation of the Spot must be serving (else
  StaleRoute); its :meth:`~zlink_trio.runtime.incarnation.incarnation.Incarnation.admit`
  is the message's one admission gate (the node admits work, its lease is valid, the
  incarnation is not closing).  Without a local incarnation the node's own admission is
  checked before anything else happens to the message.  One exception waits: while this
  node's own creation attempt for the ID is still running -- its CommitReady is in the
  store and another node read it before the activation task resumed to register the Spot
  -- the message is admitted once the attempt ended (behind the first message), bounded
  by its deadline.  Generations are not compared for ordinary messages
  (docs/concepts.md, "Generations"): the current Ready incarnation handles it.  The
  message is decoded with the handler's own class and admitted like a local call, with a
  :class:`LinkReply` as its completion.
* **39, route kind 3** (Message Follow, :mod:`~zlink_trio.runtime.mesh.message_follow`):
  a message that followed a relocated Spot.  Its new owner admits it like route kind 1
  once :func:`~zlink_trio.runtime.mesh.message_follow.check_followed` let it in: the
  generations are checked here, unlike an ordinary message's (generations filter
  lifecycle changes and the move relay only) -- the ObjectGeneration, the owner
  generations and the relaying node must be the ones the relocation gave the local
  incarnation, and an operation ID that already reached it is not run again -- and past
  its application lane's bounds (``Incarnation.admit_followed``: the route's queue has
  no bound, and a relayed hold was accepted at the source).  A node that no longer hosts
  the Spot sends it on if the Spot moved again, else it ends ``Unavailable``.  A route
  kind 1 message for a Spot that moved away from this node follows its Message Follow
  route the same way -- behind the hold, while that is still being relayed.
* **60** (:mod:`.remote_relocation`): take a sealed Spot over, answered by command 20.
* **39, route kind 2** (cold-activation envelope): checked the same way (lifecycle, Mesh,
  a served Instance type, a handler for the message), then run as a catalog task from
  the chart's ``checking_target_owner`` state by the same code as a local activation
  (:mod:`.activation`): the target re-reads the store, stores the
  envelope, reserves, and so on.  If another attempt owns the ID, the first message is handed to the
  resolver *here*, which delivers it exactly once to the current owner -- possibly a
  third node -- and relays that owner's reply back unchanged.
* **47 / 48**: a catalog task each (:mod:`.remote_create`, :mod:`.remote_close`), answered
  with one command 20.
* **61** (:mod:`.remote_operation`): an operator's relocate or drain request, a catalog
  task answered by command 20.

A request's command 20 goes back on the link it came from.  Failures before admission
are answered at once; a one-way send's failure is logged (the sender returned at
outbound admission).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import (
    DeadlineExceeded,
    StaleRoute,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.runtime.calls.deadlines import deadline_from_wall_ms
from zlink_trio.runtime.calls.delivery import SEND, Delivery, Intent
from zlink_trio.runtime.charts import COLD
from zlink_trio.runtime.coordinators.activation import ActivationJob, run_activation
from zlink_trio.runtime.coordinators.remote_close import serve_remote_close
from zlink_trio.runtime.coordinators.remote_create import serve_remote_create
from zlink_trio.runtime.coordinators.remote_operation import serve_node_operation
from zlink_trio.runtime.coordinators.remote_relocation import serve_relocate
from zlink_trio.runtime.coordinators.routing import deliver
from zlink_trio.runtime.incarnation.work import MessageWork
from zlink_trio.runtime.mesh.link_reply import LinkReply, send_reply
from zlink_trio.runtime.mesh.message_follow import (
    check_followed,
    follow,
    follow_now,
    queue_behind,
    relay_finished,
    superseded,
)
from zlink_trio.runtime.observe.events import follow_event, stale
from zlink_trio.runtime.observe.fields import FollowEvent, StaleReason
from zlink_trio.runtime.observe.logs import MESH as LOGGER
from zlink_trio.wire.frames import (
    ActivationRoute,
    Command,
    Failure,
    NodeOperation,
    RelayDone,
    RelocateSpot,
    Reply,
    SpotMessage,
    UserSpotCreate,
)
from zlink_trio.wire.frames import FollowRoute as FollowFrameRoute

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.catalog import Attempt
    from zlink_trio.runtime.incarnation.incarnation import Incarnation
    from zlink_trio.runtime.mesh.follow_routes import FollowRoute
    from zlink_trio.runtime.mesh.peers import InboundFrame
    from zlink_trio.transport import Link
    from zlink_trio.wire.frames import Outcome, Route

__all__ = ("inbound_handler",)


def _generation(route: Route) -> int | None:
    """The ObjectGeneration a route names (an activation envelope names none)."""
    return None if isinstance(route, ActivationRoute) else route.object_generation


def _fail(rt: NodeRuntime, completion: Completion | None, error: ZLinkError,
          frame: SpotMessage) -> None:
    if completion is not None:
        completion.set_error(error)
        return
    link = rt.peers.open_link_to(frame.source)
    sender = (f"node {link.peer.node_id!r}" if link is not None
              else f"a node whose link is gone (rid {frame.source.node_rid})")
    LOGGER.warning("node %r: a one-way message from %s (lifecycle %d) was not admitted: %s",
                   rt.node_id, sender, frame.source.lifecycle_generation, error.message)


def _direct(rt: NodeRuntime, link: Link, frame: SpotMessage) -> None:
    reply = (LinkReply(rt, rt.peers, link, frame.reply_correlation)
             if frame.reply_correlation else None)
    route = frame.route
    host = rt.catalog.hosts.get(route.spot_id)
    try:
        if host is None:
            # No incarnation here to decide its admission (``Incarnation.admit``, the only
            # gate of a message it reaches): the node decides before waiting or following.
            _check_admission(rt, route)
        target, owner = route.target, rt.owner
        # (Field by field: the fences are different objects with the same value.)
        if target is not owner and (
                target.lifecycle_generation != owner.lifecycle_generation
                or target.node_rid.value != owner.node_rid.value):
            stale(rt.node_id, rt.metrics, StaleReason.WRONG_LIFECYCLE, route.spot_id,
                  generation=_generation(route))
            raise rt.not_addressed_here(f"the message to Spot {route.spot_id!r}",
                                        route.target, "it was not run. Send a new call")
    except ZLinkError as exc:
        _fail(rt, reply, exc, frame)
        return
    if host is None:
        attempt = rt.catalog.attempts.get(route.spot_id)
        if attempt is not None:
            # This node's activation committed Ready in the store, and another node read
            # it and sent this, before the activation task resumed to register the Spot
            # (or it is still creating): admit it once that attempt has ended.
            rt.catalog.start_job(lambda: _admit_after(rt, link, attempt, frame, reply))
            return
        follow_route = rt.follow.get(route.spot_id, trio.current_time())
        if follow_route is not None and superseded(follow_route, frame):
            rt.follow.drop(route.spot_id)
            follow_route = None
        if follow_route is not None:  # it moved away: Message Follow
            try:
                relay = rt.follow.relay(route.spot_id)
                if relay is not None:  # behind the hold still being relayed, in order
                    queue_behind(rt, rt.peers, relay, follow_route, frame, reply)
                elif not follow_now(rt, rt.peers, follow_route, frame, reply):
                    rt.catalog.start_job(lambda: _follow(rt, follow_route, frame, reply))
            except ZLinkError as exc:
                _fail(rt, reply, exc, frame)
            return
        if isinstance(route, FollowFrameRoute):
            follow_event(rt.node_id, rt.metrics, FollowEvent.DROP_NO_ROUTE, route.spot_id,
                         route.object_generation, route.hops)
            _fail(rt, reply, Unavailable(
                f"Spot {route.spot_id!r} followed a relocation to this node, which neither "
                "hosts it nor has a Message Follow route for it; the message was not run. "
                "Send a new call"), frame)
            return
    _admit_direct(rt, link, frame, reply, host)


def _trace_of(rt: NodeRuntime, frame: SpotMessage) -> object | None:
    """The trace context ``frame`` carries, when this node traces (``observe.tracing``)."""
    metadata = frame.metadata
    if metadata is None or not rt.tracing.enabled:
        return None
    return rt.tracing.context_of(metadata)


def _check_admission(rt: NodeRuntime, route: Route) -> None:
    """The node's admission of a message no local incarnation decides on (yet)."""
    try:
        rt.check_admission()
    except StaleRoute:
        stale(rt.node_id, rt.metrics, StaleReason.LEASE_EXPIRED, route.spot_id,
              generation=_generation(route))
        raise


async def _follow(rt: NodeRuntime, route: FollowRoute, frame: SpotMessage,
                  reply: LinkReply | None) -> None:
    try:
        await follow(rt, rt.peers, route, frame, reply)
    except ZLinkError as exc:
        _fail(rt, reply, exc, frame)


async def _admit_after(rt: NodeRuntime, link: Link, attempt: Attempt, frame: SpotMessage,
                       reply: LinkReply | None) -> None:
    with trio.move_on_at(deadline_from_wall_ms(frame.deadline_ms).at):
        await attempt.done.wait()
    _admit_direct(rt, link, frame, reply)


def _admit_direct(rt: NodeRuntime, link: Link, frame: SpotMessage, reply: LinkReply | None,
                  host: Incarnation | None = None) -> None:
    """Admit a direct call (or a followed message, once :func:`check_followed` let it in)
    to the local incarnation (``host``, if the caller just looked it up), or fail it with
    StaleRoute."""
    route = frame.route
    try:
        if host is None:
            host = rt.catalog.hosts.get(route.spot_id)
        if host is None:
            stale(rt.node_id, rt.metrics, StaleReason.NO_INCARNATION, route.spot_id,
                  generation=_generation(route))
            raise StaleRoute(f"node {rt.node_id!r} no longer owns Spot {route.spot_id!r}; the "
                             "message was not run. Send a new call")
        deadline = deadline_from_wall_ms(frame.deadline_ms)
        if isinstance(route, FollowFrameRoute):
            check_followed(rt, host, link.peer, frame, deadline)
        payload = frame.payload
        info = host.spot_type.handlers.find_wire(payload.type_name)
        msg = rt.codec.decode(payload.type_name, payload.body, info.message_type)
        work = MessageWork(msg, info, reply, deadline, operation_id=frame.operation_id,
                           trace=_trace_of(rt, frame))
        if isinstance(route, FollowFrameRoute):
            host.admit_followed(work, len(payload.body))
        else:
            host.admit(work, len(payload.body))
    except ZLinkError as exc:
        _fail(rt, reply, exc, frame)


def _envelope(rt: NodeRuntime, link: Link, frame: SpotMessage) -> None:
    reply = (LinkReply(rt, rt.peers, link, frame.reply_correlation)
             if frame.reply_correlation else None)
    route = frame.route
    assert isinstance(route, ActivationRoute)
    try:
        rt.check_admission()
        if route.target_mesh != rt.mesh:
            raise StaleRoute(f"the activation envelope of Spot {route.spot_id!r} was addressed "
                             f"to mesh {route.target_mesh!r}, but node {rt.node_id!r} serves "
                             f"mesh {rt.mesh!r}; nothing was created")
        if route.target != rt.owner:
            raise rt.not_addressed_here(f"the activation envelope of Spot {route.spot_id!r}",
                                        route.target, "nothing was created")
        spot_type = rt.registry.lookup(route.stable_type, SpotKind.INSTANCE)
        payload = frame.payload
        info = spot_type.handlers.find_wire(payload.type_name)
        msg = rt.codec.decode(payload.type_name, payload.body, info.message_type)
    except ZLinkError as exc:
        _fail(rt, reply, exc, frame)
        return
    call = Delivery(
        spot_id=route.spot_id, msg=msg, size=len(payload.body),
        intent=Intent(route.stable_type, route.target_mesh), completion=reply, reply=SEND,
        deadline=deadline_from_wall_ms(frame.deadline_ms),
        op_id=f"{frame.operation_id:016x}-{frame.source.node_rid}", encoded=payload,
        shared=False, trace=_trace_of(rt, frame), metadata=frame.metadata)
    rt.catalog.start_job(lambda: _activate(rt, call, spot_type, info, frame))


async def _activate(rt: NodeRuntime, call: Delivery, spot_type: SpotType, info: HandlerInfo,
                    frame: SpotMessage) -> None:
    attempt = rt.catalog.begin_attempt(call.spot_id)
    if attempt is None:  # this node already competes for the ID: deliver once it decided
        await _relay(rt, call, frame)
        return
    await run_activation(ActivationJob(
        rt=rt, attempt=attempt, spot_type=spot_type, info=info, mesh=rt.mesh,
        spot_id=call.spot_id, msg=call.msg, size=call.size, completion=call.completion,
        deadline=call.deadline, op_id=call.op_id, state=COLD.st.checking_target_owner,
        redeliver=lambda: deliver(rt, call), trace=call.trace))


async def _relay(rt: NodeRuntime, call: Delivery, frame: SpotMessage) -> None:
    try:
        with trio.move_on_at(call.deadline.at):
            await deliver(rt, call)
            return
        raise DeadlineExceeded(f"the first message to Spot {call.spot_id!r} was not "
                               "admitted before its deadline; use a longer .timeout()")
    except ZLinkError as exc:
        _fail(rt, call.completion, exc, frame)


def _answer(rt: NodeRuntime, link: Link, correlation: int, answers: Command,
            run: Callable[[], Awaitable[Outcome | None]]) -> None:
    async def job() -> None:
        outcome = await run()
        if outcome is not None:
            send_reply(link, Reply(correlation=correlation, answers=answers, outcome=outcome))

    try:
        rt.check_admission()  # a draining node's catalog takes no new task
    except ZLinkError as exc:
        send_reply(link, Reply(correlation=correlation, answers=answers,
                          outcome=Failure.from_error(exc)))
        return
    rt.catalog.start_job(job)


def inbound_handler(rt: NodeRuntime) -> Callable[[Link, InboundFrame], None]:
    """The function :class:`~zlink_trio.runtime.mesh.peers.Peers` hands every inbound 39,
    47, 48, 60, 61 and 62 to."""

    def on_frame(link: Link, frame: InboundFrame) -> None:
        if isinstance(frame, SpotMessage):
            if isinstance(frame.route, ActivationRoute):
                _envelope(rt, link, frame)
            else:
                _direct(rt, link, frame)
        elif isinstance(frame, UserSpotCreate):
            _answer(rt, link, frame.correlation, Command.USER_SPOT_CREATE,
                    lambda: serve_remote_create(rt, frame))
        elif isinstance(frame, RelocateSpot):
            _answer(rt, link, frame.correlation, Command.RELOCATE_SPOT,
                    lambda: serve_relocate(rt, link, frame))
        elif isinstance(frame, NodeOperation):
            _answer(rt, link, frame.correlation, Command.NODE_OPERATION,
                    lambda: serve_node_operation(rt, frame))
        elif isinstance(frame, RelayDone):  # one-way: no answer
            relay_finished(rt.catalog.hosts.get(frame.spot_id), link.peer, frame)
        else:
            _answer(rt, link, frame.correlation, Command.USER_SPOT_CLOSE,
                    lambda: serve_remote_close(rt, frame))

    return on_frame
