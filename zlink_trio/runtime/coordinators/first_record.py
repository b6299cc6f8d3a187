"""The durable first record of a cold activation and its cleanup (06 §4.1 step 12).

Theory of operation
-------------------
A cold activation stores its envelope as an immutable recovery root, names it in the
authority as the recovery pointer and appends it to the activation inbox as seq 1
(:mod:`._activation`).  The host runs that record before any other message; after its
handler completed, :func:`record_first_completion` moves the inbox cursor to it,
removes the recovery pointer by expected-version CAS (re-reading once if a close
changed the record since Ready) and deletes the root -- one combined transaction where
the store offers it (``store.combined``), the three steps otherwise -- stepping the
``ColdActivation`` chart through ``first_completion_recorded``, ``pointer_removed``
and ``root_deleted``.  Each step is idempotent, so a retry after a crash is safe; a
failure is logged and leaves the rest to recovery.

When the incarnation closes, :func:`drop_recovery` drops its inbox and -- if the first
record's cleanup did not get that far -- the root, after the authority is released.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from zlink_trio.core.errors import StaleFence, ZLinkError
from zlink_trio.runtime.charts import COLD, step
from zlink_trio.runtime.coordinators import crash_points
from zlink_trio.runtime.state import LOGGER
from zlink_trio.store._combined import combined_of

if TYPE_CHECKING:
    from statecharts.names import ColdActivationState
    from zlink_trio.core.records import RootReceipt
    from zlink_trio.runtime.state import NodeState

__all__ = ("FirstRecord", "drop_recovery", "record_first_completion")


@attrs.define(eq=False)
class FirstRecord:
    """The durable first record of a cold activation: inbox sequence and recovery root."""

    seq: int
    ready_version: int
    receipt: RootReceipt
    #: ColdActivation state id, stepped through the post-first-turn cleanup.
    state: ColdActivationState = COLD.st.serving_first_message

    @property
    def done(self) -> bool:
        """Whether the cleanup reached its end (the root is deleted)."""
        return self.state == COLD.st.activated


async def record_first_completion(rt: NodeState, spot_id: str, generation: int,
                                  first: FirstRecord) -> None:
    """Cursor, pointer CAS, then the root; idempotent on retry (06 §4.1 step 12).

    With ``store.combined`` the three are one transaction; when it refuses (a close
    changed the record since Ready: StaleFence) the separate steps run, re-reading.
    """
    relocation = rt.store.relocation
    combined = combined_of(rt.store)
    if combined is not None:
        try:
            await combined.finish_first_record(
                spot_id, generation, seq=first.seq, expected_version=first.ready_version,
                root=first.receipt)
        except StaleFence:
            pass  # the record changed since Ready: the separate steps re-read
        except ZLinkError as exc:
            LOGGER.warning("Spot %r: activation recovery cleanup failed: %s", spot_id, exc)
            return
        else:
            for event in (COLD.ev.first_completion_recorded, COLD.ev.pointer_removed,
                          COLD.ev.root_deleted):
                first.state = step(COLD, first.state, event)
            return
    try:
        await relocation.inbox_set_cursor(spot_id, generation, first.seq)
        first.state = step(COLD, first.state, COLD.ev.first_completion_recorded)
        if crash_points.ARMED:
            crash_points.point("cold", "after_completion_before_pointer_removed")
        await _remove_pointer(rt, spot_id, generation, first.ready_version)
        first.state = step(COLD, first.state, COLD.ev.pointer_removed)
        await relocation.delete_root(first.receipt)
        first.state = step(COLD, first.state, COLD.ev.root_deleted)
    except ZLinkError as exc:
        LOGGER.warning("Spot %r: activation recovery cleanup failed: %s", spot_id, exc)


async def drop_recovery(rt: NodeState, spot_id: str, generation: int,
                        first: FirstRecord | None) -> None:
    """At close, after Release: drop the inbox, and the root if it is still there."""
    await rt.store.relocation.inbox_drop(spot_id, generation)
    if first is not None and not first.done:
        await rt.store.relocation.delete_root(first.receipt)


async def _remove_pointer(rt: NodeState, spot_id: str, generation: int,
                          version: int) -> None:
    location = rt.store.location
    try:
        await location.remove_recovery_pointer(
            spot_id, object_generation=generation, expected_version=version)
    except StaleFence:
        # The record changed since Ready (a close began): re-read once and retry.
        record = await location.find(spot_id)
        if (record is not None and record.object_generation == generation
                and record.recovery_pointer is not None):
            await location.remove_recovery_pointer(
                spot_id, object_generation=generation,
                expected_version=record.store_version)
