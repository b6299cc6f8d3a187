"""The application's use cases over in-memory ports: conflicts, dedupe, order of writes.

No framework and no store: a fake stream that can be told to lose a race, a
projection that records what it was given, and modules that answer from a
table. What these tests pin is ``application.use_cases``' contract: the event
first, then the read model; a conflict or a deduplicated append is replayed
and decided again; continue and rebuild of an empty stream write nothing.
"""

from __future__ import annotations

import attrs
import pytest

from zlink_trio.samples.shoppingmall.server.order_workflow.application import (
    AppendOutcome,
    OrderPorts,
    OrderWorkflow,
    StreamConflict,
    UnknownOrder,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.domain import (
    Append,
    AuthorizePayment,
    EffectResult,
    OrderAggregate,
    OrderLine,
    Phase,
    Recorded,
    ReleaseInventory,
    ReserveInventory,
    StartOrder,
    next_step,
    record,
    start_command_id,
)


@attrs.define
class FakeStream:
    records: list[Recorded] = attrs.field(factory=list)
    #: Appends to refuse with a conflict, after first writing this record behind the caller.
    intruders: list[Append] = attrs.field(factory=list)
    log: list[str] = attrs.field(factory=list)

    async def read(self, order_id: str, *, after_version: int = 0) -> tuple[Recorded, ...]:
        return tuple(r for r in self.records if r.version > after_version)

    def _write(self, append: Append, now: int) -> tuple[Recorded, ...]:
        new = tuple(Recorded(version=append.expected_version + i, event=e,
                             source_command_id=append.source_command_id, created_at_unix_ms=now)
                    for i, e in enumerate(append.events, start=1))
        self.records.extend(new)
        return new

    async def append(self, append: Append, *, now_unix_ms: int) -> AppendOutcome:
        if any(r.source_command_id == append.source_command_id for r in self.records):
            self.log.append(f"dedupe {append.source_command_id}")
            return AppendOutcome(records=(), deduplicated=True)
        if self.intruders:
            self._write(self.intruders.pop(0), now_unix_ms)
        if append.expected_version != len(self.records):
            self.log.append(f"conflict {append.source_command_id}")
            raise StreamConflict("moved")
        self.log.append(f"append {type(append.events[0]).__name__}")
        return AppendOutcome(records=self._write(append, now_unix_ms), deduplicated=False)


@attrs.define
class FakeProjection:
    log: list[str]
    puts: list[OrderAggregate] = attrs.field(factory=list)

    async def put(self, state: OrderAggregate) -> None:
        self.log.append(f"project {state.version}")
        self.puts.append(state)


@attrs.define
class FakeEffects:
    accept_reserve: bool = True
    accept_payment: bool = True
    calls: list[tuple[str, object]] = attrs.field(factory=list)

    async def reserve(self, step: ReserveInventory) -> EffectResult:
        self.calls.append(("reserve", step.reservation_id))
        return EffectResult(self.accept_reserve, None if self.accept_reserve else "no-stock")

    async def authorize(self, step: AuthorizePayment, *, payment_method_id: str | None,
                        source_command_ids: frozenset[str]) -> EffectResult:
        self.calls.append(("authorize", payment_method_id))
        return EffectResult(self.accept_payment, None if self.accept_payment else "declined")

    async def release(self, step: ReleaseInventory) -> EffectResult:
        self.calls.append(("release", step.reservation_id))
        return EffectResult(True)


@attrs.define
class FakeIdempotency:
    marked: list[tuple[str, str]] = attrs.field(factory=list)

    async def mark_started(self, idempotency_key: str, order_id: str) -> None:
        self.marked.append((idempotency_key, order_id))


@attrs.frozen
class World:
    stream: FakeStream
    projection: FakeProjection
    fx: FakeEffects
    idem: FakeIdempotency
    ports: OrderPorts


def _world(**effects: bool) -> World:
    stream = FakeStream()
    projection = FakeProjection(stream.log)
    fx = FakeEffects(**effects)
    idem = FakeIdempotency()
    return World(stream, projection, fx, idem, OrderPorts(
        stream=stream, projection=projection, effects=fx, idempotency=idem, clock=lambda: 7))


def _command(order_id: str = "o-1") -> StartOrder:
    return StartOrder(order_id=order_id, cart_id="cart", shipping_address_id="addr",
                      lines=(OrderLine("sku", 1),), amount=10.0, currency="EUR",
                      source_command_id=start_command_id("key"))


async def _run(workflow: OrderWorkflow) -> None:
    while (await workflow.step()).recorded:
        pass


async def test_each_step_appends_its_event_before_it_projects():
    w = _world()
    workflow = OrderWorkflow("o-1", w.ports)
    outcome = await workflow.start(_command(), idempotency_key="key", payment_method_id="pm")
    assert outcome.recorded
    assert w.idem.marked == [("key", "o-1")]
    await _run(workflow)
    assert w.stream.log == [
        "append OrderStartedEvent", "project 1", "append InventoryReservedEvent", "project 2",
        "append PaymentAuthorizedEvent", "project 3", "append OrderConfirmedEvent", "project 4"]
    assert workflow.state.phase is Phase.CONFIRMED
    assert w.fx.calls == [("reserve", "o-1:reservation"), ("authorize", "pm")]


async def test_a_conflicting_append_is_replayed_and_decided_again():
    w = _world()
    workflow = OrderWorkflow("o-1", w.ports)
    await workflow.start(_command(), idempotency_key="key", payment_method_id="pm")
    # Another writer records the reservation's outcome between our module call and append.
    other = OrderWorkflow("o-1", w.ports)
    await other.replay()
    step = next_step(other.state)
    intruder = record(other.state, step, EffectResult(True), now_unix_ms=1)
    assert isinstance(intruder, Append)
    w.stream.intruders.append(attrs.evolve(intruder, source_command_id="someone-else"))
    outcome = await workflow.step()
    assert outcome.recorded
    assert workflow.state.phase is Phase.PAYMENT_AUTHORIZED  # it went on from the new fold
    assert "conflict o-1:reserve-inventory" in w.stream.log
    assert [e.event.__class__.__name__ for e in w.stream.records] == [
        "OrderStartedEvent", "InventoryReservedEvent", "PaymentAuthorizedEvent"]


async def test_a_duplicate_start_records_nothing_and_answers_the_fold():
    w = _world()
    first = OrderWorkflow("o-1", w.ports)
    await first.start(_command(), idempotency_key="key", payment_method_id="pm")
    second = OrderWorkflow("o-1", w.ports)  # another incarnation, after a close
    outcome = await second.start(_command(), idempotency_key="key", payment_method_id="pm")
    assert not outcome.recorded
    assert outcome.state == first.state
    assert len(w.stream.records) == 1
    assert w.idem.marked == [("key", "o-1"), ("key", "o-1")]
    other = attrs.evolve(_command(), source_command_id=start_command_id("other-key"))
    third = await OrderWorkflow("o-1", w.ports).start(other, idempotency_key="other-key",
                                                      payment_method_id="pm")
    assert not third.recorded
    assert w.idem.marked == [("key", "o-1"), ("key", "o-1")]  # another key is not this order's


async def test_another_incarnation_authorizes_without_the_start_commands_method():
    w = _world()
    first = OrderWorkflow("o-1", w.ports)
    await first.start(_command(), idempotency_key="key", payment_method_id="pm")
    await first.step()  # reserved
    moved = OrderWorkflow("o-1", w.ports)
    await moved.step()
    assert w.fx.calls[-1] == ("authorize", None)  # the adapter looks it up


async def test_a_rejected_payment_compensates_before_the_order_fails():
    w = _world(accept_payment=False)
    workflow = OrderWorkflow("o-1", w.ports)
    await workflow.start(_command(), idempotency_key="key", payment_method_id="pm")
    await _run(workflow)
    assert [name for name, _ in w.fx.calls] == ["reserve", "authorize", "release"]
    assert workflow.state.phase is Phase.FAILED
    assert workflow.state.reason == "declined"


async def test_continue_runs_to_the_end_and_projects_last():
    w = _world()
    await OrderWorkflow("o-1", w.ports).start(_command(), idempotency_key="key",
                                            payment_method_id="pm")
    state = await OrderWorkflow("o-1", w.ports).continue_order()
    assert state.phase is Phase.CONFIRMED
    assert w.stream.log[-1] == "project 4"
    assert w.projection.puts[-1] == state


@pytest.mark.parametrize("command", ["continue_order", "rebuild"])
async def test_continue_and_rebuild_of_an_empty_stream_write_nothing(command):
    w = _world()
    with pytest.raises(UnknownOrder):
        await getattr(OrderWorkflow("ghost", w.ports), command)()
    assert w.stream.records == []
    assert w.projection.puts == []
    assert w.fx.calls == []


async def test_rebuild_folds_the_stream_afresh():
    w = _world()
    workflow = OrderWorkflow("o-1", w.ports)
    await workflow.start(_command(), idempotency_key="key", payment_method_id="pm")
    await _run(workflow)
    rebuilt = await OrderWorkflow("o-1", w.ports).rebuild()
    assert rebuilt == workflow.state
    assert w.projection.puts[-1] == rebuilt
