"""``NodeInspection``: what a test kit, a benchmark or a tool may see and do inside a node.

Theory of operation
-------------------
An application needs only ``node.client``, ``node.spots`` and ``node.statistics()``.
Tools that check the runtime itself need more: which incarnations a node hosts and in
which state (the race models' "one Ready authority" invariant), one idle sweep's cost
(the growth benchmark), and a few ways to make a node fail as a real process fails (the
test kit's fault hooks). ``node.inspection`` is that surface, and the only one: the test
kit (``zlink_trio.testing``) and the benchmark (``zlink_trio.bench``) use it and never the
runtime behind a :class:`~zlink_trio.Node`.

Reads (no side effect): :meth:`~NodeInspection.hosted_spot`,
:meth:`~NodeInspection.spot_context`,
:meth:`~NodeInspection.hosted_spots`, :meth:`~NodeInspection.linked_nodes`,
:meth:`~NodeInspection.unsent_bytes`, :meth:`~NodeInspection.idle_candidates`.

:data:`IN_REMINDER_TASK` (a context variable) is true in a node's reminder task and the
deliveries it starts, so a tool that counts store calls can leave that background work
out (the benchmark's ``count_store_calls``).

Test hooks (they change how the node behaves, for the rest of its lifecycle):
:meth:`~NodeInspection.wrap_store` (every later store call goes through the wrapper),
:meth:`~NodeInspection.refuse_links` (links with the nodes it names are refused both
ways), :meth:`~NodeInspection.close_links`, and :meth:`~NodeInspection.lose_lease` with
:meth:`~NodeInspection.wait_lease_lost` (the node behaves as if its lease ran out now).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, final

from zlink_trio.runtime.coordinators.lease import finish_lease_loss, mark_lease_lost
from zlink_trio.runtime.coordinators.reminders import IN_REMINDER_TASK
from zlink_trio.runtime.incarnation.context import SpotContext
from zlink_trio.runtime.results import HostedSpot

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.store import Store

__all__ = ("IN_REMINDER_TASK", "NodeInspection")


@final
class NodeInspection:
    """The inside of one running node, for tests, benchmarks and tools (``node.inspection``).

    Not constructed directly. Every method is synchronous and returns at once unless it
    is ``async``; none of them touches the store.
    """

    __slots__ = ("_rt",)

    def __init__(self, rt: NodeRuntime) -> None:
        self._rt = rt

    # ------------------------------------------------------------------ reads

    def hosted_spot(self, spot_id: str) -> HostedSpot | None:
        """The incarnation of ``spot_id`` this node hosts now (any state), or ``None``."""
        host = self._rt.catalog.hosts.get(spot_id)
        if host is None:
            return None
        return HostedSpot(spot_id=spot_id, generation=host.generation, state=host.state)

    def spot_context(self, spot_id: str) -> SpotContext | None:
        """A ``ctx`` of the incarnation of ``spot_id`` this node hosts now (any state), or
        ``None``: what the race model sets reminders through, as the Spot's own code
        would. A context is a face of its incarnation, holding nothing else: this one
        acts exactly as the one the instance was given."""
        host = self._rt.catalog.hosts.get(spot_id)
        return None if host is None else SpotContext(host)

    def hosted_spots(self) -> list[HostedSpot]:
        """Every incarnation this node hosts now, in no particular order."""
        return [HostedSpot(spot_id=spot_id, generation=host.generation, state=host.state)
                for spot_id, host in self._rt.catalog.hosts.items()]

    def linked_nodes(self) -> list[str]:
        """The NodeIds of the nodes this node has an open link with (either direction)."""
        transport = self._rt.peers.transport
        return [] if transport is None else [link.peer.node_id for link in transport.links()]

    def unsent_bytes(self, to: str) -> int:
        """The bytes queued on this node's open links with node ``to`` and not written yet
        (a relay's flow control keeps them near 1 MiB however much it has to send)."""
        transport = self._rt.peers.transport
        return 0 if transport is None else sum(
            link.queued_bytes for link in transport.links() if link.peer.node_id == to)

    def idle_candidates(self) -> list[str]:
        """One idle sweep's examination, without its store calls: the Spot IDs among the
        next 64 Instance Spots that have been idle past ``instance_idle_timeout``.

        It advances the sweep's position as a sweep does; nothing is evicted.
        """
        return [host.spot_id for host in self._rt.catalog.idle_candidates()]

    # ------------------------------------------------------------------ test hooks

    def wrap_store(self, wrap: Callable[[Store], Store]) -> None:
        """Test hook: from now on this node's store calls go to ``wrap(store)``."""
        rt = self._rt
        rt.store = wrap(rt.store)

    def refuse_links(self, refusal: Callable[[str], str | None] | None) -> None:
        """Test hook: ``refusal(node_id)`` returns why this node may not link with node
        ``node_id`` now, or ``None``. A call that would dial such a node raises
        :class:`~zlink_trio.Unavailable` with that reason, and a link it dials in is
        refused. ``None`` removes the hook; open links stay open (:meth:`close_links`).
        """
        self._rt.peers.refusal = refusal

    async def close_links(self, to: str | None = None) -> None:
        """Test hook: close this node's open links -- only those with node ``to`` when
        given. Calls waiting on them end as on a broken link; the next call dials anew."""
        transport = self._rt.peers.transport
        if transport is None:
            return
        for link in transport.links():
            if to is None or link.peer.node_id == to:
                await link.aclose()

    def lose_lease(self, why: str) -> bool:
        """Test hook: the node behaves as if its lease ran out now -- admission stops and
        every local Spot begins to stop with ``on_close(OWNERSHIP_LOST)``, without
        touching the store; ``why`` is logged and named by the errors calls get. False
        when the lease was already lost or the lifecycle is over. Then await
        :meth:`wait_lease_lost`."""
        return mark_lease_lost(self._rt, why)

    async def wait_lease_lost(self) -> None:
        """After :meth:`lose_lease`: wait (up to ``default_timeout``) for the local Spots
        to stop; the node's lifecycle has then stopped and its ``async with`` may end."""
        await finish_lease_loss(self._rt)
