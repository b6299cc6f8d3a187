"""The order use cases over the domain and the ports: replay, start, step, continue, rebuild.

Theory of operation
-------------------
:class:`OrderWorkflow` is one order's application service; the Spot holds one
per incarnation, so everything here runs inside that order's single owner
(one turn at a time) and needs no lock. It keeps the fold it last saw
(``state``) and catches up before every decision (:meth:`OrderWorkflow.replay`
reads only the records above ``state.version``), so a record another writer
made -- a retried command, a fixture -- is never missed.

Every write follows one order: **the event first, then the read model**, so the
read model can always be rebuilt from the stream. A step is

1. replay; ``step = next_step(state)``; stop at NotStarted / Finished;
2. call the module for an effect step (its deterministic ID makes a repeat
   return the first result);
3. ``record`` the outcome (or a Halt: nothing is written);
4. append at the fold's version with the step's SourceCommandId;
   :class:`~.ports.StreamConflict` or a deduplicated append -> replay and
   decide again (at most :data:`MAX_ATTEMPTS` times);
5. ``advance`` the fold and put its OrderState in the read model.

**SourceCommandId dedupe.** The start's append carries the start
command's SourceCommandId and expects version 0, so a duplicate start --
the same command again, or the other CommerceApi's -- records nothing and
answers with the fold. Continue and rebuild record no event of their own:
what a continue runs is recorded under the steps' own SourceCommandIds, so a
repeated continue or rebuild (whatever its SourceCommandId) is harmless and
returns the fold; the commands' IDs are not written anywhere.

**Unknown orders.** Continue and rebuild of an OrderId whose stream
is empty raise :class:`~.order_state.UnknownOrder` before writing anything:
no event, no projection.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs

from ..domain import (
    AlreadyStarted,
    AuthorizePayment,
    ConfirmOrder,
    FailOrder,
    Finished,
    Halt,
    NotStarted,
    OrderAggregate,
    ReleaseInventory,
    ReserveInventory,
    StartOrder,
    Step,
    advance,
    apply,
    fold,
    next_step,
    record,
    start,
)
from .order_state import UnknownOrder
from .ports import StreamConflict

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..domain import EffectResult
    from .ports import Clock, Effects, Idempotency, OrderStream, Projection

__all__ = ("MAX_ATTEMPTS", "MAX_STEPS", "OrderPorts", "OrderWorkflow", "StartOutcome",
           "StepOutcome")

#: How often one decision is retried after a version conflict before the conflict propagates.
MAX_ATTEMPTS: Final = 8
#: More steps than any event order has: a continue that runs longer is a bug, not a workflow.
MAX_STEPS: Final = 16


@attrs.frozen(kw_only=True)
class OrderPorts:
    """What the use cases drive (one set per node, shared by its orders)."""

    stream: OrderStream
    projection: Projection
    effects: Effects
    idempotency: Idempotency
    clock: Clock


@attrs.frozen(kw_only=True)
class StartOutcome:
    """The fold after a start; ``recorded``: this call wrote the OrderStartedEvent."""

    state: OrderAggregate
    recorded: bool


@attrs.frozen(kw_only=True)
class StepOutcome:
    """What one step did: ``recorded`` its outcome, or stopped at ``step``.

    ``step`` is the step decided last: NotStarted / Finished when there was
    nothing to do; ``halt`` is set when the outcome could not be recorded yet.
    """

    state: OrderAggregate
    step: Step
    recorded: bool
    halt: Halt | None = None


def _never(state: OrderAggregate, step: Step) -> bool:
    return False


class OrderWorkflow:
    """One order's use cases (module docstring); not safe for concurrent calls."""

    def __init__(self, order_id: str, ports: OrderPorts) -> None:
        self._ports = ports
        self.state = OrderAggregate.empty(order_id)
        #: The start command's payment method, when this instance ran the start.
        self._payment_method_id: str | None = None

    @property
    def order_id(self) -> str:
        """The order this workflow serves."""
        return self.state.order_id

    async def replay(self) -> OrderAggregate:
        """Catch the fold up with the stream (reads only the records it has not seen)."""
        records = await self._ports.stream.read(self.order_id, after_version=self.state.version)
        for recorded in records:
            self.state = apply(self.state, recorded)
        return self.state

    async def start(self, command: StartOrder, *, idempotency_key: str,
                    payment_method_id: str) -> StartOutcome:
        """StartOrderWorkflowReq: record OrderStartedEvent once, project Created, mark started.

        A duplicate (the stream already started) records nothing and returns the
        fold. The projection is written either way (a lost one is repaired), then,
        when the stream's start is this command's (same SourceCommandId), the
        idempotency mapping moves to started; another command's start of the
        same OrderId leaves its key alone. Raises the domain's ``InvalidCommand``
        for a command of another order.
        """
        recorded = ours = False
        for _ in range(MAX_ATTEMPTS):
            await self.replay()
            decision = start(self.state, command)
            if isinstance(decision, AlreadyStarted):
                ours = decision.duplicate
                if ours:
                    self._payment_method_id = self._payment_method_id or payment_method_id
                break
            now = self._ports.clock()
            try:
                outcome = await self._ports.stream.append(decision, now_unix_ms=now)
            except StreamConflict:
                continue
            if outcome.deduplicated:
                continue
            self.state = advance(self.state, decision, recorded_at_unix_ms=now)
            self._payment_method_id = payment_method_id
            recorded = ours = True
            break
        else:
            raise StreamConflict(f"order {self.order_id!r}: the start kept conflicting")
        await self._ports.projection.put(self.state)
        if ours:
            await self._ports.idempotency.mark_started(idempotency_key, self.order_id)
        return StartOutcome(state=self.state, recorded=recorded)

    async def step(self, *, skip_projection: Callable[[OrderAggregate, Step], bool] = _never,
                   ) -> StepOutcome:
        """Run the next step and record its outcome (module docstring, steps 1-5).

        ``skip_projection(state, step)`` True leaves the read model as it is after
        the append (the runner's fixture for item 9.2-3).
        """
        for _ in range(MAX_ATTEMPTS):
            state = await self.replay()
            step = next_step(state)
            if isinstance(step, (NotStarted, Finished)):
                return StepOutcome(state=state, step=step, recorded=False)
            result = await self._effect(step)
            now = self._ports.clock()
            outcome = record(state, step, result, now_unix_ms=now)
            if isinstance(outcome, Halt):
                return StepOutcome(state=state, step=step, recorded=False, halt=outcome)
            try:
                appended = await self._ports.stream.append(outcome, now_unix_ms=now)
            except StreamConflict:
                continue
            if appended.deduplicated:
                continue
            self.state = advance(state, outcome, recorded_at_unix_ms=now)
            if not skip_projection(state, step):
                await self._ports.projection.put(self.state)
            return StepOutcome(state=self.state, step=step, recorded=True)
        raise StreamConflict(f"order {self.order_id!r}: a step kept conflicting")

    async def continue_order(self) -> OrderAggregate:
        """ContinueOrderWorkflowReq: run every step the fold allows, then project the fold.

        Resumes wherever the stream stopped (an already-recorded step is not
        run again) and ends Finished or halted; the projection is written last,
        so a terminal event whose projection was lost is reflected before the
        reply. Raises :class:`UnknownOrder` for an empty stream.
        """
        await self.replay()
        if not self.state.started:
            raise UnknownOrder(self.order_id)
        for _ in range(MAX_STEPS):
            if not (await self.step()).recorded:
                break
        await self._ports.projection.put(self.state)
        return self.state

    async def rebuild(self) -> OrderAggregate:
        """RebuildOrderProjectionReq: fold the whole stream afresh and write its projection.

        Reads the stream from version 1 (not the cached fold), so the read model
        is what the stream alone says. Raises :class:`UnknownOrder` for
        an empty stream.
        """
        records = await self._ports.stream.read(self.order_id)
        state = fold(self.order_id, records)
        if not state.started:
            raise UnknownOrder(self.order_id)
        self.state = state
        await self._ports.projection.put(state)
        return state

    async def _effect(self, step: Step) -> EffectResult | None:
        effects = self._ports.effects
        if isinstance(step, ReserveInventory):
            return await effects.reserve(step)
        if isinstance(step, AuthorizePayment):
            return await effects.authorize(step, payment_method_id=self._payment_method_id,
                                          source_command_ids=self.state.source_command_ids)
        if isinstance(step, ReleaseInventory):
            return await effects.release(step)
        assert isinstance(step, (ConfirmOrder, FailOrder))
        return None
