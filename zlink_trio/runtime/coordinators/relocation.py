"""Planned relocation, source side: ``node.relocate`` and ``node.drain`` (docs/relocation.md).

Theory of operation
-------------------
:func:`relocate_spot` moves one Spot this node owns to another node of its Mesh,
stepping the ``PlannedRelocation`` chart:

1. **Refusals** -- nothing changes: an Entry Spot or a ``DisableRelocation`` type
   (``relocation_disabled``), a Spot that is already moving or closing
   (``already_moving``), no other live node serving the type, or not the one named
   (``no_target``), BeginRelocation refused by the store (``begin_refused``).  An
   unknown ID is ``NotFound`` and a Spot another node owns ``InvalidOperation``.
2. **BeginRelocation** (Ready -> Relocating toward the target, a pending unit there):
   the host keeps serving -- the permit is granted at once -- then **Seal** (store and
   host): new ingress goes to the host's hold and no turn runs; the running turn is
   awaited.
3. **Capture** (:mod:`.relocation_payload`): the adapter's bytes
   (``PreserveStateWith``), the timers registered after activation and the
   not-yet-run messages, stored as one root -- named on the Sealed record first
   (RecordRelocationPayload), so whoever ends a move that died deletes it.  A reply
   correlation is registered for each queued request: the target will answer it on
   this link.
4. **Command 60** to the target (:mod:`zlink_trio.runtime.coordinators.remote_relocation`),
   which builds its shell, restores, records relay-ready in the store -- the point of
   no return -- commits the authority (owner generation + 1) and serves.  Its answer
   steps the source's chart through to ``committed``; the source then installs the
   Message Follow route, disposes of its incarnation (``on_close(RELOCATED)``, no
   Release) and relays its hold along the route, in arrival order, then tells the target
   the relay is over (command 62: until then the target runs nothing that could overtake
   a held message).
5. **Abort** -- an answer that fails before relay-ready, an adapter or capture error,
   the deadline before the command was answered: AbortRelocation, the hold returns to
   the queue behind the captured work, the source serves again.  When the answer is
   lost, the store says what happened: Sealed -> abort; Ready at the target ->
   committed; RelayReady -> the target passed the point of no return and is expected
   to commit, so the source waits (bounded) and reports ``Unavailable`` if it did not,
   then keeps watching: a later commit finishes the move, and a record released
   because the target died (its restart's ReleaseRelayReady) ends this incarnation
   (:func:`_released`).  A fault of the source's own before command 60 (an exception
   that is not a :class:`ZLinkError`: a bug) aborts the move the same way, then
   propagates: the Spot serves again instead of staying sealed until the node stops.
   (When the store refuses that abort or cannot be reached, what it says decides, as
   for a refusal, and its ``Unavailable`` is raised instead; the fault is logged first.)

:func:`drain` relocates every Spot this node hosts (the Entry Spot is not a
candidate) and reports what moved and what did not.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.descriptor import describe_owner
from zlink_trio.core.errors import InvalidOperation, NotFound, Unavailable, ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState, OwnerFence, SpotRef
from zlink_trio.runtime import crash_points
from zlink_trio.runtime.charts import INCARNATION, MEMBERSHIP, RELOCATION, step
from zlink_trio.runtime.coordinators.relocation_capture import capture
from zlink_trio.runtime.coordinators.relocation_target import choose_target
from zlink_trio.runtime.coordinators.remote_relocation import send_relocate
from zlink_trio.runtime.declaration.policies import DisableRelocation, RelocationUnit
from zlink_trio.runtime.declaration.spot_types import UserSpotType, relocation_of
from zlink_trio.runtime.incarnation.incarnation import Move
from zlink_trio.runtime.mesh.follow_routes import FollowRoute
from zlink_trio.runtime.mesh.message_follow import relay_done, relay_held
from zlink_trio.runtime.observe.fields import Operation, spot_fields
from zlink_trio.runtime.observe.logs import RELOCATION as LOGGER
from zlink_trio.runtime.observe.operations import observe_operation
from zlink_trio.runtime.results import DrainResult, RelocationOutcome, RelocationResult
from zlink_trio.store.rules.relocation_steps import is_carried
from zlink_trio.store.rules.relocation_store import receipt_of

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterable
    from contextlib import AbstractContextManager

    from statecharts.names import PlannedRelocationEvent, PlannedRelocationState
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.records import AuthorityRecord, RootReceipt
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.incarnation.incarnation import Incarnation
    from zlink_trio.runtime.observe.operations import ObservedOperation
    from zlink_trio.runtime.state import Membership

__all__ = ("MoveReport", "drain", "moves_on_its_own", "relocate_spot")

#: How many relocations a drain runs at once.
DRAIN_PARALLEL: Final = 16
#: A drain out of time lists at most this many Spots whose move it never began; it
#: counts the rest (``DrainResult.unlisted``).
NOT_BEGUN_LISTED: Final = 10_000
#: Why a drain lists a Spot whose move it never began.
_NOT_BEGUN: Final = ("the drain's deadline passed before this Spot's move began; it stays "
                     "on this node (drain again, with a longer timeout, to move it)")
#: A drain's pause before looking again at Actors whose own move was under way.
_BUSY_PAUSE: Final = 0.01
#: How often a SpotWide move is begun again when a member arrived between its claim of
#: the members and BeginRelocation (each attempt aborts before anything moved).
_MEMBER_ATTEMPTS: Final = 3


@attrs.define(eq=False)
class _Carried:
    """A member Actor a SpotWide move carries: its host, membership and record."""

    host: Incarnation
    membership: Membership
    move: Move
    #: Its record as the store carries it (set once BeginRelocation wrote it).
    record: AuthorityRecord | None = None
    correlations: list[int] = attrs.Factory(list)


@attrs.define(eq=False)
class _Relocation:
    rt: NodeRuntime
    host: Incarnation
    record: AuthorityRecord
    target: OwnerFence
    claim: NodeClaim
    deadline: Deadline
    state: PlannedRelocationState
    root: RootReceipt | None = None
    correlations: list[int] = attrs.Factory(list)
    #: The record was released past relay-ready (:func:`_released`).
    released: bool = False
    #: An Actor's membership on this node (its chart steps with the move), else ``None``.
    membership: Membership | None = None
    #: The members a SpotWide move carries (each sealed, captured and moved with it).
    carried: list[_Carried] = attrs.Factory(list)
    #: The observation of the move (its span's steps and chart events, when traced).
    observed: ObservedOperation | None = None

    def hosts(self) -> list[Incarnation]:
        """The Spot's host and each carried member's."""
        return [self.host, *(part.host for part in self.carried)]

    def step(self, event: PlannedRelocationEvent) -> None:
        self.state = step(RELOCATION, self.state, event)
        if self.observed is not None:
            self.observed.event(event)

    def span(self, name: str) -> AbstractContextManager[object]:
        """Span ``name`` of one step of the move, on a node that traces."""
        return nullcontext() if self.observed is None else self.observed.step(name)


def _fields(job: _Relocation) -> dict[str, object]:
    return spot_fields(job.record.spot_id, node_id=job.rt.node_id, mesh=job.record.mesh,
                       generation=job.record.object_generation,
                       operation=Operation.RELOCATION)


def _refused(ref: SpotRef, state: PlannedRelocationState, event: PlannedRelocationEvent,
             reason: str) -> RelocationResult:
    step(RELOCATION, state, event)
    return RelocationResult(outcome=RelocationOutcome.REFUSED, ref=ref, reason=reason)


@attrs.define
class MoveReport:
    """What a drain learns of one move beyond its result."""

    #: A COMMITTED result for each member that moved with the Spot: carried by its
    #: SpotWide move, or following its PerActor move in a move of its own.
    carried: list[RelocationResult] = attrs.Factory(list)
    #: The move did not happen because a member was in a move, join, leave or close of
    #: its own: it passes, and the drain looks again.
    members_busy: bool = False


async def relocate_spot(rt: NodeRuntime, spot_id: str, to: str | None,
                        deadline: Deadline, *, container: str | None = None,
                        joining: bool = False,
                        report: MoveReport | None = None) -> RelocationResult:
    """Move ``spot_id`` to node ``to`` (or one placement picks); see the module docstring.

    An Actor moves into ``container`` at the target -- a User Spot it joins there
    (``joining``: its membership is then ``moving``, stepped by ``actors.membership``),
    or the one it follows -- or without one into the target's Entry Spot, only from
    this node's Entry Spot: a member of a User Spot is never moved out of it behind the
    application's back. An Actor's move is claimed (``host.move``) and its membership
    stepped in one continuation, so two moves of one Actor never interleave.

    A SpotWide User Spot moves with its members here: each is claimed with the Spot (in
    the same continuation; a member in a move, join, leave or close of its own refuses
    the move), carried by the store's steps of the Spot's move, captured into the same
    payload and committed with it; ``report``, when given, learns of them and of a
    member that kept the move from happening.
    """
    with observe_operation(rt.node_id, rt.metrics, Operation.RELOCATION, spot_id,
                           tracing=rt.tracing) as observed:
        report = MoveReport() if report is None else report
        for _attempt in range(_MEMBER_ATTEMPTS):
            try:
                result = await _relocate_spot(rt, spot_id, to, deadline, container, joining,
                                              report, observed)
            except _MembersChanged as changed:
                result = changed.result  # a member arrived meanwhile: claim them anew
                await trio.lowlevel.checkpoint()
            else:
                break
        observed.outcome = result.outcome.value
        observed.mesh, observed.generation = result.ref.mesh, result.ref.generation
        return result


class _MembersChanged(Exception):
    """The store carried other members than the ones claimed (one arrived between the
    claim and BeginRelocation); the move was aborted and is tried again."""

    def __init__(self, result: RelocationResult) -> None:
        super().__init__(result.reason)
        self.result = result


async def _relocate_spot(rt: NodeRuntime, spot_id: str, to: str | None,
                         deadline: Deadline, container: str | None, joining: bool,
                         report: MoveReport, observed: ObservedOperation) -> RelocationResult:
    rt.check_admission()
    state = RELOCATION.initial
    record = await rt.store.location.find(spot_id)
    if record is None:
        raise NotFound(f"Spot {spot_id!r} does not exist; there is nothing to relocate")
    if record.owner != rt.owner:
        owner = describe_owner(record.owner, await rt.peers.node_id_of(record.owner.node_rid))
        raise InvalidOperation(
            f"Spot {spot_id!r} is owned by {owner}, not by node {rt.node_id!r}; call "
            "relocate on the node that owns it, or ask_relocate (zlink-trio relocate) from "
            "any node"
        )
    ref = record.ref()
    spot_type = rt.registry.get(record.stable_type)
    if record.kind is SpotKind.ENTRY or spot_type is None:
        return _refused(ref, state, RELOCATION.ev.relocation_disabled,
                        "an Entry Spot never moves")
    per_actor = (isinstance(spot_type, UserSpotType)
                 and spot_type.unit is RelocationUnit.PER_ACTOR)
    spot_wide = record.kind is SpotKind.USER and not per_actor
    membership = rt.memberships.get(spot_id) if record.kind is SpotKind.ACTOR else None
    if record.kind is SpotKind.ACTOR:
        refusal, container, to = await _actor_destination(rt, membership, container, to)
        if refusal:
            return _refused(ref, state, RELOCATION.ev.relocation_disabled,
                            f"Actor {spot_id!r} does not move on its own now: {refusal}")
    if isinstance(relocation_of(spot_type), DisableRelocation):
        return _refused(ref, state, RELOCATION.ev.relocation_disabled,
                        f"{record.stable_type!r} is declared DisableRelocation")
    host = rt.catalog.hosts.get(spot_id)
    if host is not None and not host.first_record_settled:
        # Just activated: its first message's durable record is being cleaned up.
        with trio.move_on_at(deadline.at):
            await host.wait_first_record()
    if membership is not None and (rt.memberships.get(spot_id) is not membership or (
            membership.state != (MEMBERSHIP.st.moving if joining else MEMBERSHIP.st.member))):
        membership = None  # (another membership step came first: refused below)
        host = None
    if (record.state is not AuthorityState.READY or host is None or host.move is not None
            or host.generation != record.object_generation
            or not host.first_record_settled or host.admission_sealed):
        why = (f"it is {record.state.value}" if record.state is not AuthorityState.READY
               else "it is already moving, closing or still recording its first message")
        return _refused(ref, state, RELOCATION.ev.already_moving,
                        f"Spot {spot_id!r} cannot move now: {why}; retry later")
    # Claimed in the continuation that checked it: a relocate started meanwhile is refused
    # as already moving (the store would take its BeginRelocation as a retry of this one).
    # An Actor's membership steps in the same continuation (a join's is ``moving`` already).
    carried, busy = _claim_members(rt, spot_id) if spot_wide else ([], "")
    if busy:
        report.members_busy = True
        return _refused(ref, state, RELOCATION.ev.already_moving,
                        f"Spot {spot_id!r} cannot move now: {busy}")
    move = host.move = Move()
    if membership is not None and not joining:
        membership.state = step(MEMBERSHIP, membership.state, MEMBERSHIP.ev.begin_relocation)
    try:
        claim, why_not = await choose_target(rt, record, to)
        if claim is None:
            _unclaim(membership, joining)
            _unclaim_carried(carried)
            return _refused(ref, state, RELOCATION.ev.no_target, why_not)
        target = OwnerFence(claim.descriptor.node_rid, claim.lifecycle_generation)
        if membership is not None and container is None:
            # Off this node's Entry Spot, onto the Entry Spot the target's descriptor names.
            container = claim.descriptor.entry_spot_id
        try:
            with trio.CancelScope(shield=True):
                moving = await rt.store.location.begin_relocation(
                    record.fence(), target=target, now=rt.now(),
                    container=container if membership is not None else None,
                    members_stay=per_actor, carry_members=spot_wide)
                changed = await _carried_records(rt, moving, carried) if spot_wide else ""
                if changed:
                    await rt.store.location.abort_relocation(moving.fence())
        except ZLinkError as exc:
            _unclaim(membership, joining)
            _unclaim_carried(carried)
            # (A SpotWide Spot's member in a move of its own: Unavailable, it passes.)
            report.members_busy = spot_wide and isinstance(exc, Unavailable)
            return _refused(ref, state, RELOCATION.ev.begin_refused, exc.message)
        if changed:
            _unclaim_carried(carried)
            report.members_busy = True
            raise _MembersChanged(_refused(ref, state, RELOCATION.ev.begin_refused, changed))
        result = await _run(_Relocation(
            rt=rt, host=host, record=moving, target=target, claim=claim, deadline=deadline,
            state=step(RELOCATION, state, RELOCATION.ev.begin_relocation),
            membership=membership, carried=carried, observed=observed))
        if per_actor and result.outcome is RelocationOutcome.COMMITTED:
            await _members_follow(rt, spot_id, claim.descriptor.node_id, deadline, report)
        if result.outcome is RelocationOutcome.COMMITTED:
            report.carried.extend(
                RelocationResult(outcome=RelocationOutcome.COMMITTED, ref=SpotRef(
                    spot_id=part.host.spot_id, generation=part.host.generation,
                    mesh=result.ref.mesh, node_rid=result.ref.node_rid))
                for part in carried)
        return result
    finally:
        if host.move is move and INCARNATION.allows(host.state,
                                                   INCARNATION.ev.seal_for_relocation):
            host.move = None  # refused or aborted before the seal: nothing to hold
            _unclaim_carried(carried)


def _claim_members(rt: NodeRuntime, spot_id: str) -> tuple[list[_Carried], str]:
    """Claim every member of SpotWide ``spot_id`` here for its move (no await: the caller's
    continuation), or claim none and say why not: each must be a ``member`` in no join,
    leave, move or close of its own, its host registered and serving."""
    found: list[_Carried] = []
    for actor_id in sorted(rt.members.get(spot_id, ())):
        membership = rt.memberships.get(actor_id)
        host = rt.catalog.hosts.get(actor_id)
        if (membership is None or membership.state != MEMBERSHIP.st.member or host is None
                or host.move is not None or host.admission_sealed
                or host.generation != membership.ref.generation
                or not host.first_record_settled):
            return [], (f"its member {actor_id!r} is in a join, leave, move or close of its "
                        "own; retry once that ended")
        found.append(_Carried(host=host, membership=membership, move=Move()))
    for part in found:
        part.host.move = part.move
        part.membership.state = step(MEMBERSHIP, part.membership.state,
                                     MEMBERSHIP.ev.begin_relocation)
    return found, ""


def _unclaim_carried(carried: list[_Carried]) -> None:
    """The members claimed for a move that did not happen serve again (their hold, when
    sealed, back to the queue), each a ``member`` again."""
    for part in carried:
        if part.host.move is part.move:
            if part.host.state in INCARNATION.tags.holds_ingress:
                part.host.unseal()
            part.host.move = None
        if part.membership.state == MEMBERSHIP.st.relocating:
            part.membership.state = step(MEMBERSHIP, part.membership.state,
                                         MEMBERSHIP.ev.abort_relocation)


async def _carried_records(rt: NodeRuntime, moving: AuthorityRecord,
                           carried: list[_Carried]) -> str:
    """After BeginRelocation carried the Spot's members in the store: each claimed part's
    record; ``""`` when the store carries exactly the members claimed here, else why
    not (a member arrived or went meanwhile: the caller aborts the move)."""
    records = {m.spot_id: m for m in await rt.store.location.members(moving.spot_id)
               if is_carried(m)}
    claimed = {part.host.spot_id: part for part in carried}
    if records.keys() != claimed.keys() or any(
            records[i].object_generation != claimed[i].host.generation for i in records):
        return (f"the members of Spot {moving.spot_id!r} changed while its move began; "
                "nothing moved, retry")
    for actor_id, part in claimed.items():
        part.record = records[actor_id]
    return ""


def moves_on_its_own(rt: NodeRuntime, membership: Membership) -> bool:
    """Whether an Actor here may be moved without a join (a drain, a stop that drains):
    off this node's Entry Spot, or after its User Spot that lives elsewhere now (a
    PerActor Spot moved ahead of it). A member of a User Spot here moves only with it,
    or when the application asks (a join)."""
    container = membership.ref.container
    return container == rt.entry_spot_id or container not in rt.catalog.hosts


def _unclaim(membership: Membership | None, joining: bool) -> None:
    """An Actor's move refused before BeginRelocation: its membership back to ``member``
    (a join's is stepped back by its driver, ``join_failed``)."""
    if membership is not None and not joining:
        membership.state = step(MEMBERSHIP, membership.state, MEMBERSHIP.ev.abort_relocation)


async def _actor_destination(rt: NodeRuntime, membership: Membership | None,
                             container: str | None, to: str | None
                             ) -> tuple[str, str | None, str | None]:
    """Where an Actor moves: ``(refusal, container, to)``; ``refusal`` is ``""`` when it may.

    A named ``container`` is a join's (``actors.membership``, its chart already
    ``moving``). Without one: an Actor on this node's Entry Spot goes onto its target's
    (chosen by placement, or ``to``); one whose User Spot now lives on another node (a
    PerActor Spot moved ahead of it) follows it there, into it; a member of a User Spot
    here is not moved out of it behind the application's back.
    """
    if membership is None:
        return "a join, leave or close of it is under way", None, to
    if container is not None:
        return "", container, to
    if membership.state != MEMBERSHIP.st.member:
        return "a join, leave or close of it is under way", None, to
    current = membership.ref.container
    if current == rt.entry_spot_id:
        return "", None, to
    if moves_on_its_own(rt, membership):
        record = await rt.store.location.find(current)
        if record is not None and record.owner.node_rid != rt.node_rid:
            owner = await rt.peers.node_id_of(record.owner.node_rid)
            if owner is not None and to in (None, owner):
                return "", current, owner
            return (f"its User Spot {current!r} lives on node {owner!r}, so it can only "
                    "follow it there"), None, to
    return "it is a member of a User Spot, which it leaves only when asked", None, to


async def _members_follow(rt: NodeRuntime, spot_id: str, to: str, deadline: Deadline,
                          report: MoveReport) -> None:
    """A PerActor Spot moved to ``to``: each of its members here follows it, in a move of
    its own (its own Message Follow route; ``report`` lists each that committed), none
    started past ``deadline``; one that cannot, or was not started, stays here, a member
    still, reachable by its ActorId, and is tried again by the next drain."""
    members = sorted(rt.members.get(spot_id, ()))
    if not members:
        return

    def in_time() -> bool:
        return trio.current_time() < deadline.at

    async def follow(actor_id: str) -> None:
        try:
            result = await relocate_spot(rt, actor_id, to, deadline, container=spot_id)
        except ZLinkError as exc:
            why = exc.message
        else:
            if result.outcome is RelocationOutcome.COMMITTED:
                report.carried.append(result)
                return
            why = result.reason or result.outcome.value
        LOGGER.warning("node %r: Actor %r did not follow Spot %r to node %r: %s; it stays "
                       "here", rt.node_id, actor_id, spot_id, to, why)

    late = await _in_parallel(members, follow, in_time)
    if late:
        LOGGER.warning("node %r: %d Actors of Spot %r did not follow it to node %r before "
                       "the move's deadline (%s, ...); they stay here, members still, and "
                       "the next drain moves them", rt.node_id, len(late), spot_id, to,
                       late[0])


async def _in_parallel(spot_ids: Iterable[str], move: Callable[[str], Awaitable[None]],
                       go_on: Callable[[], bool]) -> list[str]:
    """``await move(spot_id)`` for each of ``spot_ids`` in turn, :data:`DRAIN_PARALLEL` at
    a time, starting none once ``go_on()`` is false; returns, once the moves started
    ended, the IDs whose move was not started, in order.

    :data:`DRAIN_PARALLEL` tasks take the IDs one after the other, whatever their count:
    a task per Spot, spawned at once, would block a node draining a million Spots for
    longer than its lease (docs/performance.md, issue #32 item 1).
    """
    pending = iter(spot_ids)
    untried: list[str] = []

    async def worker() -> None:
        for spot_id in pending:  # (shared: each ID goes to one worker)
            if not go_on():
                untried.append(spot_id)
                return
            await move(spot_id)

    async with trio.open_nursery() as nursery:
        for _ in range(DRAIN_PARALLEL):
            nursery.start_soon(worker)
    untried.extend(pending)
    return untried


async def _run(job: _Relocation) -> RelocationResult:
    rt = job.rt
    sealed = False
    if crash_points.ARMED:
        crash_points.point("relocation", "before_seal", rt.node_id)
    with trio.move_on_at(job.deadline.at):
        try:
            with job.span("zlink.seal"):
                with trio.CancelScope(shield=True):
                    job.record = await rt.store.location.seal_relocation(job.record.fence(),
                                                                          now=rt.now())
                job.host.seal_for_relocation()
                sealed = True
                job.step(RELOCATION.ev.seal)
                if crash_points.ARMED:
                    crash_points.point("relocation", "sealed", rt.node_id)
                for host in job.hosts():
                    if host is not job.host:
                        # A member is sealed once its Spot's running turn ended: a Spot's
                        # turn that awaits its members (a fan-out) finishes before they hold.
                        host.seal_for_relocation()
                    await host.wait_no_turn()
                    if host.self_close:
                        raise InvalidOperation(
                            f"{host.spot_id!r} called ctx.close() in the turn that ran at the "
                            f"seal of Spot {job.record.spot_id!r}; it closes instead of moving")
            with job.span("zlink.capture"):
                link = await rt.peers.link_to(job.claim)
                payload, job.correlations = capture(rt, job.host, job.record, link)
                members = []
                for part in job.carried:
                    assert part.record is not None
                    member, part.correlations = capture(rt, part.host, part.record, link)
                    members.append(member)
                payload = attrs.evolve(payload, members=tuple(members))
                with trio.CancelScope(shield=True):
                    await _store_payload(job, payload.encode())
                job.step(RELOCATION.ev.capture_done)
            if crash_points.ARMED:
                crash_points.point("relocation", "captured", rt.node_id)
        except ZLinkError as exc:
            aborted = await _abort(job, exc.message, sealed=sealed)
            return aborted or await _settle(job, exc.message)
        except crash_points.CrashPointReached:
            raise  # a simulated crash: a crashed process aborts nothing
        except Exception as exc:
            # A fault of this node's own (a bug in the capture, say) before anything was
            # sent to the target: abort the move and serve again, as for a refusal, then
            # raise it -- a Spot left sealed would refuse every call until the node stops.
            why = f"the move failed unexpectedly ({type(exc).__name__}: {exc})"
            LOGGER.exception("node %r: the relocation of Spot %r failed; aborting it",
                             rt.node_id, job.record.spot_id, extra=_fields(job))
            if await _abort(job, why, sealed=sealed) is None:
                await _settle(job, why)
            raise
        assert job.root is not None
        try:
            with job.span("zlink.transfer"):
                committed = await send_relocate(rt, link, job.record, job.target, job.root,
                                                job.deadline)
        except ZLinkError as exc:
            return await _settle(job, exc.message)
        return await _committed(job, committed)
    return await _settle(job, "the relocation did not finish before its deadline")


async def _store_payload(job: _Relocation, data: bytes) -> None:
    """The payload root, named on the Sealed record first (RecordRelocationPayload).

    The receipt is the root's content address, so the record names it before the root
    exists: a process that dies after the capture leaves no root that nobody can find
    (whoever ends the move -- the abort, a restart's release -- deletes it).
    """
    location, relocation = job.rt.store.location, job.rt.store.relocation
    receipt = receipt_of(data)
    job.record = await location.record_relocation_payload(job.record.fence(), payload=receipt,
                                                          now=job.rt.now())
    job.root = await relocation.put_root(data)
    if job.root != receipt:  # a backend that addresses roots otherwise: name its receipt
        job.record = await location.record_relocation_payload(
            job.record.fence(), payload=job.root, now=job.rt.now())


async def _delete_root(job: _Relocation) -> None:
    """Delete the payload root (idempotent: the target deletes it after its commit too)."""
    if job.root is None:
        return
    with trio.CancelScope(shield=True):
        try:
            await job.rt.store.relocation.delete_root(job.root)
        except ZLinkError as exc:
            LOGGER.warning("could not delete relocation root %s: %s", job.root.ref, exc)


async def _committed(job: _Relocation, ref: SpotRef) -> RelocationResult:
    """The target committed: follow route, dispose of the source, relay the hold."""
    rt = job.rt
    if crash_points.ARMED:
        crash_points.point("relocation", "committed", rt.node_id)
    for event in (RELOCATION.ev.target_reserved, RELOCATION.ev.target_restored,
                  RELOCATION.ev.accept_relay_ready, RELOCATION.ev.commit_relocation):
        job.step(event)
    record = job.record
    expires_at = trio.current_time() + rt.options.message_follow_duration
    parts = [(job.host, record), *((part.host, part.record) for part in job.carried)]
    routes = []
    for _host, moved in parts:
        assert moved is not None
        routes.append(FollowRoute(
            spot_id=moved.spot_id, object_generation=moved.object_generation,
            source_owner_generation=moved.owner_generation, target=job.target,
            target_owner_generation=moved.owner_generation + 1, expires_at=expires_at))
    if rt.options.message_follow_duration > 0:
        rt.follow.sweep(trio.current_time())  # each move drops the routes that expired
        for route in routes:  # the Spot's and its members' at once, after the commit
            rt.follow.install(route)
    holds = [host.finish_relocation()[1] for host, _ in parts]
    if crash_points.ARMED:
        crash_points.point("relocation", "relaying", rt.node_id)
    with trio.CancelScope(shield=True):
        # The hold goes first, before on_close(RELOCATED) runs: a message sent after the
        # commit must not overtake a held one of the same sender (relay_held).
        for route, held in zip(routes, holds, strict=True):
            if held:
                await relay_held(rt, rt.peers, rt.follow, route, held)
            # The target runs its other ingress once the hold is there (message_follow).
            await relay_done(rt, rt.peers, route)
        for host, _ in parts:
            await host.moved_away()
    LOGGER.info("node %r: Spot %r moved to node %r", rt.node_id, record.spot_id,
                job.claim.descriptor.node_id, extra=_fields(job))
    return RelocationResult(outcome=RelocationOutcome.COMMITTED, ref=ref)


async def _abort(job: _Relocation, reason: str, *, sealed: bool) -> RelocationResult | None:
    """Before relay-ready: AbortRelocation, the hold back to the queue, serve again.

    ``None`` when the store refused the abort (the target passed relay-ready, or the
    store could not be reached): the caller settles from what the store says.
    """
    rt = job.rt
    with trio.CancelScope(shield=True):
        try:
            await rt.store.location.abort_relocation(job.record.fence())
        except ZLinkError as exc:
            LOGGER.warning("node %r: the relocation of Spot %r could not be aborted (%s)",
                           rt.node_id, job.record.spot_id, exc, extra=_fields(job))
            return None
        for correlation in job.correlations:
            rt.peers.forget(correlation)
        if sealed:
            job.host.unseal()
        job.host.move = None
        for part in job.carried:
            for correlation in part.correlations:
                rt.peers.forget(correlation)
        _unclaim_carried(job.carried)
        membership = job.membership
        if membership is not None and membership.state == MEMBERSHIP.st.relocating:
            membership.state = step(MEMBERSHIP, membership.state,
                                    MEMBERSHIP.ev.abort_relocation)
    await _delete_root(job)
    job.step(RELOCATION.ev.abort_relocation)
    return RelocationResult(outcome=RelocationOutcome.ABORTED, ref=job.record.ref(),
                            reason=reason)


async def _settle(job: _Relocation, why: str) -> RelocationResult:
    """No (good) answer from the target: the store tells whether it passed relay-ready."""
    rt = job.rt
    with trio.CancelScope(shield=True), trio.move_on_after(rt.options.default_timeout):
        return await _follow_store(job, why)
    # Past relay-ready and not committed yet: the source never serves again, so it keeps
    # holding and finishes the move whenever the target commits (its restart included).
    spot_id = job.record.spot_id
    stuck = (
        f"the relocation of Spot {spot_id!r} passed relay-ready but node "
        f"{job.claim.descriptor.node_id!r} did not commit it ({why}); the Spot is unavailable "
        "until that node commits or restarts"
    )
    for host in job.hosts():
        host.strand(stuck)
    rt.catalog.start_job(lambda: _await_commit(job, why))
    raise Unavailable(stuck)


async def _follow_store(job: _Relocation, why: str) -> RelocationResult:
    """Act on the record once it is not RelayReady any more (polled; the caller bounds it)."""
    rt = job.rt
    delay = 0.05
    while True:
        current = await rt.store.location.find(job.record.spot_id)
        if current is None or current.object_generation != job.record.object_generation:
            raise _released(job)
        if current.state in (AuthorityState.RELOCATING, AuthorityState.SEALED):
            sealed = job.host.state in INCARNATION.tags.holds_ingress
            aborted = await _abort(job, why, sealed=sealed)
            if aborted is not None:
                return aborted
        elif current.state is AuthorityState.READY and current.owner != job.record.owner:
            job.target = current.owner  # committed, its answer lost (the target died?)
            committed = await _committed(job, current.ref())
            await _delete_root(job)  # a target that died after its commit left it
            return committed
        elif current.state is not AuthorityState.RELAY_READY:
            owner = describe_owner(current.owner,
                                   await rt.peers.node_id_of(current.owner.node_rid))
            raise Unavailable(f"Spot {job.record.spot_id!r} is {current.state.value} under "
                              f"{owner} after its move; nothing more was done")
        await trio.sleep(delay)  # the target commits within its own deadline
        delay = min(delay * 2, 1.0)


def _released(job: _Relocation) -> Unavailable:
    """The record is gone (or another incarnation): the move was released past relay-ready.

    Only ReleaseRelayReady (its target died: the restart of that NodeId, or an operator)
    deletes a record moving past relay-ready, and the move is not resumed: this
    incarnation ends here without a store write, like one whose owner lost its lease --
    ``on_close(OWNERSHIP_LOST)``, every request still queued or held ends ``Unavailable``,
    it leaves the catalog. Returns the error for the caller to raise.
    """
    rt, spot_id = job.rt, job.record.spot_id
    error = Unavailable(
        f"the move of Spot {spot_id!r} to node {job.claim.descriptor.node_id!r} was released "
        "past relay-ready: that node died before it committed, and its restart (or an "
        "operator) ended the incarnation -- a move is not resumed; the message was "
        "not run. Send a new call: an Instance Spot activates anew, a User Spot must be "
        "created again")
    for correlation in [*job.correlations, *(c for p in job.carried for c in p.correlations)]:
        rt.peers.forget(correlation)
    job.released = True
    for host in job.hosts():  # its carried members were released with it
        host.lose_ownership(error)
    LOGGER.warning("node %r: the move of Spot %r was released past relay-ready (its target "
                   "died); this incarnation ends", rt.node_id, spot_id, extra=_fields(job))
    return error


async def _await_commit(job: _Relocation, why: str) -> None:
    """A catalog job: wait (until the node stops) for the stuck move's commit, then finish."""
    try:
        await _follow_store(job, why)
    except ZLinkError as exc:
        if job.released:
            return  # _released logged it
        LOGGER.error("node %r: the move of Spot %r could not be finished: %s", job.rt.node_id,
                     job.record.spot_id, exc, extra=_fields(job))


async def drain(rt: NodeRuntime, deadline: Deadline, *,
                halt: trio.Event | None = None) -> DrainResult:
    """Relocate every Spot this node hosts; what moved and what did not (the Entry Spot stays).

    Runs in passes: a Spot activated here while a pass ran (placed by a node that read
    this node's claim before the drain closed it to placements) is moved by the next
    pass. Each Spot is tried once -- except an Actor met in the middle of a join, leave
    or close (the application's own move of it), or a SpotWide Spot one of whose members
    is, which the next pass looks at again once that ended; one that left this node
    meanwhile is not listed. The drain ends when a pass finds nothing new, or at its
    deadline: no move starts after it, and the Spots of the pass whose move had not begun
    are listed as not moved (ABORTED, the deadline the reason; past
    :data:`NOT_BEGUN_LISTED` of them, only counted in ``unlisted``); a Spot activated here
    after the last pass is not listed. Once ``halt`` is set no further move starts
    (those already under way finish, by the deadline) and what was not tried is not
    listed. A move that fails with an error that is not a ``ZLinkError`` (a fault) is
    logged with its traceback and listed as not moved; the others go on. A User
    Spot's members that moved with it (carried by a SpotWide move, or following a
    PerActor one) are listed as moved right after it.
    """
    moved: list[RelocationResult] = []
    not_moved: list[RelocationResult] = []
    tried: set[str] = set()
    busy: set[str] = set()
    not_begun = unlisted = 0

    def go_on() -> bool:
        return trio.current_time() < deadline.at and not (halt is not None and halt.is_set())

    def aborted(spot_id: str, reason: str) -> RelocationResult:
        host = rt.catalog.hosts.get(spot_id)
        ref = SpotRef(spot_id=spot_id, generation=host.generation if host else 1,
                      mesh=rt.mesh, node_rid=rt.node_rid)
        return RelocationResult(outcome=RelocationOutcome.ABORTED, ref=ref, reason=reason)

    async def one(spot_id: str) -> None:
        if spot_id not in rt.catalog.hosts:
            return  # it left this node since the pass listed it (moved or closed)
        report = MoveReport()
        try:
            result = await relocate_spot(rt, spot_id, None, deadline, report=report)
        except ZLinkError as exc:
            if spot_id not in rt.catalog.hosts:
                return  # it left this node meanwhile (moved or closed): nothing to move
            result = aborted(spot_id, exc.message)
        except Exception as exc:  # a fault of this one move: its siblings go on
            LOGGER.exception("node %r: the move of Spot %r failed unexpectedly; it is "
                             "listed as not moved and the drain goes on", rt.node_id, spot_id)
            if spot_id not in rt.catalog.hosts:
                return
            result = aborted(spot_id, f"the move failed unexpectedly "
                                      f"({type(exc).__name__}: {exc}) at a step not known "
                                      "here; see the node's log")
        membership = rt.memberships.get(spot_id)
        if result.outcome is not RelocationOutcome.COMMITTED and (report.members_busy or (
                membership is not None and (membership.state != MEMBERSHIP.st.member
                                            or membership.ref.container in busy))):
            # Its own join, leave or close is under way (an Actor's), or one of a member
            # it would carry (a SpotWide Spot's), or its Spot here waits for that (a
            # member moves with its Spot): look again.
            busy.add(spot_id)
            return
        (moved if result.outcome is RelocationOutcome.COMMITTED else not_moved).append(result)
        moved.extend(report.carried)  # the members that moved with it, listed after it

    # Each relocation keeps to the deadline itself (cancelling one from outside could
    # strand it between two store steps); no new move, nor pass, starts after it.
    while go_on() and (batch := sorted(set(rt.catalog.hosts) - tried)):
        if busy and not (set(batch) - busy):
            await trio.sleep(_BUSY_PAUSE)  # only busy Actors left: let their moves end
        busy.clear()
        tried.update(batch)
        # Spots first, then Actors: a PerActor Spot's members follow it within its own
        # move, and an Actor of a Spot that moved ahead of it follows it afterwards.
        actors = [i for i in batch if i in rt.memberships]
        for group in ([i for i in batch if i not in rt.memberships], actors):
            untried = await _in_parallel(group, one, go_on)
            if halt is None or not halt.is_set():  # (the deadline passed)
                for spot_id in untried:
                    if spot_id not in rt.catalog.hosts:
                        continue
                    if not_begun < NOT_BEGUN_LISTED:
                        not_moved.append(aborted(spot_id, _NOT_BEGUN))
                        not_begun += 1
                    else:  # (a result per Spot of a million would be a second's work)
                        unlisted += 1
        tried -= busy
    return DrainResult(moved=moved, not_moved=not_moved, unlisted=unlisted)
