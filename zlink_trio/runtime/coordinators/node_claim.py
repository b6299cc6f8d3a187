"""NewClaim at startup: one live process per NodeId, a dead predecessor waited out.

Theory of operation
-------------------
The store refuses a NewClaim while a live claim of another NodeRid holds the same
NodeId (:class:`~zlink_trio.store.NodeIdInUse`, checked in the claim's own
transaction). Two situations meet that refusal and look alike at first:

- a **restart**: the previous process of this NodeId died (SIGKILL, crash) a moment
  ago, and its lease has not run out yet. Its claim is never renewed again;
- a **second process** started with a NodeId that a running process holds (a
  configuration error). That process renews its claim every third of its lease.

:func:`claim_node_id` tells them apart by watching the holder: it retries the claim
every :data:`POLL_FRACTION` of the lease until the holder's lease has expired (then
the claim succeeds: a restart) and raises the refusal as soon as the holder's lease
grows (a renewal: a live process) -- or when the wait would pass ``wait_limit``.
A restarted process therefore starts within one lease of its predecessor's death, and
a duplicate fails within about a third of a lease.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.runtime.observe.logs import LEASE as LOGGER
from zlink_trio.store.values import NodeIdInUse

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.core.descriptor import NodeClaim, NodeDescriptor
    from zlink_trio.store.protocol import LocationStore

__all__ = ("POLL_FRACTION", "claim_node_id")

#: The claim is retried every this fraction of the lease while a predecessor holds it.
POLL_FRACTION: Final = 0.1


def _renewed(first: NodeClaim, now: NodeClaim) -> bool:
    """Whether the holder seen now is not the dead predecessor first seen."""
    return (now.owner() != first.owner()
            or now.lease_expires_at > first.lease_expires_at)


async def claim_node_id(location: LocationStore, descriptor: NodeDescriptor, *,
                        lease: float, clock: Callable[[], float],
                        wait_limit: float) -> NodeClaim:
    """NewClaim for ``descriptor``, waiting out a dead predecessor's lease.

    Raises :class:`NodeIdInUse` when the holder of the NodeId renews its lease (or is
    replaced) while this waits, or when its lease would outlast ``wait_limit``
    seconds; any other NewClaim refusal propagates at once.
    """
    give_up = trio.current_time() + wait_limit
    first: NodeClaim | None = None
    while True:
        try:
            return await location.new_claim(descriptor, now=clock(), lease=lease)
        except NodeIdInUse as refusal:
            holder = refusal.holder
            if first is None:
                first = holder
                LOGGER.warning(
                    "node %r: NodeId still held by node %s lifecycle %d (lease %.3f s "
                    "left); waiting for it to expire (a restart after a crash) or to be "
                    "renewed (another live process: refused)", descriptor.node_id,
                    holder.descriptor.node_rid, holder.lifecycle_generation,
                    holder.lease_expires_at - clock())
            elif _renewed(first, holder):
                raise
            left = max(holder.lease_expires_at - clock(), 0.0)
            if trio.current_time() + left > give_up:
                raise
            await trio.sleep(min(left, lease * POLL_FRACTION) + 0.001)
