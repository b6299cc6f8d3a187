"""The state every part of a node's runtime reads: identity, options, store, caches, lease.

:class:`NodeState` is a plain holder built by ``open_node`` once the descriptor is
claimed.  Spot hosts, the catalog and the mesh (its directory and its senders, which
also get the ``Peers``) take it as their first argument; the coordinators take its
subclass :class:`~zlink_trio.runtime.coordinators.node_runtime.NodeRuntime`, which adds
the node's catalog and peers.  The split keeps the imports one-way: what a host, the
catalog or the mesh needs never names the coordinators that drive them.  It owns nothing that
needs closing: the store and the nursery belong to ``open_node``'s ``async with``.

Two clocks meet here.  Deadlines, idle times and timers read ``trio.current_time()``
(so tests run on ``MockClock``); the store's ``now`` (leases, route-cache expiry) reads
``clock``, which defaults to the same ``trio.current_time``.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any, Final, Protocol

import attrs
import trio

from zlink_trio.core.errors import InvalidOperation, StaleRoute, Unavailable
from zlink_trio.core.identity import new_uuid4
from zlink_trio.runtime.calls.deadlines import Deadlines
from zlink_trio.runtime.charts import MEMBERSHIP, NODE, step
from zlink_trio.runtime.observe.recorder import NO_METRICS
from zlink_trio.runtime.observe.tracing import NO_TRACING, Tracing

if TYPE_CHECKING:
    import random
    from collections.abc import Callable

    from statecharts.names import ActorMembershipState, NodeLifecycleState
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import ActorRef, OwnerFence, SpotRef
    from zlink_trio.core.route_cache import RouteCache
    from zlink_trio.runtime.calls.client import SpotClient
    from zlink_trio.runtime.declaration.registry import SpotTypeRegistry
    from zlink_trio.runtime.observe.recorder import Recorder
    from zlink_trio.runtime.options import NodeOptions
    from zlink_trio.store import Store
    from zlink_trio.wire.codec import MessageCodec

__all__ = ("LOGGER", "ActorOperations", "Membership", "NodeState")

#: The NodeLifecycle tags every public call asks about.
_ADMITS_WORK: Final = NODE.tags.admits_work
_CLOSED: Final = NODE.tags.closed

#: The package logger (``observe.logs.PACKAGE``): every runtime logger is its child.
LOGGER: Final = logging.getLogger("zlink_trio")


class ActorOperations(Protocol):
    """What ``ctx.actors`` offers (the node's ``ActorManager``, ``runtime.actors.manager``,
    docs/actors.md); a Protocol here because the manager lives above the Spot hosts."""

    def create(self, stable_type: str, actor_id: str | None = None) -> Any: ...
    async def join(self, ref: ActorRef, spot: SpotRef | str) -> ActorRef: ...
    async def leave(self, ref: ActorRef) -> ActorRef: ...
    async def close(self, ref: ActorRef) -> bool: ...
    async def find(self, actor_id: str) -> ActorRef | None: ...
    async def members(self, spot: SpotRef | str) -> list[ActorRef]: ...


@attrs.define(eq=False)
class Membership:
    """One Actor Ready on this node: its current ref and ActorMembership chart state.

    Stepped by ``actors.membership`` (create, join, leave) and, when the Actor leaves
    the catalog, by :meth:`NodeState.end_membership` (``close`` then ``released``, or
    ``lease_lost``).
    """

    ref: ActorRef
    state: ActorMembershipState = MEMBERSHIP.st.member
    #: Set once the Actor left the catalog: ``"released"``, ``"lost"`` or ``"moved"``.
    ended: str | None = None

    def finish(self) -> None:
        """Step the chart to its end the catalog saw (``ended``), once it allows it."""
        if self.ended == "lost":
            self.state = step(MEMBERSHIP, self.state, MEMBERSHIP.ev.lease_lost)
        elif self.ended == "moved":  # committed at the target: a member there now
            self.state = step(MEMBERSHIP, self.state,
                              MEMBERSHIP.ev.join_committed
                              if self.state == MEMBERSHIP.st.moving
                              else MEMBERSHIP.ev.commit_relocation)
        else:
            self.state = step(MEMBERSHIP, self.state, MEMBERSHIP.ev.close)
            self.state = step(MEMBERSHIP, self.state, MEMBERSHIP.ev.released)


@attrs.define(eq=False)
class NodeState:
    """What every part of one node's runtime reads (one per ``open_node``)."""

    node_id: str
    mesh: str
    node_rid: NodeRid
    entry_spot_id: str
    options: NodeOptions
    registry: SpotTypeRegistry
    store: Store
    codec: MessageCodec
    route_cache: RouteCache
    clock: Callable[[], float]
    rng: random.Random | None
    owner: OwnerFence
    lease_expires_at: float
    #: NodeLifecycle state id.
    state: NodeLifecycleState
    #: The node's SpotClient (``ctx.client``); set once the node's router exists.
    client: SpotClient = attrs.field(init=False)
    #: The deadlines of waiting requests (``calls.deadlines``; its task runs in the node).
    deadlines: Deadlines = attrs.field(factory=Deadlines, init=False)
    #: Why the lease was lost (``None`` while the node holds it).
    lease_loss: str | None = attrs.field(default=None, init=False)
    #: The lease was lost because the store had no claim of this lifecycle any more
    #: (removed, or the store lost its data): with ``on_lease_lost="raise"``, NodeLost
    #: waits one lease, until every lease the store granted before has run out.
    claim_vanished: bool = attrs.field(default=False, init=False)
    #: Set once the local teardown after a lost lease is complete (state ``stopped``).
    stopped: trio.Event = attrs.field(factory=trio.Event, init=False)
    #: What the node does once it lost its lease (``LifecycleOptions.on_lease_lost``).
    on_lease_lost: str = attrs.field(default="rejoin", init=False)
    #: ``node.drain`` ran: placement no longer chooses this node for new Spots.
    placement_closed: bool = attrs.field(default=False, init=False)
    #: The live descriptor claims placement last read and the store-clock time of that
    #: read (``coordinators.placement``); ``None`` until the first cold activation.
    placement_claims: tuple[float, list[NodeClaim]] | None = attrs.field(default=None,
                                                                          init=False)
    #: What the runtime reports to metrics (``observe.recorder``); records nothing
    #: unless ``open_node(metrics=...)`` set one.
    metrics: Recorder = attrs.field(default=NO_METRICS, init=False)
    #: The node's OpenTelemetry spans (``observe.tracing``); makes none unless
    #: ``open_node(tracing=...)`` or a global tracer provider says otherwise.
    tracing: Tracing = attrs.field(default=NO_TRACING, init=False)
    #: The node's Actor operations (``node.actors``, ``ctx.actors``); set with the router.
    actors: ActorOperations = attrs.field(init=False)
    #: The Trio run's clock (what ``trio.current_time`` reads, without its three calls),
    #: read once per node; :attr:`clock` itself when the store clock is the run's (a turn
    #: then reads the time once for both, ``runtime/incarnation/incarnation.py``).
    run_clock: Callable[[], float] = attrs.field(init=False)
    #: Container Spot ID -> ActorId -> ActorRef of its members Ready on this node: what
    #: ``ctx.members()`` lists; kept with :attr:`memberships`.
    members: dict[str, dict[str, ActorRef]] = attrs.field(factory=dict, init=False)
    #: ActorId -> the :class:`Membership` of an Actor Ready on this node.
    memberships: dict[str, Membership] = attrs.field(factory=dict, init=False)

    def __attrs_post_init__(self) -> None:
        run_clock = trio.lowlevel.current_clock().current_time
        self.run_clock = self.clock if self.clock == run_clock else run_clock

    def admit_member(self, membership: Membership) -> None:
        """An Actor is Ready here (its chart state ``member``), in ``membership.ref``'s
        container."""
        ref = membership.ref
        self.memberships[ref.actor_id] = membership
        self.members.setdefault(ref.container, {})[ref.actor_id] = ref

    def move_member(self, membership: Membership, ref: ActorRef) -> None:
        """The Actor's record names ``ref.container`` now (a committed join or leave)."""
        self._unlist(membership.ref)
        membership.ref = ref
        if self.memberships.get(ref.actor_id) is membership:
            self.members.setdefault(ref.container, {})[ref.actor_id] = ref

    def end_membership(self, actor_id: str, how: str) -> None:
        """The Actor left this node's catalog: ``"released"`` after a close, ``"lost"``
        with the lease (no store write), or ``"moved"`` to another node (which has its
        own membership now). Idempotent.

        A join or leave still awaiting its store step finishes the chart itself
        (``Membership.ended``): the chart has no close from the middle of a move.
        """
        membership = self.memberships.pop(actor_id, None)
        if membership is None:
            return
        self._unlist(membership.ref)
        membership.ended = how
        if how == "moved" or MEMBERSHIP.allows(membership.state, MEMBERSHIP.ev.close):
            membership.finish()

    def _unlist(self, ref: ActorRef) -> None:
        local = self.members.get(ref.container)
        if local is not None and local.get(ref.actor_id) is ref:
            del local[ref.actor_id]
            if not local:
                del self.members[ref.container]

    def now(self) -> float:
        """The store clock (leases, route-cache expiry)."""
        return self.clock()

    def random_bytes(self, n: int) -> bytes:
        """``n`` random bytes from the injected generator, else ``os.urandom``."""
        return os.urandom(n) if self.rng is None else self.rng.randbytes(n)

    def random(self) -> float:
        """A float in ``[0, 1)`` for placement."""
        return (self.rng.random() if self.rng is not None
                else int.from_bytes(os.urandom(7)) / float(1 << 56))

    def new_uuid4(self) -> str:
        """A fresh lowercase uuid4 (operation IDs, Create's Spot IDs)."""
        return new_uuid4(self.random_bytes)

    @property
    def serving(self) -> bool:
        """Whether the node admits new work (not draining, lease not lost)."""
        return self.state in NODE.tags.admits_work

    @property
    def lease_lost(self) -> bool:
        """Whether this lifecycle learned that its lease is gone (``lease_lost``/``stopped``)."""
        return self.state in NODE.tags.lease_lost

    def lease_lost_error(self) -> Unavailable:
        """The error of every call on a node that lost its lease."""
        if self.on_lease_lost == "rejoin":
            then = ("it rejoins the Mesh by itself as a new lifecycle as soon as the store "
                    "answers; retry then")
        else:
            then = ("open_node ends with NodeLost (on_lease_lost='raise'): start the node "
                    "again, and its new lifecycle releases what this one left")
        return Unavailable(
            f"node {self.node_id!r} lost its lease ({self.lease_loss or 'lease expired'}); it "
            f"no longer owns its Spots and runs no work: {then}"
        )

    def check_usable(self) -> None:
        """Unavailable if the node lost its lease, InvalidOperation once it is closed
        (every public call checks this first)."""
        if self.state in _ADMITS_WORK:
            return  # (the common case: neither lost nor closed)
        if self.lease_lost:
            raise self.lease_lost_error()
        if self.state in _CLOSED:
            raise InvalidOperation(
                f"node {self.node_id!r} is closed: its `async with zl.open_node(...)` block "
                "has ended, so it sends, creates and finds nothing. Use the node inside "
                "that block, or open it again"
            )

    def not_addressed_here(self, what: str, target: OwnerFence, outcome: str) -> StaleRoute:
        """The StaleRoute of a request ``what`` addressed to the lifecycle ``target``, which
        is not this one (``target != self.owner``); ``outcome`` says what was not done."""
        other = ("an earlier lifecycle" if target.node_rid == self.node_rid
                 else "another node lifecycle")
        return StaleRoute(
            f"{what} was addressed to {other} (lifecycle {target.lifecycle_generation}), "
            f"not to node {self.node_id!r}'s current lifecycle "
            f"({self.owner.lifecycle_generation}); {outcome}. The sender's view of the owner "
            "is stale: resolve again"
        )

    def check_admission(self, now: float | None = None) -> None:
        """Raise unless this lifecycle may admit work now: serving and the lease valid.

        ``now`` is the store clock (:meth:`now`) if the caller just read it.

        A node that learned its lease is gone raises Unavailable (it rejoins or ends);
        a draining node refuses new work (Unavailable). Owner validity: a node
        whose lease deadline passed (before the node noticed) is no longer a valid
        owner, so its messages end stale. One state test on the admitting path.
        """
        if self.state not in NODE.tags.admits_work:
            if self.lease_lost:
                raise self.lease_lost_error()
            if self.state == NODE.st.claimed:
                raise Unavailable(
                    f"node {self.node_id!r} is starting and admits no work yet; retry "
                    "shortly"
                )
            raise Unavailable(
                f"node {self.node_id!r} is shutting down and admits no new work; retry on "
                "another node or after it restarts"
            )
        if (self.clock() if now is None else now) >= self.lease_expires_at:
            raise StaleRoute(
                f"node {self.node_id!r} is no longer a valid owner (its lease expired at "
                f"{self.lease_expires_at}); the message was not run. Resolve again and send "
                "a new call if running it again is safe"
            )
