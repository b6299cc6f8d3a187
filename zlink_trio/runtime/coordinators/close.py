"""``spots.close(ref)``: closing one User Spot incarnation here or at its owner.

:func:`close_user_spot` is the operation ``node.spots.close`` awaits: one deadline
around :func:`~zlink_trio.runtime.coordinators.close_operation.close_here`, which
verifies and closes the incarnation on this node, or -- when another live node owns
it -- hands it to :func:`~zlink_trio.runtime.coordinators.remote_close.close_remote`
(command 48).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import DeadlineExceeded, InvalidOperation
from zlink_trio.core.records import SpotRef
from zlink_trio.runtime.charts import CLOSE
from zlink_trio.runtime.coordinators.close_operation import close_here
from zlink_trio.runtime.coordinators.remote_close import close_remote
from zlink_trio.runtime.observe.fields import Operation
from zlink_trio.runtime.observe.operations import observe_operation

if TYPE_CHECKING:
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime

__all__ = ("close_user_spot",)


async def close_user_spot(rt: NodeRuntime, ref: SpotRef, deadline: Deadline) -> bool:
    """Close the incarnation ``ref`` names; see the module docstring."""
    if not isinstance(ref, SpotRef):
        raise InvalidOperation(
            f"close() takes the SpotRef of a User Spot (from create, get_or_create or find), "
            f"got {type(ref).__name__}"
        )
    state = CLOSE.initial
    with observe_operation(rt.node_id, rt.metrics, Operation.CLOSE, ref.spot_id,
                           ref.mesh, rt.tracing) as observed:
        observed.generation = ref.generation
        with trio.move_on_at(deadline.at):
            closed = await close_here(rt, ref, state, deadline, remote=close_remote)
            # This node's own route to the closed incarnation (the owner may be another
            # node) goes too: its next call resolves through the store -- NotFound -- and
            # a one-way send is not dropped at the old owner (issue #13 item 3).
            rt.route_cache.invalidate(ref.spot_id)
            observed.outcome = "closed" if closed else "not_closed"
            return closed
        raise DeadlineExceeded(
            f"closing Spot {ref.spot_id!r} generation {ref.generation} did not finish before "
            "its deadline; if it began, it still completes. Check with find()"
        )
