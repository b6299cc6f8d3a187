"""The startup authority scan: resume or abort what a dead lifecycle left.

Theory of operation
-------------------
``open_node`` runs :func:`recover_orphans` after NewClaim (which succeeds only once
every earlier lifecycle of this NodeId is over) and the start of the lease renewal,
and *before* it opens admission, so no application message reaches this
node until every orphan is handled. An orphan (``LocationStore.orphans``) is a
Creating record, or a Ready record that still has a recovery pointer, owned by an
expired lifecycle of this NodeId. They are read in pages of 1000 by Spot ID and each
is handled on its own (an error is logged and the scan goes on):

* **Creating with a recovery pointer** (a cold activation that died after Reserve):
  ``ColdActivation`` starts in ``recovering_reservation``.  The envelope records the
  operation's deadline in wall-clock milliseconds (:mod:`.envelope`), the same value
  in every process: past it, the creation is aborted with the dead lifecycle's fence
  (nobody waits for it any more); before it, it is resumed, and the factory runs
  under that deadline. ``adopt_orphan`` moves it
  to this lifecycle (same ObjectGeneration and reservation, owner generation + 1),
  the envelope is read back from the recovery root, then ``resume_creation`` and the
  normal path: factory + ``on_activate`` (they may run again for the same
  generation: a factory runs once per *attempt*), the first inbox record is
  appended unless ``inbox_read`` shows it is there, CommitReady, the host is
  registered, the first record goes to the head of its queue and the barrier opens.
  A factory failure aborts the creation with the adopted fence.
* **Creating without a pointer** (a User Spot create whose caller died with the
  process): AbortCreating with the dead lifecycle's own fence (no lease is needed)
  and the creation request root is deleted. Nobody is left to receive a reply, so
  the creation is not resumed; the SpotAuthority transition is ``abort_creating``.
* **Ready with a recovery pointer** (died after CommitReady, before the pointer was
  removed): ``recovering_ready``. Adopt, rebuild the instance (factory +
  ``on_activate``), register the host. If the inbox cursor shows the first record
  was completed, its handler is not run again: only the pointer CAS and the root
  deletion remain. Otherwise the first record is restored to the head of the queue
  and runs before any other message (admission is still closed). A rebuild failure
  closes the incarnation (BeginClose + Release with the adopted fence) and drops its
  inbox and root, logged as an error: the first message is then lost.
* A Spot type this node no longer registers: a Creating orphan is aborted with its
  dead fence (its first message is dropped, logged as an error); a Ready orphan is
  not adopted (the new descriptor does not serve the type) and is released below.

After the orphans, everything else the dead lifecycles of this NodeId still own --
steady Ready Spots, unfinished closes, moves that had not reached relay-ready, and the
moves past relay-ready toward a dead lifecycle of it (released, not resumed) -- is
released with its own fenced transaction, and their empty claims are deleted
(``store.dead_lifecycle``; the choice per kind is in docs/decisions.md): an Instance
Spot activates anew (a larger ObjectGeneration) on its next call, a User Spot is
``NotFound`` until created again. No other NodeId ever does this (no failover to another
node: a stalled owner looks exactly like a dead one); an operator does it for a NodeId
that never comes back with ``zlink-trio release --node``.

The original caller of the first message died with the process, so no reply is
sent; the first message's handler still runs once (twice only when the process died
between the handler's end and its completion record -- see docs/stores.md).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.deadline import MAX_WALL_MS, Deadline
from zlink_trio.core.errors import ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.records import AuthorityState
from zlink_trio.runtime.calls.deadlines import deadline_from_wall_ms
from zlink_trio.runtime.charts import COLD, step
from zlink_trio.runtime.coordinators.envelope import ActivationEnvelope
from zlink_trio.runtime.incarnation.first_record import FirstRecord, record_first_completion
from zlink_trio.runtime.incarnation.incarnation import Incarnation
from zlink_trio.runtime.incarnation.work import MessageWork
from zlink_trio.runtime.observe.logs import RECOVERY as LOGGER
from zlink_trio.store.dead_lifecycle import release_dead_node, reservation_fence

if TYPE_CHECKING:
    from statecharts.names import ColdActivationState
    from zlink_trio.core.records import AuthorityRecord, RootReceipt
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.declaration.spot_types import SpotType

__all__ = ("recover_orphans",)

_PAGE = 1000
#: The deadline of a first message whose envelope recorded none.
NO_DEADLINE: Final = Deadline(math.inf, MAX_WALL_MS)


async def recover_orphans(rt: NodeRuntime) -> int:
    """Handle every orphan of this NodeId's dead lifecycles; return how many were seen.

    Then release what those lifecycles still own (steady Ready Spots, unfinished
    closes and moves) and delete their empty claims: ``store.dead_lifecycle``. The
    NodeId's claim is this lifecycle's alone by now (NewClaim refuses a NodeId with a
    live claim), so every earlier lifecycle is over.
    """
    seen = 0
    after: str | None = None
    while True:
        page = await rt.store.location.orphans(rt.node_id, now=rt.now(), after=after,
                                               limit=_PAGE)
        for record in page:
            seen += 1
            try:
                await _recover_one(rt, record)
            except ZLinkError as exc:
                LOGGER.error("node %r: recovery of Spot %r (generation %d) failed: %s; an "
                             "operator may have to clean it up", rt.node_id, record.spot_id,
                             record.object_generation, exc)
        if len(page) < _PAGE:
            break
        after = page[-1].spot_id
    if seen:
        LOGGER.info("node %r: startup authority scan handled %d orphan(s)", rt.node_id, seen)
    await _release_dead(rt)
    return seen


async def _release_dead(rt: NodeRuntime) -> None:
    """Release what dead lifecycles of this NodeId still own (docs/decisions.md)."""
    done = await release_dead_node(rt.store, rt.node_id, now=rt.now)
    for record in done.released:
        LOGGER.info("node %r: released Spot %r (%s, generation %d, %s) left by lifecycle %d; "
                    "its state died with that process", rt.node_id, record.spot_id,
                    record.kind.name, record.object_generation, record.state.value,
                    record.owner.lifecycle_generation)
    for record, why in done.left:
        LOGGER.error("node %r: Spot %r (generation %d) of a dead lifecycle was not "
                     "released: %s; an operator may have to end it", rt.node_id,
                     record.spot_id, record.object_generation, why)
    if done.released:
        LOGGER.warning("node %r: released %d Spot(s) a dead lifecycle of this NodeId owned "
                       "(Instance Spots activate anew on their next call, User Spots must be "
                       "created again)", rt.node_id, len(done.released))


async def _recover_one(rt: NodeRuntime, record: AuthorityRecord) -> None:
    spot_type = rt.registry.get(record.stable_type)
    served = spot_type is not None and spot_type.kind is record.kind
    if record.state is AuthorityState.CREATING:
        if record.recovery_pointer is None or record.kind is not SpotKind.INSTANCE:
            await _abort_user_create(rt, record)
        elif not served:
            LOGGER.error("node %r: Spot %r was being activated as %r, which this node no "
                         "longer serves; its creation is aborted and its first message "
                         "dropped", rt.node_id, record.spot_id, record.stable_type)
            await _abort_dead(rt, record)
        else:
            assert spot_type is not None
            await _resume_creation(rt, record, spot_type)
    elif not served:
        LOGGER.error("node %r: Spot %r is Ready as %r, which this node no longer serves, "
                     "with its first message unfinished; left for an operator's release",
                     rt.node_id, record.spot_id, record.stable_type)
    else:
        assert spot_type is not None
        await _resume_ready(rt, record, spot_type)


async def _abort_user_create(rt: NodeRuntime, record: AuthorityRecord) -> None:
    """A creation whose caller died with the process: abort with its own fence."""
    await rt.store.location.abort_creating(reservation_fence(record))
    if record.creation_intent is not None:
        await rt.store.relocation.delete_root(record.creation_intent.receipt())
    LOGGER.warning("node %r: aborted the unfinished creation of Spot %r (generation %d) "
                   "left by a previous lifecycle", rt.node_id, record.spot_id,
                   record.object_generation)


async def _abort_dead(rt: NodeRuntime, record: AuthorityRecord) -> None:
    """Abort a cold activation this node will not resume (dead fence, no lease needed)."""
    state = step(COLD, COLD.st.recovering_reservation, COLD.ev.abort_creating)
    await rt.store.location.abort_creating(reservation_fence(record))
    await _drop(rt, record)
    assert COLD.is_final(state), state


async def _drop(rt: NodeRuntime, record: AuthorityRecord) -> None:
    await rt.store.relocation.inbox_drop(record.spot_id, record.object_generation)
    if record.recovery_pointer is not None:
        await rt.store.relocation.delete_root(record.recovery_pointer.receipt())


async def _adopt(rt: NodeRuntime, record: AuthorityRecord) -> AuthorityRecord:
    return await rt.store.location.adopt_orphan(
        record.spot_id, object_generation=record.object_generation,
        owner_generation=record.owner_generation, old_owner=record.owner, new_owner=rt.owner,
        now=rt.now())


@attrs.frozen
class _FirstMessage:
    """A recovery root read back: its bytes, the first message, its handler and deadline."""

    data: bytes
    msg: object
    info: HandlerInfo
    #: The deadline recorded with it, on this process's clock (``NO_DEADLINE`` if none).
    deadline: Deadline


async def _first_message(rt: NodeRuntime, receipt: RootReceipt,
                         spot_type: SpotType) -> _FirstMessage:
    """The recovery root's envelope, decoded with the handler that takes its message."""
    data = await rt.store.relocation.get_root(receipt)
    envelope = ActivationEnvelope.decode(data)
    encoded = envelope.message
    info = spot_type.handlers.find_wire(encoded.type_name)
    deadline = (NO_DEADLINE if envelope.deadline_ms is None
                else deadline_from_wall_ms(envelope.deadline_ms))
    return _FirstMessage(data, rt.codec.decode(encoded.type_name, encoded.body,
                                               info.message_type), info, deadline)


async def _first_seq(rt: NodeRuntime, record: AuthorityRecord, envelope: bytes) -> int:
    """The first inbox record's sequence, appending it unless it is already there."""
    relocation = rt.store.relocation
    found = await relocation.inbox_read(record.spot_id, record.object_generation, limit=1)
    if found:
        return found[0].seq
    return await relocation.inbox_append(record.spot_id, record.object_generation, envelope)


async def _resume_creation(rt: NodeRuntime, orphan: AuthorityRecord,
                           spot_type: SpotType) -> None:
    """Creating + pointer: same reservation and generation, factory again, commit."""
    state = COLD.st.recovering_reservation
    pointer = orphan.recovery_pointer
    assert pointer is not None
    receipt = pointer.receipt()
    try:
        first = await _first_message(rt, receipt, spot_type)
    except ZLinkError as exc:
        LOGGER.error("node %r: the activation envelope of Spot %r cannot be read (%s); "
                     "its creation is aborted", rt.node_id, orphan.spot_id, exc)
        await _abort_dead(rt, orphan)
        return
    if first.deadline.passed(trio.current_time()):
        # A restarted node continues an activation or aborts its creation with the
        # same fence: abort here, since the call that asked for this Spot gave up at
        # its deadline, which every process reads the same way (wall-clock
        # milliseconds in the envelope).
        LOGGER.warning("node %r: the cold activation of Spot %r (generation %d) left by a "
                       "previous lifecycle is past its deadline; its creation is aborted",
                       rt.node_id, orphan.spot_id, orphan.object_generation)
        await _abort_dead(rt, orphan)
        return
    adopted = await _adopt(rt, orphan)
    fence = reservation_fence(adopted)
    state = step(COLD, state, COLD.ev.resume_creation)
    host = Incarnation(rt, spot_type, adopted.spot_id, adopted.object_generation, adopted.mesh)
    rt.catalog.pending += 1
    try:
        built = False
        with trio.move_on_at(first.deadline.at) as factory_scope:
            built = await _build_or_abort(rt, host, adopted, state)
        if factory_scope.cancelled_caught:
            LOGGER.warning("node %r: resuming the activation of Spot %r passed its "
                           "deadline in the factory; the creation is aborted", rt.node_id,
                           adopted.spot_id)
            return
        if not built:
            return
        state = step(COLD, state, COLD.ev.factory_initialized)
        with trio.CancelScope(shield=True):
            try:
                seq = await _first_seq(rt, adopted, first.data)
                state = step(COLD, state, COLD.ev.first_record_durable)
                ready = await rt.store.location.commit_ready(fence, now=rt.now())
            except ZLinkError:
                await host.activation_failed()
                await rt.store.location.abort_creating(fence)
                await _drop(rt, adopted)
                raise
    finally:
        rt.catalog.pending -= 1
    state = step(COLD, state, COLD.ev.commit_ready)
    _serve(rt, host, first, FirstRecord(seq=seq, ready_version=ready.store_version,
                                        receipt=receipt), state)
    LOGGER.info("node %r: resumed the cold activation of Spot %r (generation %d)",
                rt.node_id, adopted.spot_id, adopted.object_generation)


async def _build_or_abort(rt: NodeRuntime, host: Incarnation, adopted: AuthorityRecord,
                          state: ColdActivationState) -> bool:
    """The resumed factory; ``False`` once a failure aborted with the adopted fence.

    Cancellation (the recorded deadline) aborts the same way and propagates.
    """
    try:
        await host.build()
    except BaseException as exc:
        state = step(COLD, state, COLD.ev.deadline_expired if isinstance(exc, trio.Cancelled)
                     else COLD.ev.factory_failed)
        with trio.CancelScope(shield=True):
            await host.activation_failed()
            await rt.store.location.abort_creating(reservation_fence(adopted))
            await _drop(rt, adopted)
        step(COLD, state, COLD.ev.abort_creating)
        if isinstance(exc, trio.Cancelled):
            raise
        LOGGER.error("node %r: resuming the activation of Spot %r failed in its factory "
                     "(%s); the creation is aborted", rt.node_id, adopted.spot_id, exc)
        return False
    return True


def _serve(rt: NodeRuntime, host: Incarnation, message: _FirstMessage, first: FirstRecord,
           state: ColdActivationState) -> None:
    """Register, first record at the queue head, barrier open: one continuation.

    The first record is durable and always runs (its deadline does not drop it).
    """
    host.open(MessageWork(message.msg, message.info, None, message.deadline, first=first))
    rt.catalog.register(host)
    state = step(COLD, state, COLD.ev.route_registered)
    first.state = step(COLD, state, COLD.ev.queue_head_restored)


async def _resume_ready(rt: NodeRuntime, orphan: AuthorityRecord, spot_type: SpotType) -> None:
    """Ready + pointer: rebuild; run the first record first unless it completed."""
    state = COLD.st.recovering_ready
    pointer = orphan.recovery_pointer
    assert pointer is not None
    receipt = pointer.receipt()
    relocation = rt.store.relocation
    adopted = await _adopt(rt, orphan)
    spot_id, generation = adopted.spot_id, adopted.object_generation
    # The cursor moves to the first record only after its handler completed (cold
    # activation step 12), so a non-zero cursor means that handler must not run again.
    cursor = await relocation.inbox_cursor(spot_id, generation)
    done = cursor > 0
    host = Incarnation(rt, spot_type, spot_id, generation, adopted.mesh)
    try:
        if done:
            await host.build()
        else:
            message = await _first_message(rt, receipt, spot_type)
            await host.build()
    except ZLinkError as exc:
        await _give_up_ready(rt, host, adopted, exc)
        return
    if done:
        host.open(None)
        rt.catalog.register(host)
        state = step(COLD, state, COLD.ev.route_registered)
        state = step(COLD, state, COLD.ev.queue_head_restored)
        first = FirstRecord(seq=cursor, ready_version=adopted.store_version, receipt=receipt,
                            state=state)
        await record_first_completion(rt, spot_id, generation, first)
        LOGGER.info("node %r: Spot %r's first message was already handled; recovery "
                    "cleanup finished", rt.node_id, spot_id)
        return
    seq = await _first_seq(rt, adopted, message.data)
    _serve(rt, host, message, FirstRecord(seq=seq, ready_version=adopted.store_version,
                                          receipt=receipt), state)
    LOGGER.info("node %r: restored Spot %r's first message to the head of its queue",
                rt.node_id, spot_id)


async def _give_up_ready(rt: NodeRuntime, host: Incarnation, adopted: AuthorityRecord,
                         error: ZLinkError) -> None:
    """The instance cannot be rebuilt: close the incarnation with the adopted fence."""
    LOGGER.error("node %r: rebuilding Spot %r failed (%s); it is closed and its first "
                 "message is lost", rt.node_id, adopted.spot_id, error)
    with trio.CancelScope(shield=True):
        await host.activation_failed()
        closing = await rt.store.location.begin_close(
            adopted.spot_id, object_generation=adopted.object_generation, owner=rt.owner,
            now=rt.now())
        if closing is not None:
            await rt.store.location.release(closing.fence())
        await _drop(rt, adopted)
