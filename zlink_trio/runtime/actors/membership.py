"""Creating, moving and closing Actors on this node: the ActorMembership chart's driver.

Theory of operation
-------------------
Every operation reads or writes the Actor's authority record (kind ACTOR, naming its
container) with one fenced store transaction and keeps this node's view of its members
(``NodeState.members``, what ``ctx.members()`` lists) in the same continuation:

* :func:`create_actor` -- Reserve names the container (the Entry Spot of this node, or
  a User Spot this node owns: the store checks it is Ready and ours in the same
  transaction, so a Close of that Spot racing the create either sees the member or
  refuses the create), then the factory (``cls(ctx)``, ``on_activate``), CommitReady,
  and the host is registered and served in the same continuation as the commit. A
  factory that raises, or a deadline that passes, aborts with the same fence: nothing
  is left behind.
* :func:`move_actor` -- Join and Leave. Leave (back to this node's Entry Spot), and a
  Join of a User Spot this node owns, are one MoveMembership each: the Actor's queue,
  timers and state stay where they are. A Join of a User Spot another node owns moves
  the Actor there (``coordinators.relocation``: seal, capture by its policy, command
  60, commit with Message Follow), into that Spot: BeginRelocation names it as the
  Actor's next container, so the Spot cannot close while the Actor is on its way.
* :func:`close_actor` -- the Spot close procedure (``coordinators.close_operation``)
  for an Actor: seal, finish accepted turns, ``on_close(CLOSED)``, release; from any
  node (command 48 to its owner).

Each step is a step of the ActorMembership chart (``statecharts.actor_membership``):
``create`` once Reserve committed, ``admitted`` with the commit or ``create_failed``
with the abort; ``join`` / ``leave`` before the MoveMembership and ``*_committed`` or
``*_failed`` after it. The end (``close`` and ``released``, or ``lease_lost``) is
stepped when the Actor leaves the catalog (``NodeState.end_membership``), or here after
a move that was in flight then.

A control (join, leave, close) names an :class:`~zlink_trio.core.records.ActorRef`;
one whose generation is not the current incarnation's is InvalidOperation. The Entry
Spot of this node is the one its descriptor published (``NodeState.entry_spot_id``):
never derived from an ID.

An Actor on this node's Entry Spot is a relocation candidate like a Spot (a drain, a
stop that drains): it moves onto the Entry Spot of its target (the one that node's
descriptor names). Not yet (docs/actors.md): moves that carry a Spot's members
(SpotWide, PerActor), so a Spot with members does not relocate, and the members of a
User Spot close with their node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import (
    AlreadyExists,
    DeadlineExceeded,
    InvalidOperation,
    NotFound,
    TypeMismatch,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind, validate_spot_id, validate_user_spot_id
from zlink_trio.core.records import ActorRef, AuthorityState, SpotRef
from zlink_trio.runtime.charts import CLOSE, MEMBERSHIP, step
from zlink_trio.runtime.coordinators.close_operation import ACTOR_ONLY, close_here
from zlink_trio.runtime.coordinators.relocation import relocate_spot
from zlink_trio.runtime.coordinators.remote_close import close_remote
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER
from zlink_trio.runtime.results import RelocationOutcome
from zlink_trio.runtime.state import Membership
from zlink_trio.store import AuthorityExists

if TYPE_CHECKING:
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import ReservationFence
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime

__all__ = ("close_actor", "create_actor", "find_actor", "members_of", "move_actor")


def _deadline_passed(what: str) -> DeadlineExceeded:
    return DeadlineExceeded(f"{what} did not finish before its deadline; if its store step "
                            "began it still completes: check with node.actors.find()")


async def create_actor(rt: NodeRuntime, stable_type: str, actor_id: str | None,
                       container: str | None, deadline: Deadline) -> ActorRef:
    """Create an Actor of ``stable_type`` in ``container`` (``None``: this node's Entry
    Spot); its ActorRef. See the module docstring."""
    rt.check_usable()
    actor_type = rt.registry.lookup(stable_type, SpotKind.ACTOR)
    actor_id = rt.new_uuid4() if actor_id is None else validate_user_spot_id(actor_id)
    container = rt.entry_spot_id if container is None else validate_spot_id(container)
    with trio.move_on_at(deadline.at):
        with trio.CancelScope(shield=True):
            try:
                fence = await rt.store.location.reserve(
                    actor_id, kind=SpotKind.ACTOR, stable_type=stable_type, mesh=rt.mesh,
                    owner=rt.owner, now=rt.now(), container=container)
            except AuthorityExists as exc:
                raise AlreadyExists(
                    f"the ID {actor_id!r} already names {exc.current.kind.name.title()} "
                    f"{exc.current.stable_type!r} (Actors and Spots share one namespace); "
                    "choose another ActorId, or omit it for a fresh one") from None
        state = step(MEMBERSHIP, MEMBERSHIP.initial, MEMBERSHIP.ev.create)
        host = Incarnation(rt, actor_type, actor_id, fence.object_generation, rt.mesh)
        try:
            await host.build(None)
        except BaseException:
            with trio.CancelScope(shield=True):
                step(MEMBERSHIP, state, MEMBERSHIP.ev.create_failed)
                await host.activation_failed()
                await _abort(rt, fence)
            raise
        with trio.CancelScope(shield=True):
            try:
                rt.check_usable()  # no CommitReady once the lease is known lost
                ready = await rt.store.location.commit_ready(fence, now=rt.now())
            except ZLinkError as exc:
                step(MEMBERSHIP, state, MEMBERSHIP.ev.create_failed)
                await host.activation_failed()
                await _abort(rt, fence)
                raise Unavailable(f"creating Actor {actor_id!r} lost its reservation before "
                                  f"Ready ({exc.message}); nothing was created. Try again"
                                  ) from exc
            # Same continuation as the commit: a Ready Actor is reachable here at once.
            ref = ready.actor_ref()
            host.open(None)
            rt.admit_member(Membership(ref, step(MEMBERSHIP, state, MEMBERSHIP.ev.admitted)))
            rt.catalog.register(host)
            return ref
    raise _deadline_passed(f"creating Actor {actor_id!r}")


async def _abort(rt: NodeRuntime, fence: ReservationFence) -> None:
    """AbortCreating with the same fence (the caller shields); a failure is logged."""
    if rt.lease_lost:
        return  # an owner without a lease writes nothing; the record waits for recovery
    try:
        await rt.store.location.abort_creating(fence)
    except ZLinkError as exc:
        LOGGER.error("Actor %r: aborting a failed creation failed: %s", fence.spot_id, exc)


def _local_actor(rt: NodeRuntime, ref: ActorRef, what: str) -> Membership:
    """The membership of ``ref`` on this node; InvalidOperation for another generation,
    NotFound when it is not Ready here."""
    if not isinstance(ref, ActorRef):
        raise InvalidOperation(f"{what} takes an ActorRef (from node.actors.create or find), "
                               f"got {type(ref).__name__}")
    membership = rt.memberships.get(ref.actor_id)
    if membership is None:
        raise NotFound(f"Actor {ref.actor_id!r} is not Ready on this node; {what} runs on "
                       "the node that hosts the Actor: call it there (a request_actor "
                       "reaches the Actor wherever it is; docs/actors.md)")
    current = membership.ref.generation
    if current != ref.generation:
        raise InvalidOperation(
            f"Actor {ref.actor_id!r} is now generation {current}, not the ref's "
            f"{ref.generation}; a control never retargets a newer incarnation -- find() it "
            "and decide again")
    if not MEMBERSHIP.allows(membership.state, MEMBERSHIP.ev.join):
        raise Unavailable(f"Actor {ref.actor_id!r} is {membership.state} (another join, "
                          f"leave or close is under way); {what} it once that ended")
    return membership


async def move_actor(rt: NodeRuntime, ref: ActorRef, spot: SpotRef | str | None,
                     deadline: Deadline) -> ActorRef:
    """Join ``spot`` (a User Spot on any node), or leave (``None``: back to this node's
    Entry Spot); the Actor's new ActorRef. See the module docstring."""
    rt.check_usable()
    what = "leave" if spot is None else "join"
    membership = _local_actor(rt, ref, what)
    if spot is None:
        container = rt.entry_spot_id
    elif isinstance(spot, SpotRef):
        container = spot.spot_id
        room = rt.catalog.hosts.get(container)
        if room is not None and room.generation != spot.generation:
            raise InvalidOperation(
                f"Spot {container!r} is now generation {room.generation}, not the ref's "
                f"{spot.generation}; find() it and decide again")
    else:
        container = validate_spot_id(spot)
    to: str | None = None
    with trio.move_on_at(deadline.at):
        if container != rt.entry_spot_id and container not in rt.catalog.hosts:
            owner = await _owner_elsewhere(rt, container)
            if owner is not None:
                to = await _join_target(rt, membership, container, owner)
        if to is None:
            return await _move_here(rt, membership, container, spot is None)
    if to is None:
        raise _deadline_passed(f"the {what} of Actor {ref.actor_id!r}")
    # Outside the deadline's scope: the move keeps to the deadline itself. Cancelled from
    # outside at that same instant, it would strand between two store steps (sealed, its
    # abort never run: the Actor unavailable and the room unclosable until a restart).
    return await _join_elsewhere(rt, membership, container, to, deadline)


async def _owner_elsewhere(rt: NodeRuntime, container: str) -> NodeRid | None:
    """The NodeRid of another node that owns ``container``; ``None`` when it is this node's
    (or has no Ready record: the store step then says why)."""
    record = await rt.store.location.find(container)
    if record is None or record.state is not AuthorityState.READY:
        return None
    return None if record.owner == rt.owner else record.owner.node_rid


async def _move_here(rt: NodeRuntime, membership: Membership, container: str,
                     leave: bool) -> ActorRef:
    """Join or leave on this node: one MoveMembership (shielded: it is one store step)."""
    begin, committed, failed = ((MEMBERSHIP.ev.leave, MEMBERSHIP.ev.leave_committed,
                                 MEMBERSHIP.ev.leave_failed) if leave else
                                (MEMBERSHIP.ev.join, MEMBERSHIP.ev.join_committed,
                                 MEMBERSHIP.ev.join_failed))
    ref = membership.ref
    membership.state = step(MEMBERSHIP, membership.state, begin)
    with trio.CancelScope(shield=True):
        try:
            record = await rt.store.location.move_membership(
                ref.actor_id, object_generation=ref.generation, owner=rt.owner,
                container=container, now=rt.now())
        except BaseException:
            membership.state = step(MEMBERSHIP, membership.state, failed)
            if membership.ended is not None:
                membership.finish()
            raise
    moved = record.actor_ref()
    membership.state = step(MEMBERSHIP, membership.state, committed)
    rt.move_member(membership, moved)
    if membership.ended is not None:  # it left the catalog while the step ran
        membership.finish()
    return moved


async def _join_target(rt: NodeRuntime, membership: Membership, container: str,
                       owner: NodeRid) -> str:
    """The NodeId of ``owner``, the node a join of ``container`` moves the Actor to;
    InvalidOperation from the Actor's own handler, Unavailable when that node is gone."""
    ref = membership.ref
    host = rt.catalog.hosts.get(ref.actor_id)
    if host is not None and host.task is trio.lowlevel.current_task():
        raise InvalidOperation(
            f"Actor {ref.actor_id!r} cannot join {container!r} on another node from its own "
            "handler: the move waits for that very turn to end. Join it from outside the "
            "Actor (node.actors.join, or a handler of another Spot)")
    to = await rt.peers.node_id_of(owner)
    if to is None:
        raise Unavailable(f"the node that owns {container!r} is gone; nothing moved")
    return to


async def _join_elsewhere(rt: NodeRuntime, membership: Membership, container: str,
                          to: str, deadline: Deadline) -> ActorRef:
    """Join a User Spot node ``to`` owns: the Actor moves there, with its queue, timers
    and (by its policy) state, under the relocation procedure, into ``container``. The
    relocation keeps to ``deadline`` itself (the caller does not cancel it)."""
    ref = membership.ref
    host = rt.catalog.hosts.get(ref.actor_id)
    # Checked and stepped in one continuation: another move of it refuses, or is refused.
    if rt.memberships.get(ref.actor_id) is not membership or (
            membership.state != MEMBERSHIP.st.member) or host is None or (
            host.move is not None):
        raise Unavailable(f"Actor {ref.actor_id!r} is moving or changing its membership; "
                          "join again once that ended")
    membership.state = step(MEMBERSHIP, membership.state, MEMBERSHIP.ev.join)
    try:
        result = await relocate_spot(rt, ref.actor_id, to, deadline, container=container,
                                     joining=True)
    except BaseException:
        # No move under way any more: it never began, or was aborted. (One stuck past
        # relay-ready keeps ``host.move``: its end -- the commit, or the release of the
        # record -- steps the chart when the Actor leaves the catalog.)
        if host.move is None and membership.ended is None and (
                membership.state == MEMBERSHIP.st.moving):
            membership.state = step(MEMBERSHIP, membership.state, MEMBERSHIP.ev.join_failed)
        raise
    if result.outcome is not RelocationOutcome.COMMITTED:
        if membership.state == MEMBERSHIP.st.moving:
            membership.state = step(MEMBERSHIP, membership.state, MEMBERSHIP.ev.join_failed)
        raise Unavailable(f"Actor {ref.actor_id!r} could not join {container!r} on node "
                          f"{to!r}: {result.reason}; it stays where it was")
    return ActorRef(actor_id=ref.actor_id, generation=ref.generation, mesh=result.ref.mesh,
                    node_rid=result.ref.node_rid, container=container)


async def close_actor(rt: NodeRuntime, ref: ActorRef, deadline: Deadline) -> bool:
    """Close the Actor incarnation ``ref`` names, on whichever node hosts it.

    ``True`` when it (or a close merged with it) closed; ``False`` when that incarnation
    no longer exists. InvalidOperation for another generation, or an ID that is a Spot.
    """
    if not isinstance(ref, ActorRef):
        raise InvalidOperation(f"actors.close() takes an ActorRef, got {type(ref).__name__}")
    rt.check_usable()
    spot_ref = SpotRef(spot_id=ref.actor_id, generation=ref.generation, mesh=ref.mesh,
                       node_rid=ref.node_rid)
    with trio.move_on_at(deadline.at):
        closed = await close_here(rt, spot_ref, CLOSE.initial, deadline, remote=close_remote,
                                  kinds=ACTOR_ONLY)
        rt.route_cache.invalidate(ref.actor_id)
        return closed
    raise _deadline_passed(f"closing Actor {ref.actor_id!r}")


async def find_actor(rt: NodeRuntime, actor_id: str, deadline: Deadline) -> ActorRef | None:
    """The Ready Actor ``actor_id``'s ActorRef, or ``None``; TypeMismatch for a Spot's ID."""
    actor_id = validate_spot_id(actor_id)
    rt.check_usable()
    with trio.move_on_at(deadline.at):
        record = await rt.store.location.find(actor_id)
        if record is None or record.state is not AuthorityState.READY:
            return None
        if record.kind is not SpotKind.ACTOR:
            raise TypeMismatch(f"{actor_id!r} is {record.kind.name.title()} Spot "
                                   f"{record.stable_type!r}, not an Actor; use spots.find()")
        return record.actor_ref()
    raise _deadline_passed(f"find({actor_id!r})")


async def members_of(rt: NodeRuntime, spot: SpotRef | str, deadline: Deadline
                     ) -> list[ActorRef]:
    """The Actors whose records name ``spot`` as container (the store's view), in ActorId
    order; Creating and Closing members included, as a Close counts them."""
    container = spot.spot_id if isinstance(spot, SpotRef) else validate_spot_id(spot)
    rt.check_usable()
    with trio.move_on_at(deadline.at):
        return [r.actor_ref() for r in await rt.store.location.members(container)]
    raise _deadline_passed(f"listing the members of {container!r}")
