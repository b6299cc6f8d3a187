"""The durable first record of a cold activation and its cleanup (its chart's step 12).

Theory of operation
-------------------
A cold activation stores its envelope as an immutable recovery root, names it in the
authority as the recovery pointer and appends it to the activation inbox as seq 1
(:mod:`~zlink_trio.runtime.coordinators.activation`).  The host runs that record
before any other message; after its handler completed, :func:`record_first_completion`
moves the inbox cursor to it, removes the recovery pointer by expected-version CAS
(re-reading once if a close changed the record since Ready) and deletes the root --
one call of ``store.combined``, then of its separate steps (which re-read) if that
refused with StaleFence (on a store whose transactions never suspend,
``store.combined_protocol.ImmediateTransactions``, the combined call is one of those:
a first record's turn on ``memory://`` then ends without suspending) -- stepping the
``ColdActivation`` chart through ``first_completion_recorded``, ``pointer_removed``
and ``root_deleted``.  Each step is idempotent, so a retry after a crash is safe; a
failure is logged and leaves the rest to recovery.

When the incarnation closes, :func:`drop_recovery` drops its inbox and -- if the first
record's cleanup did not get that far -- the root, after the authority is released.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from zlink_trio.core.errors import StaleFence, ZLinkError
from zlink_trio.runtime.charts import COLD, TRACE, step
from zlink_trio.runtime.observe.logs import ACTIVATION as LOGGER
from zlink_trio.store import SeparateSteps
from zlink_trio.store.combined_protocol import immediate_of

if TYPE_CHECKING:
    from statecharts.names import ColdActivationState
    from zlink_trio.core.records import RootReceipt
    from zlink_trio.runtime.state import NodeState

__all__ = ("FirstRecord", "drop_recovery", "record_first_completion")

#: The ColdActivation chart's final states: where the cleanup's steps end.
_FINAL: Final = COLD.table.finals


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
        """Whether the cleanup reached its end (the root is deleted): a final state."""
        return self.state in _FINAL


async def record_first_completion(rt: NodeState, spot_id: str, generation: int,
                                  first: FirstRecord) -> None:
    """Cursor, pointer CAS, then the root; idempotent on retry (cold activation step 12).

    One call of ``store.combined``; when it refuses because a close changed the record
    since Ready (StaleFence), the separate steps run instead: they re-read the record.
    """
    store = rt.store
    try:
        try:
            await (immediate_of(store) or store.combined).finish_first_record(
                spot_id, generation, seq=first.seq, expected_version=first.ready_version,
                root=first.receipt)
        except StaleFence:  # the record changed since Ready: the separate steps re-read
            await SeparateSteps(store.location, store.relocation).finish_first_record(
                spot_id, generation, seq=first.seq, expected_version=first.ready_version,
                root=first.receipt)
    except ZLinkError as exc:
        LOGGER.warning("Spot %r: activation recovery cleanup failed: %s", spot_id, exc)
        return
    _recorded(first)


#: The cleanup's ColdActivation events, in order.
_CLEANUP: Final = (COLD.ev.first_completion_recorded, COLD.ev.pointer_removed,
                   COLD.ev.root_deleted)
#: Where :data:`_CLEANUP` ends, per start state (stepped once per start state).
_CLEANED: dict[ColdActivationState, ColdActivationState] = {}


def _recorded(first: FirstRecord) -> None:
    cleaned = None if TRACE else _CLEANED.get(first.state)  # (TRACE sees every step)
    if cleaned is None:
        start = state = first.state
        for event in _CLEANUP:
            state = step(COLD, state, event)
        cleaned = state
        if not TRACE:
            _CLEANED[start] = cleaned
    first.state = cleaned


async def drop_recovery(rt: NodeState, spot_id: str, generation: int,
                        first: FirstRecord | None) -> None:
    """At close, after Release: drop the inbox, and the root if it is still there."""
    await rt.store.relocation.inbox_drop(spot_id, generation)
    if first is not None and not first.done:
        await rt.store.relocation.delete_root(first.receipt)
