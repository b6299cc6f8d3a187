"""The node's side of the mesh: who the peers are, links to them, replies by correlation.

Theory of operation
-------------------
:class:`Peers` is the runtime's :class:`~zlink_trio.transport.LinkHandler` and its
directory of the Mesh:

* **Directory.** A peer is a live descriptor claim in the Location Store.  The claims
  read last (``NodeState.placement_claims``, shared with placement) are reused for
  ``options.placement_max_age``; an owner fence the cached claims do not know --
  another lifecycle, an expired lease -- triggers one fresh read before it is
  refused.  An owner whose claim is gone or whose lease ran out is :class:`Unavailable`
  and nothing is sent (an expired owner admits no new message).  The Spot is
  *not* recreated elsewhere: its authority stays in the store until the owner's NodeId
  restarts (startup scan) or an operator releases it.
* **Admission of a peer.** :meth:`Peers.check_peer` accepts an authenticated link only
  from a node whose exact (NodeRid, lifecycle generation) holds a live claim in this
  node's Mesh: a restarted or zombie process with an older lifecycle is refused.  While
  the store cannot be read every link is refused; that is logged as one outage episode
  (``lowlevel.outage``), not once per refused link.
* **Correlations.** Every request this node sends (39 with a reply, 47, 48) gets a
  fresh correlation and a :class:`Pending` entry naming the link, the deadline and
  what to do with the reply.  The reply frame completes it exactly once; a link that
  closes first fails everything pending on it with :class:`Unavailable` ("may or may
  not have run": nothing is resent); :meth:`Peers.sweep` drops entries whose
  deadline passed (their callers already got DeadlineExceeded).

Deadlines travel as :class:`~zlink_trio.core.deadline.Deadline` values: the Trio-clock
time this node waits on and the wall-clock milliseconds the wire carries (docs/wire.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.descriptor import describe_owner
from zlink_trio.core.errors import Unavailable, ZLinkError
from zlink_trio.lowlevel.outage import Outage
from zlink_trio.runtime.declaration.message_classes import registry_classes
from zlink_trio.runtime.mesh.retained import RetainedResults
from zlink_trio.runtime.observe.logs import MESH as LOGGER
from zlink_trio.wire.frames import Reply, encode_owner

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.descriptor import NodeClaim
    from zlink_trio.core.identity import NodeRid
    from zlink_trio.core.records import OwnerFence
    from zlink_trio.core.route_cache import CachedRoute
    from zlink_trio.runtime.state import NodeState
    from zlink_trio.transport import Link, MeshTransport
    from zlink_trio.wire.frames import (
        NodeOperation,
        RelayDone,
        RelocateSpot,
        SpotMessage,
        UserSpotClose,
        UserSpotCreate,
    )
    from zlink_trio.wire.handshake import PeerIdentity

    InboundFrame = (SpotMessage | UserSpotCreate | UserSpotClose | RelocateSpot
                    | NodeOperation | RelayDone)

__all__ = ("Peers", "Pending")

#: Seconds between two sweeps of expired pending replies.
SWEEP_INTERVAL: Final = 1.0
_MAX_ID: Final = (1 << 64) - 1


@attrs.define(eq=False, slots=True)
class Pending:
    """One request this node sent and waits to be answered."""

    link: Link
    deadline: Deadline
    on_reply: Callable[[Reply], object]
    on_lost: Callable[[Unavailable], object]


class Peers:
    """Directory, links and pending replies of one node; see the module docstring."""

    def __init__(self, rt: NodeState, inbound: Callable[[Link, InboundFrame], None]) -> None:
        self._rt = rt
        self._inbound = inbound
        self.transport: MeshTransport | None = None
        self._pending: dict[int, Pending] = {}
        self._next_correlation = 1 + int.from_bytes(rt.random_bytes(4)) * 2
        #: Terminal results of recent 47/48 operations, for redeliveries.
        self.retained: Final = RetainedResults()
        #: Wire name -> class of every message class the registered Spot types name.
        self.known_classes: Final = registry_classes(rt.registry)
        #: The link a frame was last queued on, for the sender's :meth:`flush`.
        self._unflushed: Link | None = None
        #: Requests each link brought that are not answered yet (``mesh.link_reply.LinkReply``).
        self.serving: Final[dict[Link, int]] = {}
        #: A test's link refusal (``Node.inspection.refuse_links``): given another node's
        #: NodeId, why this node may not link with it now, or ``None``.
        self.refusal: Callable[[str], str | None] | None = None
        #: This node's lifecycle fence and its bytes (:meth:`own_fence_bytes`).
        self._own_fence: tuple[OwnerFence, bytes] | None = None
        #: The outage episodes of :meth:`check_peer`'s store reads.
        self._admission = Outage(LOGGER, f"the peer check of node {rt.node_id!r}",
                                 counted="refused links")

    def own_fence_bytes(self) -> bytes:
        """This node's lifecycle fence as command 39 carries it (``frames.encode_owner``)."""
        owner = self._rt.owner
        known = self._own_fence
        if known is None or known[0] is not owner:
            known = self._own_fence = (owner, encode_owner(owner))
        return known[1]

    # ------------------------------------------------------------------ directory

    async def _read_claims(self) -> list[NodeClaim]:
        rt = self._rt
        now = rt.now()
        claims = await rt.store.location.descriptors(now=now)
        rt.placement_claims = (now, claims)
        return claims

    def _cached_claim(self, owner: OwnerFence) -> NodeClaim | None:
        seen = self._rt.placement_claims
        max_age = self._rt.options.placement_max_age
        if seen is None or not 0 <= self._rt.now() - seen[0] < max_age:
            return None
        return _matching(seen[1], owner, self._rt.now())

    def claim_by_rid(self, node_rid: NodeRid) -> NodeClaim | None:
        """The claim of ``node_rid`` in the claims read last (placement just read them)."""
        seen = self._rt.placement_claims
        for claim in seen[1] if seen is not None else ():
            if claim.descriptor.node_rid == node_rid:
                return claim
        return None

    def placed_claim(self, node_rid: NodeRid, node_id: str | None, what: str,
                     outcome: str) -> NodeClaim:
        """The claim of the node placement just chose (``node_rid``, named ``node_id``) in
        the claims read last; :class:`Unavailable` saying it left the mesh while ``what``
        was being placed on it (``outcome``: what was not done) when it is gone."""
        claim = self.claim_by_rid(node_rid)
        if claim is None:
            name = "the chosen node" if node_id is None else f"node {node_id!r}"
            raise Unavailable(f"{name} left the mesh while {what} was being placed on it; "
                              f"{outcome}")
        return claim

    async def name_owner(self, owner: OwnerFence) -> str:
        """``owner`` as a message names it (``core.descriptor.describe_owner``): by the
        NodeId :meth:`node_id_of` finds."""
        return describe_owner(owner, await self.node_id_of(owner.node_rid))

    async def node_id_of(self, node_rid: NodeRid) -> str | None:
        """The NodeId of the lifecycle ``node_rid``, for messages: from the claims read last,
        else from the store's live and dead claims; ``None`` when no claim of it is left
        (or the store could not say: naming a node never fails the caller)."""
        claim = self.claim_by_rid(node_rid)
        if claim is not None:
            return claim.descriptor.node_id
        rt = self._rt
        try:
            now = rt.now()
            claims = [*await rt.store.location.descriptors(now=now),
                      *await rt.store.location.dead_claims(now=now)]
        except ZLinkError as exc:
            LOGGER.debug("node %r: no NodeId for rid %s (%s)", rt.node_id, node_rid, exc.message)
            return None
        return next((c.descriptor.node_id for c in claims
                     if c.descriptor.node_rid == node_rid), None)

    async def claim_of(self, owner: OwnerFence, what: str) -> NodeClaim:
        """The live claim of ``owner``'s lifecycle; :class:`Unavailable` if there is none."""
        claim = self._cached_claim(owner)
        if claim is None:
            claim = _matching(await self._read_claims(), owner, self._rt.now())
        if claim is None:
            node_id = await self.node_id_of(owner.node_rid)
            then = ("it becomes usable again when that node restarts, or after an operator "
                    f"releases what it owned (zlink-trio release --store URL --node {node_id})"
                    if node_id is not None else
                    "an operator frees it with zlink-trio release (zlink-trio inspect --store "
                    "URL SPOT_ID prints the command)")
            raise Unavailable(
                f"{what} is owned by {describe_owner(owner, node_id)}, which is not live: its "
                f"lease expired or it left. The Spot is not recreated elsewhere; {then}"
            )
        return claim

    async def link_to(self, claim: NodeClaim) -> Link:
        """An authenticated link to the node of ``claim`` (opened on first use)."""
        if self.refusal is not None and (why := self.refusal(claim.descriptor.node_id)):
            raise Unavailable(why)
        if self.transport is None:
            raise Unavailable(
                f"node {claim.descriptor.node_id!r} is another node, but this node was "
                "opened with listen=None, so it has no mesh links; open it with a listen "
                "address (the default) to reach other nodes"
            )
        descriptor = claim.descriptor
        return await self.transport.link_to(descriptor.node_rid, descriptor.node_id,
                                            descriptor.endpoint)

    def open_link(self, route: CachedRoute) -> Link | None:
        """The open link to the owner a cached route names, if there is one now.

        The route cache already bounds the route by the owner's lease, so a
        live link to exactly that lifecycle needs no store read.
        """
        return None if route.owner is None else self.open_link_to(route.owner)

    def open_link_to(self, owner: OwnerFence) -> Link | None:
        """The open link to exactly the lifecycle ``owner``, if there is one now."""
        transport = self.transport
        if transport is None:
            return None
        link = transport.open_link(owner.node_rid)
        if link is None or link.peer.lifecycle_generation != owner.lifecycle_generation:
            return None
        return link

    async def link_to_owner(self, owner: OwnerFence, what: str) -> Link:
        """:meth:`claim_of` then :meth:`link_to`."""
        return await self.link_to(await self.claim_of(owner, what))

    def queued_on(self, link: Link) -> None:
        """A frame was just queued on ``link`` (see :meth:`flush`)."""
        self._unflushed = link

    @property
    def unflushed(self) -> bool:
        """Whether a frame was queued since the last :meth:`flush` (else it does nothing)."""
        return self._unflushed is not None

    async def flush(self) -> None:
        """Write what was just queued from this task instead of the link's writer.

        A requester calls it right before waiting for its reply: it saves one task
        switch per request (``Link.flush`` bounds and shields the write). Only when
        this is the one request in flight: with others in flight (pipelined callers)
        the link's writer joins the frames their tasks queue in one scheduler pass into
        one socket write, which costs both nodes less than a write per request.
        """
        link, self._unflushed = self._unflushed, None
        if link is not None and len(self._pending) <= 1:
            await link.flush()

    # ------------------------------------------------------------------ correlations

    def expect_reply(self, link: Link, deadline: Deadline, on_reply: Callable[[Reply], object],
                     on_lost: Callable[[Unavailable], object]) -> int:
        """Register a request about to be sent on ``link``; returns its correlation."""
        correlation = self._next_correlation
        self._next_correlation = correlation + 1 if correlation < _MAX_ID else 1
        self._pending[correlation] = Pending(link, deadline, on_reply, on_lost)
        return correlation

    def forget(self, correlation: int) -> None:
        """Stop waiting for ``correlation`` (the send failed, or the caller gave up)."""
        self._pending.pop(correlation, None)

    @property
    def pending(self) -> int:
        """Requests sent and not answered yet."""
        return len(self._pending)

    async def sweep(self) -> None:
        """Forever: every second, drop pending entries whose deadline passed."""
        while True:
            await trio.sleep(SWEEP_INTERVAL)
            now = trio.current_time()
            for correlation in [c for c, p in self._pending.items() if p.deadline.at < now]:
                self._pending.pop(correlation, None)

    # ------------------------------------------------------------------ LinkHandler

    async def check_peer(self, peer: PeerIdentity) -> bool:
        """Admit a link only from a live claim of exactly that lifecycle in our Mesh."""
        rt = self._rt
        if self.refusal is not None and self.refusal(peer.node_id):
            return False
        if peer.mesh != rt.mesh:
            return False
        try:
            claims = await rt.store.location.descriptors(rt.mesh, now=rt.now())
        except ZLinkError as exc:
            self._admission.failed(f"the store could not be read ({exc}), so the link from "
                                   f"{peer.node_id!r} and every other link are refused")
            return False
        self._admission.recovered()
        for claim in claims:
            d = claim.descriptor
            if (d.node_rid == peer.node_rid and d.node_id == peer.node_id
                    and claim.lifecycle_generation == peer.lifecycle_generation
                    and claim.is_live(rt.now())):
                return True
        LOGGER.warning("node %r: refused a link from %r (lifecycle %d): no live claim "
                       "of that lifecycle in mesh %r", rt.node_id, peer.node_id,
                       peer.lifecycle_generation, rt.mesh)
        LOGGER.debug("node %r: the refused link's NodeRid is %s", rt.node_id, peer.node_rid)
        return False

    def frame_received(self, link: Link, frame: InboundFrame | Reply) -> None:
        """A Reply completes its pending request; anything else goes to the target side."""
        if isinstance(frame, Reply):
            pending = self._pending.pop(frame.correlation, None)
            if pending is None or pending.link is not link:
                if pending is not None:  # a reply on another link is not ours: keep waiting
                    self._pending[frame.correlation] = pending
                return  # late (the caller's deadline passed) or unknown: dropped
            pending.on_reply(frame)
            return
        self._inbound(link, frame)

    def link_closed(self, link: Link) -> None:
        """Fail every request pending on ``link``; they are not resent anywhere."""
        self.serving.pop(link, None)
        lost = [c for c, p in self._pending.items() if p.link is link]
        for correlation in lost:
            pending = self._pending.pop(correlation)
            pending.on_lost(Unavailable(
                f"the link to node {link.peer.node_id!r} closed before the reply arrived; "
                "the operation may or may not have run there and is not resent. Check the "
                "Spot's state before retrying"
            ))


def _matching(claims: list[NodeClaim], owner: OwnerFence, now: float) -> NodeClaim | None:
    for claim in claims:
        if (claim.descriptor.node_rid == owner.node_rid
                and claim.lifecycle_generation == owner.lifecycle_generation
                and claim.is_live(now)):
            return claim
    return None
