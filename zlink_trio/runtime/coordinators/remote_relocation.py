"""Planned relocation between nodes: command 60 and its command 20.

Theory of operation
-------------------
Source (:func:`send_relocate`): the Spot is sealed and captured; command 60 names the
Sealed record (ObjectGeneration, owner generation, StoreVersion), both lifecycles and
the payload root, and its command 20 answers with the Spot's new SpotRef -- or a typed
failure, sent only before relay-ready.

Target (:func:`serve_relocate`), stepping ``PlannedRelocation`` from ``captured``:

1. The frame must name this lifecycle; the record is read **from the store** and must
   match the frame (Sealed toward this lifecycle, same generations and StoreVersion);
   the payload is read from the root the frame names (the store checks its SHA-256 and
   size) -- the frame carries no state.  ``target_reserved``.
2. The shell: the factory for the same Spot ID and ObjectGeneration (``on_activate``,
   never ``on_create``), then ``PreserveStateWith``'s ``restore(spot, data)``; the
   moved timers registered again on the new instance's methods; the moved messages
   decoded and queued in order.  Nothing is visible yet: the host is not in the
   catalog.  ``target_restored``.  Any failure so far answers with the error and
   nothing of the shell remains (``on_close(ACTIVATION_FAILED)``); the source aborts.
3. **AcceptRelayReady** in the store -- the point of no return -- then
   **CommitRelocation** (owner generation + 1).  Only now does the host open: it is
   registered with its route in the same continuation and runs the moved messages
   first (each keeps its caller's operation ID); their replies go to the source on the
   link the command came on.  The host remembers how it arrived (an
   ``incarnation.arrival.Arrival``: the source's lifecycle and the new owner
   generation), which every followed message must name.  Other ingress waits until the
   source says its relay is over (command 62, ``mesh.message_follow``), at the latest
   ``default_timeout``.  The root is deleted and the answer names the new SpotRef.

A SpotWide move carries the Spot's member Actors in the same root (the payload's
``members``): each member's record must be carried by the Spot's move in the store
(Sealed toward this lifecycle, the generations its payload names), exactly the members
the store carries; each gets a shell like the Spot's, the Spot's relay-ready and commit
step them all in the store, and every host opens and registers in one continuation --
no member is reachable here before the commit, and none after it is missing.

The outcome is retained per operation ID, like commands 47 and 48: a redelivery gets
the same answer and never a second shell.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.errors import (
    DeadlineExceeded,
    HandlerError,
    NotFound,
    StoreUnavailable,
    Unavailable,
    ZLinkError,
)
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import ActorRef, AuthorityState
from zlink_trio.runtime import crash_points
from zlink_trio.runtime.calls.deadlines import deadline_from_wall_ms
from zlink_trio.runtime.charts import RELOCATION, step
from zlink_trio.runtime.coordinators.relocation_payload import RelocationPayload
from zlink_trio.runtime.declaration.policies import PreserveStateWith
from zlink_trio.runtime.declaration.spot_types import relocation_of
from zlink_trio.runtime.incarnation.arrival import Arrival
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.incarnation.work import MessageWork
from zlink_trio.runtime.mesh.link_reply import LinkReply
from zlink_trio.runtime.mesh.remote_calls import operation_number, outcome_of, round_trip
from zlink_trio.runtime.observe.logs import RELOCATION as LOGGER
from zlink_trio.runtime.state import Membership
from zlink_trio.store.rules.relocation_steps import is_carried
from zlink_trio.wire.frames import RelocateOutcome, RelocateSpot

if TYPE_CHECKING:
    from statecharts.names import PlannedRelocationState
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import AuthorityRecord, OwnerFence, RootReceipt, SpotRef
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.transport import Link
    from zlink_trio.wire.frames import Outcome

__all__ = ("send_relocate", "serve_relocate")


# --------------------------------------------------------------------------- source


async def send_relocate(rt: NodeRuntime, link: Link, sealed: AuthorityRecord,
                        target: OwnerFence, root: RootReceipt, deadline: Deadline) -> SpotRef:
    """Command 60 for the Sealed ``sealed``; the Spot's new SpotRef, or the typed error."""
    operation = operation_number(rt.new_uuid4())

    def frame(correlation: int) -> RelocateSpot:
        return RelocateSpot(
            correlation=correlation, operation_id=operation, source=rt.owner, target=target,
            spot_id=sealed.spot_id, stable_type=sealed.stable_type, mesh=sealed.mesh,
            object_generation=sealed.object_generation,
            owner_generation=sealed.owner_generation,
            expected_store_version=sealed.store_version, payload=root,
            deadline_ms=deadline.wall_ms)

    what = f"relocating Spot {sealed.spot_id!r}"
    reply = await round_trip(rt, rt.peers, link, deadline, frame, what)
    return outcome_of(reply, RelocateOutcome, what).ref


# --------------------------------------------------------------------------- target


#: The reasons of :func:`_mismatch` that name a lifecycle, worded once it is known.
_MOVES_TO: Final = "it moves to another node"
_OWNED_BY: Final = "it is owned by another node"


def _mismatch(frame: RelocateSpot, record: AuthorityRecord | None, rt: NodeRuntime) -> str:
    """Why the store's record does not match the frame ('' when it does)."""
    if record is None:
        return "the store has no record of it"
    checks = (
        (record.state is AuthorityState.SEALED, f"it is {record.state.value}"),
        (record.relocation_target == rt.owner, _MOVES_TO),
        (record.owner == frame.source, _OWNED_BY),
        (record.object_generation == frame.object_generation,
         f"its generation is {record.object_generation}"),
        (record.owner_generation == frame.owner_generation,
         f"its owner generation is {record.owner_generation}"),
        (record.store_version == frame.expected_store_version,
         f"its StoreVersion is {record.store_version}"),
        (record.stable_type == frame.stable_type, f"its type is {record.stable_type!r}"),
    )
    return next((why for ok, why in checks if not ok), "")


async def _shell(rt: NodeRuntime, spot_type: SpotType, payload: RelocationPayload
                 ) -> tuple[Incarnation, list[tuple[MessageWork, int]]]:
    """Build and restore the target's host (not registered); the moved queue decoded."""
    host = Incarnation(rt, spot_type, payload.spot_id, payload.object_generation,
                       payload.mesh)
    try:
        await host.build(relocated=True)
        policy = relocation_of(spot_type)
        if isinstance(policy, PreserveStateWith):
            try:
                policy.adapter.restore(host.instance, payload.state or b"")
            except Exception as exc:
                error = HandlerError(
                    f"the relocation adapter of {spot_type.stable_type!r} raised "
                    f"{type(exc).__qualname__}: {exc} (in restore); the move was aborted",
                    error_type=type(exc).__qualname__)
                raise error from exc
        now = trio.current_time()
        host.own_timers().restore(host.instance, [
            (t.method, t.due_in_ms / 1000, None if t.period_ms is None else t.period_ms / 1000)
            for t in payload.timers], now)
        queue = []
        for moved in payload.messages:
            encoded = moved.message
            info = spot_type.handlers.find_wire(encoded.type_name)
            msg = rt.codec.decode(encoded.type_name, encoded.body, info.message_type)
            queue.append((MessageWork(msg, info, None, deadline_from_wall_ms(moved.deadline_ms),
                                      operation_id=moved.operation_id), len(encoded.body)))
    except BaseException:
        with trio.CancelScope(shield=True):
            await host.activation_failed()
        raise
    return host, queue


async def _take_over(rt: NodeRuntime, link: Link, frame: RelocateSpot) -> Outcome:
    rt.check_admission()
    if frame.target != rt.owner:
        raise rt.not_addressed_here(f"the relocation of Spot {frame.spot_id!r}", frame.target,
                                    "nothing moved")
    spot_type = rt.registry.get(frame.stable_type)
    if spot_type is None:
        raise NotFound(f"this node serves no Spot type {frame.stable_type!r}, so it cannot "
                       f"take Spot {frame.spot_id!r} over; nothing moved")
    record = await rt.store.location.find(frame.spot_id)
    why = _mismatch(frame, record, rt)
    if why == _OWNED_BY and record is not None:
        why = f"it is owned by {await rt.peers.name_owner(record.owner)}"
    elif why == _MOVES_TO and record is not None and record.relocation_target is not None:
        why = f"it moves to {await rt.peers.name_owner(record.relocation_target)}"
    if why:
        raise Unavailable(f"the relocation of Spot {frame.spot_id!r} no longer matches the "
                          f"store: {why}; nothing moved")
    assert record is not None
    payload = RelocationPayload.decode(await rt.store.relocation.get_root(frame.payload))
    await _check_carried(rt, frame, payload)
    state = step(RELOCATION, RELOCATION.st.captured, RELOCATION.ev.target_reserved)
    if crash_points.ARMED:
        crash_points.point("relocation", "target_reserved", rt.node_id)
    deadline = deadline_from_wall_ms(frame.deadline_ms)
    shells: list[_Shell] = []
    try:
        with trio.move_on_at(deadline.at) as scope:
            for part in (payload, *payload.members):
                part_type = spot_type if part is payload else rt.registry.get(part.stable_type)
                assert part_type is not None  # (_check_carried: each is served here)
                shells.append(_Shell(part, *await _shell(rt, part_type, part)))
        if scope.cancelled_caught:
            raise DeadlineExceeded(f"restoring Spot {frame.spot_id!r} did not finish before "
                                   "the relocation's deadline; nothing moved")
    except BaseException:
        with trio.CancelScope(shield=True):
            for built in shells:
                await built.host.activation_failed()
        raise
    if crash_points.ARMED:
        crash_points.point("relocation", "restored", rt.node_id)
    state = step(RELOCATION, step(RELOCATION, state, RELOCATION.ev.target_restored),
                 RELOCATION.ev.accept_relay_ready)
    # From relay-ready to the registration, a call here that reads the committed record
    # (or a frame from a node that did) waits for the host instead of finding none
    # (StaleRoute): the commit is awaited, and other tasks run meanwhile.
    attempts = [rt.catalog.begin_attempt(part.payload.spot_id) for part in shells]
    try:
        return await _commit_and_serve(rt, link, frame, shells, record, state)
    finally:
        for attempt in attempts:
            if attempt is not None:
                rt.catalog.end_attempt(attempt)


@attrs.frozen
class _Shell:
    """A host built and restored here, not registered yet: the Spot's or a carried
    member's, with its payload and its moved queue decoded."""

    payload: RelocationPayload
    host: Incarnation
    queue: list[tuple[MessageWork, int]]


async def _check_carried(rt: NodeRuntime, frame: RelocateSpot,
                         payload: RelocationPayload) -> None:
    """Unavailable unless the store carries exactly ``payload.members`` with the Spot:
    each one's record Sealed toward this lifecycle from the frame's source, in the
    Spot, with the generations and type its payload names, served here as an Actor."""
    if payload.spot_id != frame.spot_id:
        raise Unavailable(f"the relocation root of Spot {frame.spot_id!r} names Spot "
                          f"{payload.spot_id!r}; nothing moved")
    members = await rt.store.location.members(frame.spot_id) if payload.members else []
    carried = {m.spot_id: m for m in members if is_carried(m)}
    named = {m.spot_id: m for m in payload.members}
    if carried.keys() != named.keys():
        raise Unavailable(f"the move of Spot {frame.spot_id!r} carries members "
                          f"{sorted(carried)} in the store and {sorted(named)} in its "
                          "payload; nothing moved")
    for actor_id, record in carried.items():
        part = named[actor_id]
        served = rt.registry.get(part.stable_type)
        if not (record.state is AuthorityState.SEALED and record.owner == frame.source
                and record.relocation_target == rt.owner and record.container == frame.spot_id
                and record.object_generation == part.object_generation
                and record.owner_generation == part.owner_generation
                and record.stable_type == part.stable_type
                and served is not None and served.kind is SpotKind.ACTOR):
            raise Unavailable(f"the move of Spot {frame.spot_id!r} no longer matches the "
                              f"store for its member {actor_id!r} (or this node does not "
                              "serve it as an Actor); nothing moved")


async def _commit_and_serve(rt: NodeRuntime, link: Link, frame: RelocateSpot,
                            shells: list[_Shell], record: AuthorityRecord,
                            state: PlannedRelocationState) -> Outcome:
    """Relay-ready, the commit, and the hosts opened and registered (the target's side)."""
    with trio.CancelScope(shield=True):
        try:
            relay = await rt.store.location.accept_relay_ready(record.fence(), target=rt.owner,
                                                                now=rt.now())
        except ZLinkError:
            for shell in shells:
                await shell.host.activation_failed()
            raise
        if crash_points.ARMED:
            crash_points.point("relocation", "relay_ready", rt.node_id)
        # Past relay-ready the source is never restored: commit, retrying what is transient.
        ready = await _commit(rt, [shell.host for shell in shells], relay)
        if crash_points.ARMED:
            crash_points.point("relocation", "target_committed", rt.node_id)
        step(RELOCATION, state, RELOCATION.ev.commit_relocation)
        # Every host opens in this one continuation: the Spot and its carried members are
        # reachable here together. The replies of the moved requests go to the source,
        # which registered them.
        for shell in shells:
            moved = shell.payload
            shell.host.open_moved([
                (MessageWork(work.msg, work.info,
                             LinkReply(rt, rt.peers, link, message.reply_correlation)
                             if message.reply_correlation else None, work.deadline,
                             operation_id=work.operation_id), size)
                for (work, size), message in zip(shell.queue, moved.messages, strict=True)],
                Arrival(frame.source, moved.owner_generation + 1))
            if shell is not shells[0]:  # a carried member: still in the Spot it moved with
                rt.admit_member(Membership(ActorRef(
                    actor_id=moved.spot_id, generation=moved.object_generation,
                    mesh=moved.mesh, node_rid=rt.node_rid, container=ready.spot_id)))
            rt.catalog.register(shell.host)
        if ready.container is not None:  # an Actor: a member of its container here now
            rt.admit_member(Membership(ready.actor_ref()))
        hosts = [shell.host for shell in shells]
        rt.catalog.start_job(lambda: _relay_deadline(rt, hosts, link))
        try:
            await rt.store.relocation.delete_root(frame.payload)
        except ZLinkError as exc:
            LOGGER.warning("could not delete relocation root %s: %s", frame.payload.ref, exc)
    return RelocateOutcome(ref=ready.ref())


async def _relay_deadline(rt: NodeRuntime, hosts: list[Incarnation], link: Link) -> None:
    """A catalog job: each host stops waiting for its source's relay (command 62) once
    the source's ``link`` closed (the source died, or the relay broke off: nothing more
    comes), and at the latest ``default_timeout`` after the commit."""
    with trio.move_on_after(rt.options.default_timeout):
        async with trio.open_nursery() as nursery:

            async def relayed() -> None:
                for host in hosts:
                    if host.arrival is not None:
                        await host.arrival.relayed.wait()
                nursery.cancel_scope.cancel()

            async def source_gone() -> None:
                await link.wait_closed()
                nursery.cancel_scope.cancel()

            nursery.start_soon(relayed)
            nursery.start_soon(source_gone)
    for host in hosts:
        if host.relay_wait is not None:
            LOGGER.warning("node %r: Spot %r: its previous node did not say its relay was "
                           "over (it is gone, or took longer than %s s); it serves what "
                           "waited now", rt.node_id, host.spot_id,
                           rt.options.default_timeout)
        host.end_relay_wait()


async def _commit(rt: NodeRuntime, hosts: list[Incarnation],
                  relay: AuthorityRecord) -> AuthorityRecord:
    """CommitRelocation after relay-ready, retried within ``default_timeout``."""
    with trio.move_on_after(rt.options.default_timeout):
        delay = 0.005
        while True:
            try:
                return await rt.store.location.commit_relocation(relay.fence(), now=rt.now())
            except StoreUnavailable as exc:
                LOGGER.warning("node %r: committing the relocation of Spot %r: %s; retrying",
                               rt.node_id, relay.spot_id, exc)
            except ZLinkError as exc:
                LOGGER.error("node %r: the relocation of Spot %r passed relay-ready but its "
                             "commit was refused (%s); it stays unavailable until this node "
                             "restarts", rt.node_id, relay.spot_id, exc)
                break
            await trio.sleep(delay)
            delay = min(delay * 2, 0.5)
    for host in hosts:
        await host.activation_failed()
    raise Unavailable(f"the relocation of Spot {relay.spot_id!r} passed relay-ready but could "
                      "not be committed on its target; the Spot is unavailable until the "
                      "target node restarts")


async def serve_relocate(rt: NodeRuntime, link: Link, frame: RelocateSpot) -> Outcome:
    """Run command 60 here: the terminal outcome, retained per operation ID."""
    return await rt.peers.retained.run_once(
        frame.source, frame.operation_id, f"the relocation of Spot {frame.spot_id!r}",
        lambda: _take_over(rt, link, frame))
