"""Any interleaving of starts, continues, interruptions and replays ends in an event order.

A small world drives the domain the way the application will (replay or keep
the fold, ask for the next step, call the module, append with the expected
version and the SourceCommandId), with stand-ins that keep the promises the
spec gives the real parts:

- the stream (OrderEventStore) refuses an append at the wrong version and
  records an append whose SourceCommandId it already holds only once;
- Inventory and Payment return the first result for an ID they saw before.

Hypothesis draws a seed (success, no stock, payment refused) and a program of
operations: duplicate starts from "both API processes", single workflow
turns, turns interrupted after the module call (the process died before the
append) or after the append (a relocation: the next turn replays), stale
appends built from an older fold, and plain replays. After every operation
the stream must be a prefix of one of the three event orders; after the program
and a final drain it must be exactly the seed's order, with one
OrderStartedEvent, the deterministic IDs, no payment after a failed
reservation, and no external effect repeated: each module ran each effect at
most once, and was *asked* again only as often as a turn was interrupted
right after asking it.
"""

from __future__ import annotations

import collections
from typing import Literal

import attrs
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.samples.shoppingmall.server.order_workflow import domain as d

ORDER = "order-7"
LINES = (d.OrderLine("sku-1", 1),)
Seed = Literal["success", "no-stock", "payment-refused"]

ORDERS = {
    "success": ("OrderStartedEvent", "InventoryReservedEvent", "PaymentAuthorizedEvent",
                "OrderConfirmedEvent"),
    "no-stock": ("OrderStartedEvent", "InventoryReservationFailedEvent", "OrderFailedEvent"),
    "payment-refused": ("OrderStartedEvent", "InventoryReservedEvent", "PaymentFailedEvent",
                        "InventoryReleasedEvent", "OrderFailedEvent"),
}


@attrs.define
class Module:
    """An external module that returns the first result it gave for an ID."""

    answer: d.EffectResult
    first: dict[str, d.EffectResult] = attrs.field(factory=dict)
    asked: collections.Counter[str] = attrs.field(factory=collections.Counter)

    def call(self, effect_id: str) -> d.EffectResult:
        self.asked[effect_id] += 1
        return self.first.setdefault(effect_id, self.answer)


@attrs.define
class World:
    seed: Seed
    records: list[d.Recorded] = attrs.field(factory=list)
    cached: d.OrderAggregate | None = None  # the owner's fold in memory; None: replay
    clock: int = 1_000
    interrupted_after_asking: collections.Counter[str] = attrs.field(
        factory=collections.Counter)
    inventory: Module = attrs.field(init=False)
    payment: Module = attrs.field(init=False)
    release: Module = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.inventory = Module(d.EffectResult(self.seed != "no-stock", "out-of-stock"))
        self.payment = Module(d.EffectResult(self.seed != "payment-refused", "declined"))
        self.release = Module(d.EffectResult(True))

    # ------------------------------------------------------------------ the stand-ins

    def append(self, append: d.Append) -> Literal["ok", "conflict", "duplicate"]:
        if any(r.source_command_id == append.source_command_id for r in self.records):
            return "duplicate"
        if append.expected_version != len(self.records):
            return "conflict"
        self.clock += 1
        for offset, event in enumerate(append.events, start=1):
            self.records.append(d.Recorded(
                version=append.expected_version + offset, event=event,
                source_command_id=append.source_command_id, created_at_unix_ms=self.clock))
        return "ok"

    def replay(self) -> d.OrderAggregate:
        return d.fold(ORDER, self.records)

    def state(self) -> d.OrderAggregate:
        return self.cached if self.cached is not None else self.replay()

    def settle(self, state: d.OrderAggregate, append: d.Append) -> None:
        if self.append(append) == "ok":
            self.cached = d.advance(state, append, recorded_at_unix_ms=self.clock)
            assert self.cached == self.replay()
        else:
            self.cached = None  # someone else moved the stream: replay next time

    # ------------------------------------------------------------------ operations

    def start(self, key: int) -> None:
        """StartOrderWorkflowReq from one of the API processes (key 0: the same key)."""
        command = d.StartOrder(order_id=ORDER, cart_id="cart-1", shipping_address_id="addr-1",
                               lines=LINES, amount=25.0, currency="KRW",
                               source_command_id=d.start_command_id(f"key-{key}"))
        state = self.state()
        outcome = d.start(state, command)
        if isinstance(outcome, d.Append):
            self.settle(state, outcome)

    def turn(self, interrupt: Literal["no", "after-asking", "after-append"] = "no") -> None:
        """One workflow turn of a ContinueOrderWorkflowReq or the background continuation."""
        state = self.state()
        step = d.next_step(state)
        if isinstance(step, (d.NotStarted, d.Finished)):
            return
        result = None
        if isinstance(step, d.ReserveInventory):
            result = self.inventory.call(step.reservation_id)
        elif isinstance(step, d.AuthorizePayment):
            result = self.payment.call(step.payment_id)
        elif isinstance(step, d.ReleaseInventory):
            result = self.release.call(step.reservation_id)
        if interrupt == "after-asking" and result is not None:
            self.interrupted_after_asking[type(step).__name__] += 1
            self.cached = None  # the process died before the append
            return
        outcome = d.record(state, step, result, now_unix_ms=self.clock)
        if isinstance(outcome, d.Append):
            self.settle(state, outcome)
        if interrupt == "after-append":
            self.cached = None  # relocated: the target replays the stream

    def stale_append(self, prefix: int, accepted: bool) -> None:
        """A decision made on an older fold is appended: the stream must not change."""
        if prefix >= len(self.records):
            return
        old = d.fold(ORDER, self.records[:prefix])
        step = d.next_step(old)
        if isinstance(step, (d.NotStarted, d.Finished)):
            return
        effect = isinstance(step, (d.ReserveInventory, d.AuthorizePayment, d.ReleaseInventory))
        outcome = d.record(old, step, d.EffectResult(accepted) if effect else None,
                           now_unix_ms=self.clock)
        if isinstance(outcome, d.Append):
            before = list(self.records)
            assert self.append(outcome) in ("conflict", "duplicate")
            assert self.records == before

    # ------------------------------------------------------------------ checks

    def names(self) -> tuple[str, ...]:
        return tuple(type(r.event).__name__ for r in self.records)

    def check_prefix(self) -> None:
        names = self.names()
        assert any(order[: len(names)] == names for order in ORDERS.values()), names
        assert all(r.version == i for i, r in enumerate(self.records, start=1))

    def check_effects(self) -> None:
        for module, step in ((self.inventory, "ReserveInventory"),
                             (self.payment, "AuthorizePayment"),
                             (self.release, "ReleaseInventory")):
            # One effect per order, under the deterministic ID ...
            assert len(module.first) <= 1
            # ... and asked again only after a turn died right after asking.
            for asked in module.asked.values():
                assert asked <= 1 + self.interrupted_after_asking[step]
        assert set(self.inventory.first) <= {d.reservation_id(ORDER)}
        assert set(self.payment.first) <= {d.payment_id(ORDER)}
        assert set(self.release.first) <= {d.reservation_id(ORDER)}


operations = st.one_of(
    st.tuples(st.just("start"), st.sampled_from([0, 0, 1])),
    st.tuples(st.just("turn"), st.sampled_from(["no", "no", "after-asking", "after-append"])),
    st.tuples(st.just("stale"), st.integers(0, 5), st.booleans()),
    st.tuples(st.just("replay")),
)


@given(seed=st.sampled_from(list(ORDERS)), program=st.lists(operations, max_size=30))
def test_any_interleaving_ends_in_the_seeds_event_order(seed: Seed, program: list[tuple]):
    world = World(seed)
    for op in program:
        if op[0] == "start":
            world.start(op[1])
        elif op[0] == "turn":
            world.turn(op[1])
        elif op[0] == "stale":
            world.stale_append(op[1], op[2])
        else:
            world.cached = None
        world.check_prefix()
        world.check_effects()
    started = any(op[0] == "start" for op in program)
    if not started:
        # Continues of an order nobody started create nothing (item 9.3-3).
        assert world.records == []
        world.start(0)
    for _ in range(10):  # drain: the background continuation runs to the end
        world.turn()
    world.check_effects()
    assert world.names() == ORDERS[seed]
    assert world.names().count("OrderStartedEvent") == 1
    state = world.replay()
    assert state.terminal
    assert state.status is (d.OrderStatus.CONFIRMED if seed == "success" else d.OrderStatus.FAILED)
    if seed == "no-stock":
        assert not world.payment.asked  # inventory failure: payment is never called
    if seed != "payment-refused":
        assert not world.release.asked
    sources = [r.source_command_id for r in world.records]
    assert len(set(sources)) == len(sources)
    assert sources[0] in {d.start_command_id("key-0"), d.start_command_id("key-1")}
    assert sources[1:] == [d.stage_command_id(ORDER, stage) for stage in {
        "success": (d.Stage.RESERVE_INVENTORY, d.Stage.AUTHORIZE_PAYMENT, d.Stage.CONFIRM),
        "no-stock": (d.Stage.RESERVE_INVENTORY, d.Stage.FAIL),
        "payment-refused": (d.Stage.RESERVE_INVENTORY, d.Stage.AUTHORIZE_PAYMENT,
                            d.Stage.RELEASE_INVENTORY, d.Stage.FAIL),
    }[seed]]
    if state.reservation_id is not None:
        assert state.reservation_id == d.reservation_id(ORDER)
    if state.payment_id is not None:
        assert state.payment_id == d.payment_id(ORDER)


def test_resuming_after_inventory_reserved_starts_at_payment():
    """Items 9.2-2/-6: interrupted (or relocated) right after InventoryReserved, a replay goes on
    with AuthorizePayment, and ReserveInventory is not asked again."""
    world = World("success")
    world.start(0)
    world.turn("after-append")
    assert world.names()[-1] == "InventoryReservedEvent"
    assert world.cached is None
    replayed = world.replay()
    assert isinstance(d.next_step(replayed), d.AuthorizePayment)
    world.turn()
    world.turn()
    assert world.names() == ORDERS["success"]
    assert world.inventory.asked == {d.reservation_id(ORDER): 1}
    assert world.payment.asked == {d.payment_id(ORDER): 1}


def test_two_api_processes_starting_one_key_record_one_start():
    world = World("success")
    world.start(0)
    world.start(0)
    world.cached = None
    world.start(0)
    assert world.names() == ("OrderStartedEvent",)
    assert d.start(world.replay(), d.StartOrder(
        order_id=ORDER, cart_id="cart-1", shipping_address_id="addr-1", lines=LINES,
        amount=25.0, currency="KRW", source_command_id=d.start_command_id("key-0"),
    )) == d.AlreadyStarted(world.replay(), duplicate=True)
