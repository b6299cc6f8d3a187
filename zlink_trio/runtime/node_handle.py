"""``Node``: what ``open_node`` yields -- identity, the client and manager, moves, figures.

Theory of operation
-------------------
A :class:`Node` is a thin handle over one lifecycle's :class:`NodeRuntime`: its
identity (NodeId, NodeRid, Entry Spot ID, Mesh), ``client`` and ``spots`` (the call and
lifecycle APIs), planned moves (``relocate``, ``drain`` here, and ``ask_relocate`` /
``ask_drain`` through another node, wire command 61), a :class:`NodeStatistics`
snapshot, and ``inspection`` (:mod:`.inspection`: what tests and tools see inside).
``open_node`` (``runtime.node``) builds it once the node serves; every method
checks the node is still usable first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.core.identity import (
    NodeRid,
    validate_node_id,
    validate_spot_id,
)
from zlink_trio.runtime.actors.manager import ActorManager
from zlink_trio.runtime.calls.client import SpotClient
from zlink_trio.runtime.calls.deadlines import deadline_after
from zlink_trio.runtime.calls.metered import MeteredRouter
from zlink_trio.runtime.calls.traced import TracedRouter
from zlink_trio.runtime.coordinators.call_router import CallRouter
from zlink_trio.runtime.coordinators.manager import SpotManager
from zlink_trio.runtime.coordinators.relocation import relocate_spot
from zlink_trio.runtime.coordinators.remote_operation import (
    drain_here,
    drain_node,
    relocate_on_owner,
)
from zlink_trio.runtime.inspection import NodeInspection
from zlink_trio.runtime.observe.tracing import OtelTracing
from zlink_trio.runtime.options import check_timeout
from zlink_trio.runtime.results import NodeStatistics

if TYPE_CHECKING:
    from zlink_trio.runtime.calls.delivery import Router
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.results import DrainResult, RelocationResult

__all__ = ("Node",)


class Node:
    """A running node: what ``open_node`` yields. Not constructed directly."""

    def __init__(self, rt: NodeRuntime, metrics_url: str | None = None) -> None:
        self._rt = rt
        self._metrics_url = metrics_url
        self._router = router = CallRouter(rt)
        routed: Router = (router if not rt.metrics.enabled
                          else MeteredRouter(rt.metrics, router))
        tracing = rt.tracing
        if isinstance(tracing, OtelTracing):
            routed = TracedRouter(tracing, routed, rt.mesh)
        self._client = SpotClient(routed)
        self._spots = SpotManager(rt)
        self._actors = ActorManager(rt)
        self._inspection = NodeInspection(rt)
        rt.client = self._client
        rt.actors = self._actors

    def pass_test_hooks(self, rt: NodeRuntime) -> None:
        """Give the next lifecycle ``rt`` the link refusal a test hook installed on this
        one (``NodeInspection.refuse_links``), before it starts."""
        rt.peers.refusal = self._rt.peers.refusal

    def bind(self, rt: NodeRuntime) -> None:
        """Act on lifecycle ``rt`` from now on: the node rejoined the Mesh after losing its
        lease (``open_node`` calls this). ``client``, ``spots``, ``actors`` and ``inspection`` stay
        the same objects, so references an application keeps go on working."""
        self._rt = rt
        self._router.bind(rt)
        self._spots._rt = rt
        self._actors._rt = rt
        self._inspection._rt = rt
        rt.client = self._client
        rt.actors = self._actors

    @property
    def node_id(self) -> str:
        """The operator-given NodeId."""
        return self._rt.node_id

    @property
    def node_rid(self) -> NodeRid:
        """This lifecycle's fresh routing ID."""
        return self._rt.node_rid

    @property
    def entry_spot_id(self) -> str:
        """The framework-issued Entry Spot ID ``<node_id>-entry-<uuid4>``."""
        return self._rt.entry_spot_id

    @property
    def mesh(self) -> str:
        """The Mesh this node serves."""
        return self._rt.mesh

    @property
    def metrics_url(self) -> str | None:
        """``http://host:port/metrics`` when opened with ``metrics_port=``, else ``None``."""
        return self._metrics_url

    @property
    def inspection(self) -> NodeInspection:
        """The inside of this node for tests, benchmarks and tools: the Spots it hosts,
        its links, and test hooks that make it fail (``NodeInspection``)."""
        return self._inspection

    @property
    def client(self) -> SpotClient:
        """Direct calls to Spots by ID."""
        return self._client

    @property
    def spots(self) -> SpotManager:
        """Explicit User Spot create, find and close."""
        return self._spots

    @property
    def actors(self) -> ActorManager:
        """Actors (docs/actors.md): create, join, leave, close, find, list members."""
        return self._actors

    async def relocate(self, spot_id: str, *, to: str | None = None,
                       timeout: float | None = None,  # noqa: ASYNC109 -- travels to the target
                       ) -> RelocationResult:
        """Move Spot ``spot_id``, which this node owns, to node ``to`` (a NodeId of this Mesh)
        or, without ``to``, to another node placement picks (docs/relocation.md).

        Returns a :class:`RelocationResult`: COMMITTED (``ref`` names the new owner: same
        Spot ID and ObjectGeneration), ABORTED (the Spot stayed and serves here; ``reason``
        says why) or REFUSED (nothing changed: an Entry Spot, a ``DisableRelocation``
        type, a Spot already moving, no other node able to take it). Raises
        :class:`NotFound` for an unknown ID, :class:`InvalidOperation` for a Spot this node
        does not own or a bad argument, and :class:`Unavailable` when the move passed
        relay-ready but its target did not commit (the Spot is unavailable until it
        does or restarts). ``timeout`` (default ``default_timeout``) bounds the move.
        """
        spot_id = validate_spot_id(spot_id)
        if to is not None:
            to = validate_node_id(to)
        seconds = self._rt.options.default_timeout if timeout is None else check_timeout(timeout)
        return await relocate_spot(self._rt, spot_id, to, deadline_after(seconds))

    async def drain(self, *, timeout: float | None = None,  # noqa: ASYNC109 -- as relocate
                    ) -> DrainResult:
        """Relocate every Spot this node hosts (for maintenance); what moved and what not.

        This node stops choosing itself for new Spots first, and marks its claim in
        the store so the other nodes stop placing new Spots on it too (a store error
        is logged and the drain goes on). Spots that cannot move
        (``DisableRelocation``, no other node) are listed in ``not_moved`` with the
        reason; the Entry Spot never moves and is not listed. ``timeout`` (default
        ``default_timeout``) bounds the whole drain.
        """
        seconds = self._rt.options.default_timeout if timeout is None else check_timeout(timeout)
        return await drain_here(self._rt, deadline_after(seconds))

    async def ask_relocate(self, spot_id: str, *, to: str | None = None,
                           timeout: float | None = None,  # noqa: ASYNC109 -- as relocate
                           ) -> RelocationResult:
        """Have the node that owns ``spot_id`` relocate it, as ``relocate`` there would.

        For an operator or an API edge (a ``client_only`` node): this node need not own
        the Spot. When it does, this is :meth:`relocate`; otherwise the owner's live
        lifecycle is asked over its link (command 61) and runs the move. Same result and
        errors as :meth:`relocate` -- plus :class:`Unavailable` when the owner is not
        live or its link fails, and :class:`DeadlineExceeded` when no answer came in time
        (the move may then have happened: check with ``spots.find``).
        """
        spot_id = validate_spot_id(spot_id)
        if to is not None:
            to = validate_node_id(to)
        seconds = self._rt.options.default_timeout if timeout is None else check_timeout(timeout)
        return await relocate_on_owner(self._rt, spot_id, to, deadline_after(seconds))

    async def ask_drain(self, node_id: str, *,
                        timeout: float | None = None,  # noqa: ASYNC109 -- as drain
                        ) -> DrainResult:
        """Have the live node ``node_id`` of this Mesh drain, as ``drain`` there would.

        ``node_id`` may be this node's own (then it is :meth:`drain`). The drained node
        keeps running, takes no new Spots and relocates every Spot it hosts; stop it
        afterwards for maintenance. Raises :class:`NotFound` when no live node has that
        NodeId in this Mesh, :class:`Unavailable` when its link fails and
        :class:`DeadlineExceeded` when it did not answer in time (what it moved stays
        moved). A report too long for one answer lists the first results and counts the
        rest in ``DrainResult.unlisted``.
        """
        node_id = validate_node_id(node_id)
        seconds = self._rt.options.default_timeout if timeout is None else check_timeout(timeout)
        return await drain_node(self._rt, node_id, deadline_after(seconds))

    def statistics(self) -> NodeStatistics:
        """A frozen snapshot of the node's state and counters."""
        rt = self._rt
        transport = rt.peers.transport
        return NodeStatistics(node_id=rt.node_id, node_rid=rt.node_rid, state=rt.state,
                              active_spots=len(rt.catalog.hosts), activating=rt.catalog.pending,
                              lease_expires_at=rt.lease_expires_at,
                              route_cache=rt.route_cache.statistics(),
                              endpoint=rt.options.endpoint,
                              links=len(transport.links()) if transport is not None else 0,
                              pending_replies=rt.peers.pending,
                              rejoining=rt.lease_lost and rt.on_lease_lost == "rejoin")

    async def undrain(self, *, timeout: float | None = None,  # noqa: ASYNC109 -- as drain
                      ) -> None:
        """Undo :meth:`drain`: this node takes new Spots again, from every node.

        The draining mark on this node's claim in the store is cleared first, then the
        node chooses itself again for new Spots; the other nodes do at their next read
        of the claims (within about a second). The Spots the drain moved away stay
        where they are; it is idempotent (a node that never drained is left as it is).
        Raises :class:`Unavailable` when the node is stopping, lost its lease or its claim
        is gone, the store's error when the store cannot clear the mark (nothing
        changed), and :class:`DeadlineExceeded` when ``timeout`` (default
        ``default_timeout``) ran out first: undrain again.
        """
        from zlink_trio.runtime.coordinators.placement import open_placement

        self._rt.check_usable()
        seconds = self._rt.options.default_timeout if timeout is None else check_timeout(timeout)
        await open_placement(self._rt, deadline_after(seconds))

    async def ask_undrain(self, node_id: str, *,
                          timeout: float | None = None,  # noqa: ASYNC109 -- as drain
                          ) -> None:
        """Have the live node ``node_id`` of this Mesh undrain, as ``undrain`` there would.

        ``node_id`` may be this node's own (then it is :meth:`undrain`); another node is
        asked over its link (command 61). Same errors as :meth:`undrain`, plus
        :class:`NotFound` when no live node has that NodeId in this Mesh and
        :class:`Unavailable` when its link fails.
        """
        from zlink_trio.runtime.coordinators.remote_operation import undrain_node

        node_id = validate_node_id(node_id)
        seconds = self._rt.options.default_timeout if timeout is None else check_timeout(timeout)
        await undrain_node(self._rt, node_id, deadline_after(seconds))
