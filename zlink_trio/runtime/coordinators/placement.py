"""Cold activation, source side: where a Missing Instance Spot is placed.

Theory of operation
-------------------
When a call with Instance intent finds its Spot Missing, :func:`place_and_start`
selects the Mesh, the stable type and a node with ``core.placement`` from the live
descriptor claims, then hands the activation envelope to the chosen target -- this
node as a catalog job (:mod:`.activation`), another node as command 39 route kind 2
(:func:`_send_envelope`; the source reserves nothing).  Capacity is still checked by
Reserve on the target.

Reading every live claim for every first message would make placement a store read
per activation, so the claims read last are reused for
:attr:`~zlink_trio.runtime.options.NodeOptions.placement_max_age` (1 s by default) --
but only when they place the Spot on this node.  Any other outcome (another node, no
Mesh, no type, no capacity) is decided on a fresh ``descriptors`` read, so a node
that left or joined is never acted on from a stale list.  :func:`candidates` is the
fresh read User Spot creation uses.

A draining node (``Node.drain``) is no candidate: for itself it has
``placement_closed``, and :func:`close_placement` marks its claim in the store
(``LocationStore.close_placement``), so every other node reads the claim with
``accepts_placements`` false and places neither Instance nor User Spots there -- nor
moves Spots there, unless a relocation names it with ``to=``. :func:`open_placement`
(``Node.undrain``) is the undo: the mark is cleared first (``LocationStore.open_placement``),
then the node chooses itself again. A new Spot whose type only such nodes serve is
``Unavailable`` (``core.placement``), so its caller may retry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import DeadlineExceeded, NotFound, Unavailable, ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import (
    PlacementCandidate,
    Role,
    choose_node,
    eligible_nodes,
    select_instance_type,
    select_mesh,
)
from zlink_trio.core.records import OwnerFence
from zlink_trio.runtime.calls.delivery import handler_for, pooled_uuid4
from zlink_trio.runtime.charts import COLD, TRACE, step
from zlink_trio.runtime.coordinators.activation import (
    ActivationJob,
    run_activation,
    runs_inline,
)
from zlink_trio.runtime.coordinators.placement_plans import PlacementPlans, Plan
from zlink_trio.runtime.mesh.remote_calls import send_spot_message
from zlink_trio.runtime.observe.logs import NODE as LOGGER
from zlink_trio.wire.frames import ActivationRoute

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from statecharts.names import ColdActivationEvent, ColdActivationState
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
    from zlink_trio.runtime.calls.delivery import Delivery, Intent
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.declaration.spot_types import SpotType
    from zlink_trio.runtime.incarnation.catalog import Attempt

__all__ = ("candidates", "close_placement", "inline_job", "open_placement", "place_and_start",
           "serving_candidates")


def _recent_plans(rt: NodeRuntime) -> tuple[PlacementPlans, float] | None:
    """The plans of the claims placement read last and the time now, if that read is
    recent; else ``None``.

    Its live claims (:meth:`PlacementPlans.live`) drop the claims whose lease has run
    out since (this node's own claim is renewed by its lease keeper, so it stays); a
    claim added or removed since is missed for at most ``options.placement_max_age``,
    which is why a reused list is only ever acted on when it places the Spot on this
    node (:func:`place_and_start`). A read older than half its max age asks for one
    refresh in the background (:mod:`.claims_refresh`), so a burst of activations does
    not find it expired together and read it again each.
    """
    seen = rt.placement_claims
    if seen is None:
        return None
    now = rt.now()
    age = now - seen[0]
    max_age = rt.options.placement_max_age
    if not 0 <= age < max_age:
        return None
    if age >= max_age / 2:  # one refresh in the background, before it expires
        rt.claims_refresh.ask(seen)
    plans = rt.placement_plans
    if plans is None or plans.seen is not seen:
        plans = rt.placement_plans = PlacementPlans(seen, rt.node_rid)
    return plans, now


async def _read_claims(rt: NodeRuntime) -> list[NodeClaim]:
    """The live claims, read from the store now (and remembered for placement)."""
    now = rt.now()
    claims = await rt.store.location.descriptors(now=now)
    rt.placement_claims = (now, claims)
    return claims


def _candidates(rt: NodeRuntime, claims: list[NodeClaim]) -> list[PlacementCandidate]:
    """The candidates of ``claims``: this node with its own load, the others as their
    claims describe them.

    Another node's candidate depends on its claim alone -- its descriptor, whose digest
    covers every field, and whether it accepts placements -- so the one built for the
    previous read serves again while those are unchanged (``rt.placement_candidates``,
    the others of the last list only): a node placing Spots elsewhere reads every live
    claim each time, and building a candidate per claim per read was most of its cost
    with 200 nodes (docs/performance.md, issue #32 item 6).
    """
    known = rt.placement_candidates
    others: dict[tuple[str, bool], PlacementCandidate] = {}
    result = []
    for claim in claims:
        descriptor = claim.descriptor
        if descriptor.node_rid == rt.node_rid:
            result.append(_candidate(descriptor, len(rt.catalog.hosts), rt.catalog.pending,
                                     rt.options.active_object_ceiling,
                                     rt.serving and not rt.placement_closed))
            continue
        key = (descriptor.digest, claim.accepts_placements)
        candidate = known.get(key)
        if candidate is None:  # its load is not known here: Reserve on it checks that
            candidate = _candidate(descriptor, 0, 0, None, claim.accepts_placements)
        others[key] = candidate
        result.append(candidate)
    rt.placement_candidates = others
    return result


def _candidate(descriptor: NodeDescriptor, active: int, pending: int, ceiling: int | None,
               serving: bool) -> PlacementCandidate:
    return PlacementCandidate(
        mesh=descriptor.mesh, node_rid=descriptor.node_rid,
        roles=descriptor.roles, served_types=descriptor.served_types, active=active,
        pending=pending, capacity=descriptor.capacity, active_object_ceiling=ceiling,
        weight=descriptor.placement_weight, serving=serving, node_id=descriptor.node_id)


async def candidates(rt: NodeRuntime) -> list[PlacementCandidate]:
    """Placement candidates from a fresh read of the live descriptors; this node with its
    own load."""
    return _candidates(rt, await _read_claims(rt))


async def serving_candidates(rt: NodeRuntime) -> list[PlacementCandidate]:
    """The candidates of the descriptor claims placement read last, while that read is
    younger than ``placement_max_age``; else of a fresh read, which placement does not
    keep (when and what placement reads stays its own). For the node's reminder task
    (``coordinators.reminders``), which needs the live hosts, not a placement."""
    seen = rt.placement_claims
    now = rt.now()
    if seen is not None and now - seen[0] < rt.options.placement_max_age:
        return _candidates(rt, seen[1])
    return _candidates(rt, await rt.store.location.descriptors(now=now))


async def close_placement(rt: NodeRuntime, deadline: Deadline) -> None:
    """Tell the other nodes, through the store, that this node takes no new Spots.

    ClosePlacement on this lifecycle's claim, shielded from the caller's cancellation
    and bounded by ``deadline`` (the drain's). Never raises: a store error, the
    deadline, or a claim that is gone is logged as a warning and the drain goes on --
    this node's own ``placement_closed`` still keeps it from choosing itself; only
    other nodes may then go on placing Spots here until the claim is removed. With a
    lost lease nothing is written (the lifecycle is over).
    """
    if rt.lease_lost:
        return
    marked = False
    with trio.CancelScope(deadline=deadline.at, shield=True) as scope:
        try:
            marked = await rt.store.location.close_placement(
                rt.mesh, rt.node_rid, rt.owner.lifecycle_generation)
        except ZLinkError as exc:
            LOGGER.warning("node %r: could not mark its claim as draining (%s); other nodes "
                           "may still place new Spots on it until it leaves", rt.node_id,
                           exc.message)
            return
    if scope.cancelled_caught:
        LOGGER.warning("node %r: marking its claim as draining did not finish before the "
                       "drain's deadline; other nodes may still place new Spots on it until "
                       "it leaves", rt.node_id)
    elif not marked:
        LOGGER.warning("node %r: its claim (lifecycle %d) is gone from the store, so it was "
                       "not marked as draining", rt.node_id, rt.owner.lifecycle_generation)


async def open_placement(rt: NodeRuntime, deadline: Deadline) -> None:
    """Undo a drain: clear the mark on this lifecycle's claim, then choose this node again.

    OpenPlacement on the claim first, then ``placement_closed`` is cleared: when this
    returns this node chooses itself again, and every other node at its next read of
    the claims (a read placing a Spot on itself is reused for up to
    ``options.placement_max_age``). Nothing else changes: the Spots a drain moved away
    stay where they are, a drain still running goes on moving. Unlike
    :func:`close_placement` it raises, since the operator asked for it and must know:
    :class:`Unavailable` when the node admits no work (stopping, lease lost) or its claim
    is gone from the store, the store's error (nothing changed), and
    :class:`DeadlineExceeded` at ``deadline`` (the mark may or may not be cleared; the
    node still does not choose itself: undrain again, it is idempotent).
    """
    rt.check_admission()
    lifecycle = rt.owner.lifecycle_generation
    with trio.move_on_at(deadline.at) as scope:
        opened = await rt.store.location.open_placement(rt.mesh, rt.node_rid, lifecycle)
    if scope.cancelled_caught:
        raise DeadlineExceeded(
            f"undraining node {rt.node_id!r} did not finish before its deadline: its claim "
            "may or may not accept new Spots again, and the node does not choose itself "
            "yet; undrain again (it is idempotent)")
    if not opened:
        raise Unavailable(
            f"node {rt.node_id!r} cannot take new Spots again: its claim (lifecycle "
            f"{lifecycle}) is gone from the store, so its lifecycle is over; restart the node")
    rt.placement_closed = False


def _place(rt: NodeRuntime, intent: Intent, found: list[PlacementCandidate],
           state: ColdActivationState, spot_id: str,
           ) -> tuple[ColdActivationState, str, str, PlacementCandidate]:
    """Mesh, stable type and node from ``found``: state, mesh, type, node."""
    try:
        mesh = select_mesh(found, intent.mesh)
    except NotFound:
        step(COLD, state, COLD.ev.mesh_not_found)
        raise
    state = step(COLD, state, COLD.ev.mesh_selected)
    try:
        stable_type = select_instance_type(found, mesh, intent.stable_type)
    except NotFound:
        step(COLD, state, COLD.ev.type_not_provided)
        raise
    except Unavailable:  # only draining or stopping nodes serve it
        step(COLD, state, COLD.ev.type_hosts_closed)
        raise
    state = step(COLD, state, COLD.ev.type_selected)
    eligible = eligible_nodes(found, mesh, stable_type, SpotKind.INSTANCE)
    return state, mesh, stable_type, choose_node(eligible, rt.random, spot_id=spot_id)


def _is_local_server(rt: NodeRuntime, node: PlacementCandidate) -> bool:
    return node.node_rid == rt.node_rid and Role.OBJECT_SERVER in node.roles


def _plan(rt: NodeRuntime, live: list[NodeClaim], intent: Intent) -> Plan | None:
    """Mesh and type as ``core.placement`` selects them from ``live``, and the hosts of
    the type; ``None`` when the selection refuses (a fresh read decides then)."""
    found = _candidates(rt, live)
    try:
        mesh = select_mesh(found, intent.mesh)
        stable_type = select_instance_type(found, mesh, intent.stable_type)
    except ZLinkError:
        return None
    hosts = tuple(c for c in found if c.mesh == mesh and c.serving
                  and Role.OBJECT_SERVER in c.roles
                  and c.served_types.get(stable_type) is SpotKind.INSTANCE)
    own = next((i for i, c in enumerate(hosts) if c.node_rid == rt.node_rid), None)
    return Plan(mesh, stable_type, hosts, own)


def _placed_here(rt: NodeRuntime, intent: Intent, spot_id: str
                 ) -> tuple[str, str, PlacementCandidate] | None:
    """Mesh, type and node from the recent claims, when they place the Spot here.

    ``None`` when there is no recent read or it decides anything else (another node,
    no Mesh, no type, no capacity): that is decided on a fresh read. Nothing is
    stepped: the chart takes the placement's events once it is acted on.

    What ``core.placement`` decides from a read -- Mesh, type, the hosts serving it --
    depends on the claims still live, this node's serving flag and the intent, not on
    the load, so it is decided once per read and those (:class:`PlacementPlans`); the
    room of each host (``eligible_nodes``: this node's live load and ceiling) and the
    rendezvous choice among several are checked for every activation.
    """
    recent = _recent_plans(rt)
    if recent is None:
        return None
    plans, now = recent
    live = plans.live(now)
    key = (len(live), rt.serving and not rt.placement_closed, intent.mesh,
           intent.stable_type)
    if key in plans.plans:
        plan = plans.plans[key]
    else:
        plan = plans.plans[key] = _plan(rt, live, intent)
    if plan is None or plan.own is None:
        return None
    hosts = plan.hosts
    own_load = len(rt.catalog.hosts) + rt.catalog.pending
    ceiling = rt.options.active_object_ceiling
    if len(hosts) == 1:  # this node alone serves the type: no rendezvous choice
        host = hosts[0]
        if host.weight > 0 and own_load < host.capacity and (ceiling is None
                                                             or own_load < ceiling):
            return plan.mesh, plan.stable_type, host  # a host of a plan is an object server
        return None
    kept = []
    for i, host in enumerate(hosts):
        if host.weight <= 0:
            continue
        load, limit = (own_load, ceiling) if i == plan.own else (0, None)
        if load < host.capacity and (limit is None or load < limit):
            kept.append(host)
    if not kept:
        return None
    node = kept[0] if len(kept) == 1 else choose_node(kept, rt.random, spot_id=spot_id)
    return (plan.mesh, plan.stable_type, node) if _is_local_server(rt, node) else None


#: The ColdActivation events of a placement that succeeded (mesh and type chosen), then
#: of the local target accepting the envelope.
_PLACING: Final = (COLD.ev.found_missing_with_intent, COLD.ev.mesh_selected,
                   COLD.ev.type_selected)
_ACCEPTING: Final = (COLD.ev.capacity_available, COLD.ev.envelope_accepted)


def _steps(state: ColdActivationState, events: tuple[ColdActivationEvent, ...]
           ) -> ColdActivationState:
    for event in events:
        state = step(COLD, state, event)
    return state


# Both paths start from fixed states, so they end in fixed states: stepped once here (an
# event the chart stops defining fails at import), and again per activation only while a
# test observes every step (``charts.TRACE``).
_PLACED: Final = _steps(COLD.initial, _PLACING)
_ACCEPTED: Final = _steps(_PLACED, _ACCEPTING)


def _placed_state() -> ColdActivationState:
    """The chart's state after a placement that succeeded (mesh and type chosen)."""
    return _steps(COLD.initial, _PLACING) if TRACE else _PLACED


def _local_job(rt: NodeRuntime, call: Delivery, state: ColdActivationState, mesh: str,
               spot_type: SpotType, info: HandlerInfo, attempt: Attempt | None, *,
               redeliver: Callable[[], Awaitable[None]]) -> ActivationJob:
    state = _ACCEPTED if state == _PLACED and not TRACE else _steps(state, _ACCEPTING)
    # Positional, in ActivationJob's field order (rt, attempt, spot_type, info, mesh,
    # spot_id, msg, size, completion, deadline, op_id, state, redeliver,
    # source_saw_missing, encoded): an attrs __init__ called with keywords costs three
    # times as much, and every cold activation builds one.
    return ActivationJob(rt, attempt, spot_type, info, mesh, call.spot_id,
                         call.message_for_local_turn(rt.codec), call.size, call.completion,
                         call.deadline,
                         call.operation_id(rt.new_uuid4 if rt.rng is not None
                                           else pooled_uuid4),
                         state, redeliver, True, call.encoded, False, False, call.trace)


def inline_job(rt: NodeRuntime, call: Delivery) -> ActivationJob | None:
    """The local job of :func:`place_and_start` for ``activation.activate_inline``, for a
    call whose ``find`` saw the ID Missing in this same continuation.

    ``None`` when the job cannot run inline (no Instance intent, an attempt of this
    node already competes, no recent claims placing the Spot here, a type that
    ``activation.runs_inline`` refuses): nothing was done, and :func:`place_and_start`
    decides. Raises what ``handler_for`` raises.
    """
    intent = call.intent
    if intent is None or call.spot_id in rt.catalog.attempts:
        return None
    placed = _placed_here(rt, intent, call.spot_id)
    if placed is None:
        return None
    mesh, stable_type, _ = placed
    spot_type = rt.registry.lookup(stable_type, SpotKind.INSTANCE)
    if not runs_inline(spot_type):
        return None
    info = handler_for(spot_type, call)
    return _local_job(rt, call, _placed_state(), mesh, spot_type, info, None,
                      redeliver=_by_the_caller)


async def _by_the_caller() -> None:
    raise AssertionError("an inline activation hands its message back through its caller")


async def place_and_start(rt: NodeRuntime, call: Delivery, *,
                          redeliver: Callable[[], Awaitable[None]]) -> bool:
    """Source side of cold activation; ``False``: resolve again.

    ``True`` once the envelope was accepted by its target: this node's catalog (a
    local activation job) or another node's link (command 39 route kind 2).
    ``redeliver`` hands the first message back to the resolver when another attempt
    turns out to own the ID.
    """
    intent = call.intent
    assert intent is not None
    # A recent read is used only when it places the Spot here; any other outcome
    # (another node, no mesh, no type, no capacity) is decided on a fresh read.
    placed = _placed_here(rt, intent, call.spot_id)
    if placed is not None:
        state = _placed_state()
        mesh, stable_type, node = placed
    else:
        found = _candidates(rt, await _read_claims(rt))
        state, mesh, stable_type, node = _place(
            rt, intent, found, step(COLD, COLD.initial, COLD.ev.found_missing_with_intent),
            call.spot_id)
    if not _is_local_server(rt, node):
        await _send_envelope(rt, call, state, mesh, stable_type, node)
        return True
    spot_type = rt.registry.lookup(stable_type, SpotKind.INSTANCE)
    info = handler_for(spot_type, call)
    attempt = rt.catalog.begin_attempt(call.spot_id)
    if attempt is None:
        step(COLD, state, COLD.ev.capacity_available)
        await rt.catalog.attempts[call.spot_id].done.wait()
        return False
    job = _local_job(rt, call, state, mesh, spot_type, info, attempt, redeliver=redeliver)
    rt.catalog.start_job(lambda: run_activation(job))
    return True


async def _send_envelope(rt: NodeRuntime, call: Delivery, state: ColdActivationState, mesh: str,
                         stable_type: str, node: PlacementCandidate) -> None:
    """Send the envelope to another node: command 39 route kind 2; nothing is reserved here."""
    claim = rt.peers.placed_claim(node.node_rid, node.node_id, f"Spot {call.spot_id!r}",
                                  "nothing was created. Send a new call")
    known = rt.registry.get(stable_type)
    if known is not None:  # this node knows the type too: check the reply before sending
        handler_for(known, call)
    state = step(COLD, state, COLD.ev.capacity_available)
    link = await rt.peers.link_to(claim)
    send_spot_message(rt, rt.peers, call, link, ActivationRoute(
        target_mesh=mesh, target=OwnerFence(node.node_rid, claim.lifecycle_generation),
        spot_id=call.spot_id, stable_type=stable_type, descriptor_version=claim.store_version))
    step(COLD, state, COLD.ev.envelope_accepted)  # the target goes on from checking_target_owner
