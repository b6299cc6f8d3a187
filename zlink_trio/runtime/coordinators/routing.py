"""Resolve a Spot ID and admit a message: route cache, store, waiting, cold activation.

Theory of operation
-------------------
:func:`deliver` is the terminal step of every direct call (06 §4.1, §5).  It loops:

1. The positive route cache names this node and the catalog has the host -> admit;
   it names another node -> command 39 route kind 1 to that owner, without reading
   the store (:mod:`._remote`).
2. Otherwise ``store.find``.  Missing without Instance intent is :class:`NotFound` and
   nothing is written.  Missing with Instance intent runs the source side of cold
   activation (:func:`_place_and_start`): Mesh, stable type and capacity selection
   with ``core.placement``, then the activation envelope goes to the target -- this
   node as a catalog task (:mod:`._activation`), another node as command 39 route
   kind 2 (:func:`_send_envelope`; the source reserves nothing).  Placement reuses
   the live descriptor claims it read within :func:`placement_max_age` (1 s by
   default), but only when they place the Spot on this node; any other outcome is
   decided on a fresh ``descriptors`` read.  Capacity is still checked by Reserve.
3. Ready -> the kind/type must suit the intent (TypeMismatch).  Owned by another
   node -> command 39 route kind 1 to its owner if its claim is live (else
   Unavailable: the Spot is not recreated elsewhere), and the route is cached.  Owned
   here -> the catalog must hold that incarnation (else StaleRoute: the local view
   disagrees with the store, so the message is not run).  Generations are *not*
   compared for ordinary messages (09 §4).
4. Creating -> wait for the authority to change (the local attempt's event, or a store
   poll with backoff), then go round again; never cached.  Closing -> with Instance
   intent wait the same way (idle eviction racing an activation refreshes the route,
   09 §5); without intent the message ends StaleRoute.

A call to another node returns at outbound admission (its link accepted the frame); a
request's reply arrives as command 20 and completes the caller's ``Completion``.  A
StaleRoute answer drops the cached route, so the next call resolves afresh; nothing is
ever resent automatically (06 §5).

Every wait runs under the caller's deadline (the builder's ``move_on_at``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.errors import NotFound, StaleRoute, TypeMismatch, Unavailable, ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.placement import (
    PlacementCandidate,
    Role,
    choose_node,
    eligible_nodes,
    select_instance_type,
    select_mesh,
)
from zlink_trio.core.records import AuthorityState, OwnerFence
from zlink_trio.core.route_cache import CachedRoute
from zlink_trio.runtime.charts import COLD, step
from zlink_trio.runtime.coordinators.activation import ActivationJob, run_activation
from zlink_trio.runtime.incarnation.host import MessageWork
from zlink_trio.runtime.mesh.remote_calls import send_spot_message
from zlink_trio.wire.frames import ActivationRoute, ReadyRoute

if TYPE_CHECKING:
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.runtime.calls.completion import Completion
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.incarnation.host import Host
    from zlink_trio.runtime.state import NodeRuntime
    from zlink_trio.transport import Link
    from zlink_trio.wire.codec import EncodedMessage

__all__ = ("Backoff", "Delivery", "Intent", "candidates", "deliver", "wait_for_change")

_FIRST_POLL: Final = 0.005
_MAX_POLL: Final = 0.25


class Backoff:
    """Exponential store-poll delay, 5 ms doubling to 250 ms."""

    __slots__ = ("delay",)

    def __init__(self) -> None:
        self.delay = _FIRST_POLL

    async def sleep(self) -> None:
        """Sleep the current delay, then double it (bounded)."""
        await trio.sleep(self.delay)
        self.delay = min(self.delay * 2, _MAX_POLL)


@attrs.frozen
class Intent:
    """Instance intent of a call: the optional stable type and initial Mesh."""

    stable_type: str | None
    mesh: str | None


#: ``reply`` value meaning "a one-way send: do not check the reply type".
SEND: Final = object()


@attrs.define(eq=False)
class Delivery:
    """One direct call on its way to a Spot queue."""

    spot_id: str
    msg: object
    size: int
    intent: Intent | None
    completion: Completion | None
    reply: object  # type[object] | None, or SEND
    deadline: float
    #: The operation ID: drawn on first use (:meth:`operation_id`), since a call served
    #: on this node by a Ready Spot never needs one.
    op_id: str
    #: The message as the codec encoded it (reused when it goes to another node).
    encoded: EncodedMessage | None = None

    def operation_id(self, rt: NodeRuntime) -> str:
        """The call's operation ID (a uuid4), drawn the first time it is needed."""
        if not self.op_id:
            self.op_id = rt.new_uuid4()
        return self.op_id


async def wait_for_change(rt: NodeRuntime, spot_id: str, backoff: Backoff) -> None:
    """Wait once for the authority of ``spot_id`` to change (Creating or Closing).

    A local attempt or closing host is awaited by event; otherwise the store is
    polled with ``backoff``. The caller's deadline bounds it.
    """
    attempt = rt.catalog.attempts.get(spot_id)
    if attempt is not None:
        await attempt.done.wait()
        return
    host = rt.catalog.hosts.get(spot_id)
    if host is not None and host.sealed:
        await host.finished.wait()
        return
    await backoff.sleep()


def _check_kind(call: Delivery, record: AuthorityRecord) -> None:
    if record.kind is SpotKind.ENTRY:
        raise TypeMismatch(
            f"Spot {record.spot_id!r} is an Entry Spot, which takes no application "
            "messages in this version; address a User or Instance Spot"
        )
    intent = call.intent
    if intent is None:
        return
    if record.kind is not SpotKind.INSTANCE or (
            intent.stable_type is not None and intent.stable_type != record.stable_type):
        wanted = intent.stable_type or "an Instance type"
        raise TypeMismatch(
            f"Spot {record.spot_id!r} exists as {record.kind.name.title()} Spot type "
            f"{record.stable_type!r}, but the call's Instance intent names {wanted!r}; "
            "call it without instance_spot(), or with its own type"
        )


def _handler_for(call: Delivery, host: Host) -> HandlerInfo:
    info = host.spot_type.handlers.find(type(call.msg))
    if call.reply is not SEND and info.reply_type is not call.reply:
        declared = "None" if info.reply_type is None else info.reply_type.__qualname__
        asked = "None" if call.reply is None else getattr(call.reply, "__qualname__", call.reply)
        raise TypeMismatch(
            f"handler {host.spot_type.cls.__qualname__}.{info.name} replies {declared}, but "
            f"the request asked for reply={asked}; pass reply={declared}"
        )
    return info


def _check_remote_reply(rt: NodeRuntime, call: Delivery, stable_type: str) -> None:
    """When this node knows the Spot type too, check handler and reply type before sending."""
    spot_type = rt.registry.get(stable_type)
    if spot_type is None or call.reply is SEND:
        return
    info = spot_type.handlers.find(type(call.msg))
    if info.reply_type is not call.reply:
        declared = "None" if info.reply_type is None else info.reply_type.__qualname__
        raise TypeMismatch(f"{stable_type!r} handles {type(call.msg).__qualname__} with a "
                           f"reply of type {declared}; request it with reply={declared}")


def _send_ready(rt: NodeRuntime, call: Delivery, link: Link, route: CachedRoute) -> None:
    assert route.owner is not None
    assert route.owner_generation is not None
    try:
        send_spot_message(rt, call, link, ReadyRoute(
            spot_id=call.spot_id, object_generation=route.object_generation,
            owner_generation=route.owner_generation, target=route.owner))
    except Unavailable:
        rt.route_cache.invalidate(call.spot_id)
        raise


async def _send_remote(rt: NodeRuntime, call: Delivery, record: AuthorityRecord) -> None:
    """A Ready Spot owned by another node: command 39 route kind 1 to that owner."""
    _check_remote_reply(rt, call, record.stable_type)
    claim = await rt.peers.claim_of(record.owner, f"Spot {record.spot_id!r}")
    link = await rt.peers.link_to(claim)
    route = CachedRoute(
        spot_id=record.spot_id, object_generation=record.object_generation, mesh=record.mesh,
        node_rid=record.owner.node_rid, kind=record.kind, stable_type=record.stable_type,
        owner_lease_deadline=claim.lease_expires_at, owner=record.owner,
        owner_generation=record.owner_generation)
    _send_ready(rt, call, link, route)
    rt.route_cache.put(route, rt.now())


async def _send_cached(rt: NodeRuntime, call: Delivery, route: CachedRoute) -> None:
    """The positive route cache names another node: send there without reading the store."""
    _check_remote_reply(rt, call, route.stable_type)
    assert route.owner is not None
    _send_ready(rt, call, await rt.peers.link_to_owner(route.owner, f"Spot {call.spot_id!r}"),
                route)


def _local_host(rt: NodeRuntime, call: Delivery, record: AuthorityRecord) -> Host:
    if record.owner != rt.owner:
        raise StaleRoute(f"Spot {record.spot_id!r} belongs to an earlier lifecycle of this "
                         "node; the message was not run. Its authority must be cleaned "
                         "up (an operator action) before the Spot can be used again")
    host = rt.catalog.hosts.get(record.spot_id)
    if host is None or host.generation != record.object_generation:
        raise StaleRoute(
            f"this node has no running incarnation matching the store's authority for Spot "
            f"{record.spot_id!r}; the message was not run. Send a new call"
        )
    rt.route_cache.put(CachedRoute(
        spot_id=record.spot_id, object_generation=record.object_generation, mesh=record.mesh,
        node_rid=rt.node_rid, kind=record.kind, stable_type=record.stable_type,
        owner_lease_deadline=rt.lease_expires_at), rt.now())
    return host


def _cached_host(rt: NodeRuntime, call: Delivery) -> Host | CachedRoute | None:
    """The local host (or remote route) the route cache names for ``call`` (one lookup)."""
    route = rt.route_cache.get(call.spot_id, rt.now())
    if route is None:
        return None
    if call.intent is not None and (
            route.kind is not SpotKind.INSTANCE
            or call.intent.stable_type not in (None, route.stable_type)):
        return None  # let the store's record produce the TypeMismatch
    if route.node_rid != rt.node_rid:
        return route if route.owner is not None else None
    return rt.catalog.hosts.get(call.spot_id)


def admit_cached(rt: NodeRuntime, call: Delivery) -> Host | CachedRoute | bool:
    """The synchronous first step of :func:`deliver`: admit through the route cache.

    ``True``: admitted (nothing was awaited). ``False``: the cache names no local host,
    so the store must be asked. A :class:`Host`: it is sealed and the call has Instance
    intent, so its end must be awaited. A :class:`CachedRoute`: the Spot is Ready on
    another node, to be sent there. Pass a non-``True`` result to :func:`deliver`
    as ``first`` to go on without consulting the cache again. Raises what
    :func:`deliver` raises on its cached path.
    """
    rt.check_usable()
    host = _cached_host(rt, call)
    if host is None:
        return False
    if isinstance(host, CachedRoute):
        link = rt.peers.open_link(host)
        if link is None:
            return host  # no open link: deliver() dials it
        _check_remote_reply(rt, call, host.stable_type)
        _send_ready(rt, call, link, host)
        return True
    info = _handler_for(call, host)
    if host.sealed and call.intent is not None:
        return host  # idle eviction racing: refresh the route
    host.admit(MessageWork(call.msg, info, call.completion, call.deadline), call.size)
    return True


async def deliver(rt: NodeRuntime, call: Delivery,
                  first: Host | CachedRoute | bool | None = None) -> None:
    """Resolve ``call.spot_id`` and admit the message (or hand it to a cold activation).

    Returns at admission (for another node: when its link accepted the frame). Raises
    NotFound, TypeMismatch, StaleRoute, Unavailable, CapacityExceeded, NotConfigured or
    InvalidOperation as the module docstring says. ``first`` is the result of an
    :func:`admit_cached` the caller already ran.
    """
    backoff = Backoff()
    cached: Host | CachedRoute | bool | None = first
    while True:
        if cached is None:
            cached = admit_cached(rt, call)
        if cached is True:
            return
        if isinstance(cached, CachedRoute):
            await _send_cached(rt, call, cached)
            return
        if cached is not False:
            await cached.finished.wait()  # idle eviction racing: refresh the route
            cached = None
            continue
        cached = None
        record = await rt.store.location.find(call.spot_id)
        if record is None:
            attempt = rt.catalog.attempts.get(call.spot_id)
            if attempt is not None:  # an envelope this node accepted is activating
                await attempt.done.wait()
                continue
            if call.intent is None:
                raise NotFound(
                    f"Spot {call.spot_id!r} does not exist (no Ready authority) and the "
                    "call has no Instance intent, so nothing was created; create it first "
                    "or call with .instance_spot() to activate it on first use"
                )
            if await _place_and_start(rt, call):
                return
            continue
        _check_kind(call, record)
        if record.state in (AuthorityState.READY, AuthorityState.RELOCATING):
            if record.owner.node_rid != rt.node_rid:
                await _send_remote(rt, call, record)
                return
            host = _local_host(rt, call, record)
        elif record.state is AuthorityState.SEALED:
            raise Unavailable(f"Spot {call.spot_id!r} is sealed for relocation; the "
                              "message was not run. Retry once the move committed or "
                              "aborted")
        elif record.state is AuthorityState.CLOSING and call.intent is None:
            raise StaleRoute(
                f"Spot {call.spot_id!r} is closing and admits no new messages; the "
                "message was not run. Send a new call once it is closed, or call with "
                ".instance_spot() to wait for it and activate it again"
            )
        else:
            await wait_for_change(rt, call.spot_id, backoff)
            continue
        info = _handler_for(call, host)
        if host.sealed and call.intent is not None:
            await host.finished.wait()  # idle eviction racing: refresh the route
            continue
        host.admit(MessageWork(call.msg, info, call.completion, call.deadline), call.size)
        return


def placement_max_age(rt: NodeRuntime) -> float:
    """How long placement may reuse the descriptor claims it read (store clock, seconds).

    A tenth of the shorter of the lease and the route cache's age: 1 s by default.
    """
    return min(rt.options.lease, rt.options.route_cache_max_age) / 10


def _recent_claims(rt: NodeRuntime) -> list[NodeClaim] | None:
    """The live claims placement read last, if that read is recent; else ``None``.

    A reused list drops the claims whose lease has run out since (this node's own
    claim is renewed by its lease keeper, so it stays); a claim added or removed since
    is missed for at most :func:`placement_max_age`, which is why a reused list is only
    ever acted on when it places the Spot on this node (:func:`_place_and_start`).
    """
    seen = rt.placement_claims
    if seen is None:
        return None
    now = rt.now()
    if not 0 <= now - seen[0] < placement_max_age(rt):
        return None
    return [c for c in seen[1]
            if c.lease_expires_at > now or c.descriptor.node_rid == rt.node_rid]


async def _read_claims(rt: NodeRuntime) -> list[NodeClaim]:
    """The live claims, read from the store now (and remembered for placement)."""
    now = rt.now()
    claims = await rt.store.location.descriptors(now=now)
    rt.placement_claims = (now, claims)
    return claims


def _candidates(rt: NodeRuntime, claims: list[NodeClaim]) -> list[PlacementCandidate]:
    result = []
    for claim in claims:
        descriptor = claim.descriptor
        own = descriptor.node_rid == rt.node_rid
        result.append(PlacementCandidate(
            mesh=descriptor.mesh, node_rid=descriptor.node_rid, roles=descriptor.roles,
            served_types=descriptor.served_types,
            active=len(rt.catalog.hosts) if own else 0,
            pending=rt.catalog.pending if own else 0,
            capacity=descriptor.capacity,
            active_object_ceiling=rt.options.active_object_ceiling if own else None,
            weight=descriptor.placement_weight,
            serving=rt.serving if own else True,
        ))
    return result


async def candidates(rt: NodeRuntime) -> list[PlacementCandidate]:
    """Placement candidates from a fresh read of the live descriptors; this node with its
    own load."""
    return _candidates(rt, await _read_claims(rt))


def _place(rt: NodeRuntime, intent: Intent, found: list[PlacementCandidate],
           state: str) -> tuple[str, str, str, PlacementCandidate]:
    """Mesh, stable type and node from ``found`` (06 §4.1 steps 4-7): state, mesh, type, node."""
    try:
        mesh = select_mesh(found, intent.mesh)
    except NotFound:
        step(COLD, state, "mesh_not_found")
        raise
    state = step(COLD, state, "mesh_selected")
    try:
        stable_type = select_instance_type(found, mesh, intent.stable_type)
    except NotFound:
        step(COLD, state, "type_not_provided")
        raise
    state = step(COLD, state, "type_selected")
    eligible = eligible_nodes(found, mesh, stable_type, SpotKind.INSTANCE)
    return state, mesh, stable_type, choose_node(eligible, rt.random)


def _is_local_server(rt: NodeRuntime, node: PlacementCandidate) -> bool:
    return node.node_rid == rt.node_rid and Role.OBJECT_SERVER in node.roles


async def _place_and_start(rt: NodeRuntime, call: Delivery) -> bool:
    """Source side of cold activation (06 §4.1 steps 4-8); False: resolve again."""
    intent = call.intent
    assert intent is not None
    initial = step(COLD, COLD.initial, "found_missing_with_intent")
    placed = None
    recent = _recent_claims(rt)
    if recent is not None:
        # A recent read is used only when it places the Spot here; any other outcome
        # (another node, no mesh, no type, no capacity) is decided on a fresh read.
        try:
            placed = _place(rt, intent, _candidates(rt, recent), initial)
        except ZLinkError:
            placed = None
        if placed is not None and not _is_local_server(rt, placed[3]):
            placed = None
    if placed is None:
        found = _candidates(rt, await _read_claims(rt))
        placed = _place(rt, intent, found, initial)
    state, mesh, stable_type, node = placed
    if not _is_local_server(rt, node):
        await _send_envelope(rt, call, state, mesh, stable_type, node)
        return True
    spot_type = rt.registry.lookup(stable_type, SpotKind.INSTANCE)
    info = spot_type.handlers.find(type(call.msg))
    if call.reply is not SEND and info.reply_type is not call.reply:
        raise TypeMismatch(
            f"{stable_type!r} handles {type(call.msg).__qualname__} with a reply of type "
            f"{info.reply_type.__qualname__ if info.reply_type else 'None'}; request it with "
            "that reply type"
        )
    state = step(COLD, state, "capacity_available")
    attempt = rt.catalog.begin_attempt(call.spot_id)
    if attempt is None:
        await rt.catalog.attempts[call.spot_id].done.wait()
        return False
    job = ActivationJob(rt=rt, attempt=attempt, spot_type=spot_type, info=info, mesh=mesh,
                        spot_id=call.spot_id, msg=call.msg, size=call.size,
                        completion=call.completion, deadline=call.deadline,
                        op_id=call.operation_id(rt),
                        state=step(COLD, state, "envelope_accepted"),
                        redeliver=lambda: deliver(rt, call), source_saw_missing=True)
    rt.catalog.start_job(lambda: run_activation(job))
    return True


async def _send_envelope(rt: NodeRuntime, call: Delivery, state: str, mesh: str,
                         stable_type: str, node: PlacementCandidate) -> None:
    """06 §4.1 step 8 to another node: command 39 route kind 2; nothing is reserved here."""
    claim = rt.peers.claim_by_rid(node.node_rid)
    if claim is None:
        raise Unavailable(f"node {node.node_rid} left the mesh while Spot {call.spot_id!r} was "
                          "being placed on it; nothing was created. Send a new call")
    _check_remote_reply(rt, call, stable_type)
    state = step(COLD, state, "capacity_available")
    link = await rt.peers.link_to(claim)
    send_spot_message(rt, call, link, ActivationRoute(
        target_mesh=mesh, target=OwnerFence(node.node_rid, claim.lifecycle_generation),
        spot_id=call.spot_id, stable_type=stable_type, descriptor_version=claim.store_version))
    step(COLD, state, "envelope_accepted")  # the target goes on from checking_target_owner
