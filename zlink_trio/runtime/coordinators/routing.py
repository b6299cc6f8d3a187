"""Resolve a Spot ID and admit a message: route cache, store, waiting.

Theory of operation
-------------------
:class:`~.call_router.CallRouter`, the node's
:class:`~zlink_trio.runtime.calls.delivery.Router`, hands every call of ``node.client``
here as one :class:`~zlink_trio.runtime.calls.delivery.Delivery`; :func:`deliver` is
the terminal step of that call (after :func:`deliver_inline`, its first round in the
caller's continuation, on a store whose transactions never suspend).  It loops:

1. The positive route cache names this node and the catalog has the host -> admit;
   it names another node -> command 39 route kind 1 to that owner, without reading
   the store (:mod:`~zlink_trio.runtime.mesh.remote_calls`).  This first step never
   awaits (:func:`admit_cached`), so a cache hit needs no deadline scope.
2. Otherwise ``store.find``.  Missing without Instance intent is :class:`NotFound` and
   nothing is written.  Missing with Instance intent runs the source side of cold
   activation (:mod:`.placement`): Mesh, stable type and node, then the activation
   envelope goes to the chosen target -- this node or another.
3. Ready -> the kind/type must suit the intent, and an Actor's ID a ToActor call
   (``client.request_actor``) and only it (TypeMismatch).  Owned by another
   node -> command 39 route kind 1 to its owner if its claim is live (else
   Unavailable: the Spot is not recreated elsewhere), and the route is cached.  Owned
   here -> the catalog must hold that incarnation (else StaleRoute: the local view
   disagrees with the store, so the message is not run).  Generations are *not*
   compared for ordinary messages (docs/concepts.md, "Generations").
4. Creating -> wait for the authority to change (the local attempt's event, or a store
   poll with backoff), then go round again; never cached.  Closing -> with Instance
   intent wait the same way (idle eviction racing an activation refreshes the
   route); without intent the message ends StaleRoute.

Whichever way a local host is found -- cached or resolved -- one helper admits the
message (:func:`_admit`), and one check (:func:`handler_for`) matches the message to
its handler and the reply class the caller asked for, before anything is queued or
sent.  A call to another node returns at outbound admission (its link accepted the
frame); a request's reply arrives as command 20 and completes the caller's
``Completion``.  A StaleRoute answer drops the cached route, so the next call resolves
afresh; nothing is ever resent automatically.

Every wait runs under the caller's deadline (:meth:`.call_router.CallRouter.send`,
:meth:`~.call_router.CallRouter.request`).
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, Literal

import trio

from zlink_trio.core.errors import NotFound, StaleRoute, TypeMismatch, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import MOVING_STATES, AuthorityState
from zlink_trio.core.route_cache import CachedRoute
from zlink_trio.runtime.calls.delivery import handler_for
from zlink_trio.runtime.coordinators.activation import activate_inline, without_suspending
from zlink_trio.runtime.coordinators.placement import inline_job, place_and_start
from zlink_trio.runtime.incarnation.work import MessageWork
from zlink_trio.runtime.mesh.remote_calls import (
    operation_number,
    ready_route_bytes,
    send_ready_call,
)
from zlink_trio.runtime.observe.events import resolved, stale
from zlink_trio.runtime.observe.fields import ResolveResult, StaleReason

if TYPE_CHECKING:
    from zlink_trio.core.records import AuthorityRecord
    from zlink_trio.runtime.calls.delivery import Delivery
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.incarnation.incarnation import Incarnation
    from zlink_trio.store.combined_protocol import ImmediateTransactions
    from zlink_trio.transport import Link

__all__ = ("UNREAD", "Backoff", "Unread", "admit_cached", "deliver", "deliver_inline",
           "wait_for_change")

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
    if host is not None and host.admission_sealed:
        await host.finished.wait()
        return
    await backoff.sleep()


def _check_kind(call: Delivery, record: AuthorityRecord) -> None:
    if (record.kind is SpotKind.ACTOR) is not call.to_actor:
        if call.to_actor:
            raise TypeMismatch(
                f"{record.spot_id!r} is {record.kind.name.title()} Spot type "
                f"{record.stable_type!r}, not an Actor; call it with client.request / send")
        raise TypeMismatch(
            f"{record.spot_id!r} is an Actor of type {record.stable_type!r}, not a Spot; "
            "call it with client.request_actor / send_actor")
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
        wanted = (repr(intent.stable_type) if intent.stable_type is not None
                  else "an Instance Spot (no type)")
        raise TypeMismatch(
            f"Spot {record.spot_id!r} exists as {record.kind.name.title()} Spot type "
            f"{record.stable_type!r}, but the call's Instance intent names {wanted}; "
            "call it without instance_spot(), or with its own type"
        )


def _check_remote_reply(rt: NodeRuntime, call: Delivery, stable_type: str) -> None:
    """When this node knows the Spot type too, check handler and reply type before sending."""
    spot_type = rt.registry.get(stable_type)
    if spot_type is not None:
        handler_for(spot_type, call)


def _admit(rt: NodeRuntime, call: Delivery, host: Incarnation, now: float | None = None
           ) -> Incarnation | None:
    """Admit ``call`` to the local ``host``: the one admission of cached and resolved routes.

    ``None`` once admitted; the host itself when it is sealed and the call has Instance
    intent (idle eviction racing: the caller waits for its end and resolves again).
    ``now``: the store clock, if the caller just read it. Raises TypeMismatch,
    StaleRoute, Unavailable or CapacityExceeded.
    """
    info = handler_for(host.spot_type, call)
    if call.intent is not None and host.admission_sealed:
        return host
    host.admit(MessageWork(call.message_for_local_turn(rt.codec), info, call.completion,
                           call.deadline,
                           operation_id=operation_number(call.op_id) if call.op_id else 0,
                           trace=call.trace),
               call.size, now)
    return None


def _send_ready(rt: NodeRuntime, call: Delivery, link: Link, route: CachedRoute) -> None:
    # (A call sent while the Spot's hold is still relayed from here overtakes nothing:
    # its new owner keeps it waiting until the relay is over -- mesh.message_follow.)
    try:
        send_ready_call(rt, rt.peers, call, link, route)
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
        owner_generation=record.owner_generation,
        wire_route=ready_route_bytes(record.spot_id, record.object_generation,
                                     record.owner_generation, record.owner))
    _send_ready(rt, call, link, route)
    rt.route_cache.put(route, rt.now())


async def _send_cached(rt: NodeRuntime, call: Delivery, route: CachedRoute) -> None:
    """The positive route cache names another node: send there without reading the store."""
    _check_remote_reply(rt, call, route.stable_type)
    assert route.owner is not None
    try:
        link = await rt.peers.link_to_owner(route.owner, f"Spot {call.spot_id!r}")
    except Unavailable:
        # The cached owner cannot be reached: the route is dropped; :func:`deliver` then
        # resolves through the store (nothing was sent).
        rt.route_cache.invalidate(call.spot_id)
        raise
    _send_ready(rt, call, link, route)


def _local_host(rt: NodeRuntime, record: AuthorityRecord) -> Incarnation:
    if record.owner != rt.owner:
        stale(rt.node_id, rt.metrics, StaleReason.EARLIER_LIFECYCLE, record.spot_id,
              generation=record.object_generation, mesh=record.mesh)
        raise StaleRoute(f"Spot {record.spot_id!r} belongs to an earlier lifecycle of this "
                         "node; the message was not run. Its authority must be cleaned "
                         "up (an operator action) before the Spot can be used again")
    host = rt.catalog.hosts.get(record.spot_id)
    if host is None or host.generation != record.object_generation:
        stale(rt.node_id, rt.metrics, StaleReason.NO_INCARNATION, record.spot_id,
              generation=record.object_generation, mesh=record.mesh)
        raise StaleRoute(
            f"this node has no running incarnation matching the store's authority for Spot "
            f"{record.spot_id!r}; the message was not run. Send a new call"
        )
    host.route_expires_at = rt.route_cache.local_expiry(rt.now(), rt.lease_expires_at)
    return host


def _cached_host(rt: NodeRuntime, call: Delivery, now: float) -> Incarnation | CachedRoute | None:
    """The local host (its route on the host itself) or remote route for ``call`` at
    store-clock time ``now``.

    A local incarnation's route is valid until ``host.route_expires_at``, the expiry a
    cached route would have; past it, the store is read again.
    """
    host = rt.catalog.hosts.get(call.spot_id)
    if host is not None:
        fresh = host.route_expires_at > now
        rt.route_cache.count_local(hit=fresh)
        kind = host.spot_type.kind
        if not fresh or (kind is SpotKind.ACTOR) is not call.to_actor or (
                call.intent is not None and _intent_mismatch(
                    call, kind, host.spot_type.stable_type)):
            return None  # the store's record decides (and produces any TypeMismatch)
        return host
    route = rt.route_cache.get(call.spot_id, now)
    if route is None or route.owner is None or route.node_rid == rt.node_rid:
        return None
    if (route.kind is SpotKind.ACTOR) is not call.to_actor or (
            call.intent is not None and _intent_mismatch(call, route.kind, route.stable_type)):
        return None  # let the store's record produce the TypeMismatch
    return route


def _intent_mismatch(call: Delivery, kind: SpotKind, stable_type: str) -> bool:
    assert call.intent is not None
    return kind is not SpotKind.INSTANCE or call.intent.stable_type not in (None, stable_type)


def admit_cached(rt: NodeRuntime, call: Delivery) -> Incarnation | CachedRoute | bool:
    """The synchronous first step of :func:`deliver`: admit through the route cache.

    ``True``: admitted (nothing was awaited). ``False``: the cache names no local host,
    so the store must be asked. A :class:`Incarnation`: it is sealed and the call has Instance
    intent, so its end must be awaited. A :class:`CachedRoute`: the Spot is Ready on
    another node, to be sent there. Pass a non-``True`` result to :func:`deliver`
    as ``first`` to go on without consulting the cache again. Raises what
    :func:`deliver` raises on its cached path.
    """
    now = rt.clock()  # (``rt.now()``): the route's freshness, and the lease at admission
    host = _cached_host(rt, call, now)
    if host is None:
        return False
    if isinstance(host, CachedRoute):
        link = rt.peers.open_link(host)
        if link is None:
            return host  # no open link: deliver() dials it
        _check_remote_reply(rt, call, host.stable_type)
        _send_ready(rt, call, link, host)
        return True
    sealed = _admit(rt, call, host, now)
    return True if sealed is None else sealed


class Unread(enum.Enum):
    """The type of :data:`UNREAD`."""

    UNREAD = enum.auto()


#: ``deliver``'s ``record`` when it has not been read yet.
UNREAD: Final = Unread.UNREAD


def deliver_inline(rt: NodeRuntime, call: Delivery, transactions: ImmediateTransactions
                   ) -> Literal[True] | AuthorityRecord | Unread | None:
    """The first round of :func:`deliver` in the caller's continuation, after a route-cache
    miss, on a store whose ``transactions`` never suspend: ``find``, and a Missing Spot
    that the recent claims place here is activated at once (``placement.inline_job``,
    ``activation.activate_inline``) -- nothing waits, so no deadline scope is needed.

    ``True``: activated here (or failed; the call's completion has the error).
    Otherwise pass the result to :func:`deliver` as ``prefetched``: the record read and
    not acted on, or :data:`UNREAD` when another attempt won the Reserve (read again).
    """
    record = without_suspending(transactions.find(call.spot_id))
    if record is not None:
        return record
    job = inline_job(rt, call)
    if job is None:
        return None
    resolved(rt.node_id, call.spot_id, ResolveResult.MISSING)
    return True if activate_inline(job, transactions) else UNREAD


async def deliver(rt: NodeRuntime, call: Delivery,
                  first: Incarnation | CachedRoute | bool | None = None,
                  prefetched: AuthorityRecord | Unread | None = UNREAD) -> None:
    """Resolve ``call.spot_id`` and admit the message (or hand it to a cold activation).

    Returns at admission (for another node: when its link accepted the frame). Raises
    NotFound, TypeMismatch, StaleRoute, Unavailable, CapacityExceeded, NotConfigured or
    InvalidOperation as the module docstring says. ``first`` is the result of an
    :func:`admit_cached` the caller already ran; ``prefetched`` the record the caller
    just read (:func:`deliver_inline`), used for the first round instead of a ``find``.
    """
    backoff = Backoff()
    cached: Incarnation | CachedRoute | bool | None = first
    while True:
        if cached is None:
            cached = admit_cached(rt, call)
        if cached is True:
            return
        if isinstance(cached, CachedRoute):
            try:
                await _send_cached(rt, call, cached)
                return
            except Unavailable:
                # The cached owner cannot be reached (it stopped, died, or its link is
                # refused); nothing was sent and the route is dropped: resolve through
                # the store before failing (a clean shutdown or a rolling restart never
                # strands a hot Spot's recent callers).
                cached = False
        if not isinstance(cached, bool) and not isinstance(cached, CachedRoute):
            await cached.finished.wait()  # idle eviction racing: refresh the route
            cached = None
            continue
        cached = None
        if prefetched is UNREAD:
            record = await rt.store.location.find(call.spot_id)
        else:
            record, prefetched = prefetched, UNREAD
        if record is None:
            resolved(rt.node_id, call.spot_id, ResolveResult.MISSING)
            attempt = rt.catalog.attempts.get(call.spot_id)
            if attempt is not None:  # an envelope this node accepted is activating
                await attempt.done.wait()
                continue
            if call.to_actor:
                raise NotFound(
                    f"Actor {call.spot_id!r} does not exist (no Ready authority); a message "
                    "never creates an Actor: create it with node.actors.create() first")
            if call.intent is None:
                raise NotFound(
                    f"Spot {call.spot_id!r} does not exist (no Ready authority) and the "
                    "call has no Instance intent, so nothing was created; create it first "
                    "or call with .instance_spot() to activate it on first use"
                )
            if await place_and_start(rt, call, redeliver=lambda: deliver(rt, call)):
                return
            continue
        _check_kind(call, record)
        if record.state is AuthorityState.READY or record.state in MOVING_STATES:
            # A moving Spot still belongs to its source: not yet sealed it runs the
            # message, sealed it holds it and relays it after the commit.
            if record.owner.node_rid != rt.node_rid:
                resolved(rt.node_id, call.spot_id, ResolveResult.REMOTE, mesh=record.mesh,
                         generation=record.object_generation)
                await _send_remote(rt, call, record)
                return
            resolved(rt.node_id, call.spot_id, ResolveResult.LOCAL, mesh=record.mesh,
                     generation=record.object_generation)
            attempt = rt.catalog.attempts.get(call.spot_id)
            if attempt is not None and call.spot_id not in rt.catalog.hosts:
                # This node's activation committed Ready, and this call read it, before
                # the activation resumed to register the Spot: admit it behind the first
                # message once that attempt has ended (never StaleRoute).
                await attempt.done.wait()
                continue
            sealed = _admit(rt, call, _local_host(rt, record))
            if sealed is None:
                return
            await sealed.finished.wait()  # idle eviction racing: refresh the route
            continue
        if record.state is AuthorityState.CLOSING:
            resolved(rt.node_id, call.spot_id, ResolveResult.CLOSING, mesh=record.mesh,
                     generation=record.object_generation)
        else:
            resolved(rt.node_id, call.spot_id, ResolveResult.CREATING, mesh=record.mesh,
                     generation=record.object_generation)
        if record.state is AuthorityState.CLOSING and call.intent is None:
            stale(rt.node_id, rt.metrics, StaleReason.CLOSING, call.spot_id,
                  generation=record.object_generation, mesh=record.mesh)
            raise StaleRoute(
                f"Spot {call.spot_id!r} is closing and admits no new messages; the "
                "message was not run. Send a new call once it is closed, or call with "
                ".instance_spot() to wait for it and activate it again"
            )
        await wait_for_change(rt, call.spot_id, backoff)
