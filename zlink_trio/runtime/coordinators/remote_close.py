"""Closing a User Spot owned by another node: command 48 and its command 20.

Source (:func:`close_remote`): the close found the Spot Ready on another live node, so
it sends command 48 to that owner with the owner generation and StoreVersion it read,
and the owner's command 20 is the result -- never a Location read.

Target (:func:`serve_remote_close`): the frame's target lifecycle must be this one;
the authority is read from the store and checked against the frame's generation,
owner generation and StoreVersion before the Closing CAS, by the same local close as
``spots.close`` (:func:`~zlink_trio.runtime.coordinators.close_operation.close_here`).
The terminal outcome is retained per operation ID, so a redelivery gets the same
answer and never a second close.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from zlink_trio.core.errors import DeadlineExceeded
from zlink_trio.runtime.calls.deadlines import deadline_from_wall_ms
from zlink_trio.runtime.charts import CLOSE
from zlink_trio.runtime.coordinators.close_operation import SPOT_OR_ACTOR, close_here
from zlink_trio.runtime.mesh.remote_calls import operation_number, outcome_of, round_trip
from zlink_trio.wire.frames import CloseOutcome, UserSpotClose

if TYPE_CHECKING:
    from zlink_trio.core.deadline import Deadline
    from zlink_trio.core.records import AuthorityRecord, SpotRef
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.wire.frames import Outcome

__all__ = ("close_remote", "serve_remote_close")


async def close_remote(rt: NodeRuntime, ref: SpotRef, record: AuthorityRecord,
                       deadline: Deadline) -> bool:
    """Command 48 to the owner; its command 20 is the result (never a Location read)."""
    link = await rt.peers.link_to_owner(record.owner, f"Spot {ref.spot_id!r}")
    operation = operation_number(rt.new_uuid4())

    def frame(correlation: int) -> UserSpotClose:
        return UserSpotClose(
            correlation=correlation, operation_id=operation, source=rt.owner, ref=ref,
            target=record.owner, expected_owner_generation=record.owner_generation,
            expected_store_version=record.store_version, deadline_ms=deadline.wall_ms)

    what = f"closing Spot {ref.spot_id!r}"
    reply = await round_trip(rt, rt.peers, link, deadline, frame, what)
    return outcome_of(reply, CloseOutcome, what).closed


async def serve_remote_close(rt: NodeRuntime, frame: UserSpotClose) -> Outcome:
    """Run command 48 here: the terminal outcome, retained per operation ID.

    The frame's target lifecycle must be this one; the authority is read from the store
    and checked against the frame's generation, owner generation and StoreVersion before
    the Closing CAS. A redelivery of the same operation gets the retained outcome.
    """
    async def run() -> Outcome:
        rt.check_admission()
        if frame.target != rt.owner:
            raise rt.not_addressed_here(f"the close of Spot {frame.ref.spot_id!r}",
                                        frame.target, "nothing was closed")
        deadline = deadline_from_wall_ms(frame.deadline_ms)
        expected = (frame.expected_owner_generation, frame.expected_store_version)
        with trio.move_on_at(deadline.at):
            return CloseOutcome(
                closed=await close_here(rt, frame.ref, CLOSE.initial, deadline,
                                        expected=expected, kinds=SPOT_OR_ACTOR))
        raise DeadlineExceeded(f"closing Spot {frame.ref.spot_id!r} did not finish before "
                               "its deadline; if it began, it still completes")

    return await rt.peers.retained.run_once(
        frame.source, frame.operation_id, f"the close of Spot {frame.ref.spot_id!r}", run)
