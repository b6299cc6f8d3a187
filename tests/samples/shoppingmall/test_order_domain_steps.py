"""Next step, recording outcomes, start dedupe and deterministic IDs.

Pure tests: the domain has no I/O.
"""

from __future__ import annotations

import attrs
import pytest

from zlink_trio.samples.shoppingmall.server.order_workflow import domain as d

ORDER = "order-1"
LINES = (d.OrderLine("sku-1", 2),)
NOW = 1_700_000_000_000


def start_command(**changes: object) -> d.StartOrder:
    fields: dict[str, object] = {
        "order_id": ORDER, "cart_id": "cart-1", "shipping_address_id": "addr-1",
        "lines": LINES, "amount": 30.0, "currency": "KRW",
        "source_command_id": d.start_command_id("key-1"),
    }
    return d.StartOrder(**{**fields, **changes})


def started() -> d.OrderAggregate:
    append = d.start(d.OrderAggregate.empty(ORDER), start_command())
    assert isinstance(append, d.Append)
    return d.advance(d.OrderAggregate.empty(ORDER), append, recorded_at_unix_ms=NOW)


def step_on(state: d.OrderAggregate, result: d.EffectResult | None = None) -> d.OrderAggregate:
    """Record the next step's outcome (``result`` for an effect) and fold it."""
    append = d.record(state, d.next_step(state), result, now_unix_ms=NOW + state.version)
    assert isinstance(append, d.Append)
    return d.advance(state, append, recorded_at_unix_ms=NOW + state.version)


OK = d.EffectResult(accepted=True)


def names(state: d.OrderAggregate, records: list[d.Recorded]) -> list[str]:
    return [type(r.event).__name__ for r in records]


# --------------------------------------------------------------------------- ids


def test_ids_are_deterministic_and_distinct_per_order_and_stage():
    assert d.reservation_id(ORDER) == d.reservation_id(ORDER) == "order-1:reservation"
    assert d.payment_id(ORDER) == "order-1:payment"
    assert d.event_id(ORDER, 3) == "order-1:event:3"
    assert d.start_command_id("key-1") == "start:key-1"
    stage_ids = {d.stage_command_id(ORDER, stage) for stage in d.Stage}
    assert len(stage_ids) == len(d.Stage)
    assert d.reservation_id("a") != d.reservation_id("b")
    assert d.stage_command_id("a", d.Stage.CONFIRM) != d.stage_command_id("b", d.Stage.CONFIRM)


# --------------------------------------------------------------------------- start


def test_start_on_an_empty_stream_records_order_started_once():
    append = d.start(d.OrderAggregate.empty(ORDER), start_command())
    assert isinstance(append, d.Append)
    assert append.expected_version == 0
    assert append.source_command_id == "start:key-1"
    (event,) = append.events
    assert event == d.OrderStartedEvent(
        event_id="order-1:event:1", order_id=ORDER, cart_id="cart-1",
        shipping_address_id="addr-1", lines=LINES, amount=30.0, currency="KRW",
        source_command_id="start:key-1",
    )
    state = started()
    assert state.status is d.OrderStatus.CREATED
    assert state.source_command_ids == {"start:key-1"}


def test_a_duplicate_start_records_nothing_and_returns_the_fold():
    state = step_on(started(), OK)
    again = d.start(state, start_command())
    assert again == d.AlreadyStarted(state, duplicate=True)
    other = d.start(state, start_command(source_command_id="start:key-2"))
    assert other == d.AlreadyStarted(state, duplicate=False)


def test_a_start_of_another_order_is_refused():
    with pytest.raises(d.InvalidCommand, match="sent to order 'order-1'"):
        d.start(d.OrderAggregate.empty(ORDER), start_command(order_id="order-2"))


@pytest.mark.parametrize(
    "changes",
    [
        {"lines": ()},
        {"lines": [d.OrderLine("s", 1)]},
        {"lines": ("s",)},
        {"amount": -1.0},
        {"amount": float("nan")},
        {"amount": True},
        {"currency": ""},
        {"cart_id": 5},
        {"source_command_id": ""},
    ],
)
def test_invalid_starts_are_refused(changes):
    with pytest.raises(d.InvalidCommand, match="start: "):
        start_command(**changes)


def test_order_lines_need_a_sku_and_a_positive_quantity():
    with pytest.raises(ValueError, match="quantity"):
        d.OrderLine("s", 0)
    with pytest.raises(ValueError, match="sku"):
        d.OrderLine("", 1)


# --------------------------------------------------------------------------- next step


def test_next_step_follows_the_success_path():
    state = started()
    assert d.next_step(state) == d.ReserveInventory(
        order_id=ORDER, reservation_id="order-1:reservation", lines=LINES)
    state = step_on(state, OK)
    assert d.next_step(state) == d.AuthorizePayment(
        order_id=ORDER, payment_id="order-1:payment", cart_id="cart-1", amount=30.0,
        currency="KRW")
    state = step_on(state, OK)
    assert d.next_step(state) == d.ConfirmOrder(ORDER)
    state = step_on(state)
    assert d.next_step(state) == d.Finished(ORDER, d.OrderStatus.CONFIRMED)
    assert state.status is d.OrderStatus.CONFIRMED


def test_an_inventory_refusal_fails_the_order_without_payment():
    state = step_on(started(), d.EffectResult(accepted=False, reason="out-of-stock"))
    assert d.next_step(state) == d.FailOrder(ORDER, "out-of-stock")
    state = step_on(state)
    assert d.next_step(state) == d.Finished(ORDER, d.OrderStatus.FAILED)
    assert state.payment_id is None
    assert state.reason == "out-of-stock"


def test_a_payment_refusal_releases_then_fails():
    state = step_on(step_on(started(), OK), d.EffectResult(accepted=False, reason="declined"))
    assert d.next_step(state) == d.ReleaseInventory(
        order_id=ORDER, reservation_id="order-1:reservation", reason="declined")
    state = step_on(state, OK)
    assert state.phase is d.Phase.RELEASED
    assert state.status is d.OrderStatus.INVENTORY_RESERVED  # the status does not revert
    assert d.next_step(state) == d.FailOrder(ORDER, "declined")
    state = step_on(state)
    assert state.status is d.OrderStatus.FAILED
    assert state.reason == "declined"


def test_refusals_without_a_reason_get_a_default_one():
    state = step_on(started(), d.EffectResult(accepted=False))
    assert state.reason == d.INVENTORY_REFUSED
    state = step_on(step_on(started(), OK), d.EffectResult(accepted=False))
    assert state.reason == d.PAYMENT_REFUSED


def test_a_release_inventory_did_not_confirm_halts_and_records_nothing():
    state = step_on(step_on(started(), OK), d.EffectResult(accepted=False, reason="declined"))
    outcome = d.record(state, d.next_step(state), d.EffectResult(False, "busy"), now_unix_ms=NOW)
    assert isinstance(outcome, d.Halt)
    assert "busy" in outcome.reason
    assert d.next_step(state) == d.next_step(state)  # the same release is asked for again


def test_a_continue_on_a_missing_order_creates_nothing():
    state = d.OrderAggregate.empty(ORDER)
    assert d.next_step(state) == d.NotStarted(ORDER)
    with pytest.raises(d.InvalidCommand, match="NotStarted records nothing"):
        d.record(state, d.NotStarted(ORDER), now_unix_ms=NOW)


# --------------------------------------------------------------------------- record


def test_each_stage_appends_one_event_under_its_deterministic_source_command_id():
    state = started()
    append = d.record(state, d.next_step(state), OK, now_unix_ms=NOW)
    assert isinstance(append, d.Append)
    assert append.expected_version == 1
    assert append.source_command_id == d.stage_command_id(ORDER, d.Stage.RESERVE_INVENTORY)
    assert append.events == (d.InventoryReservedEvent(
        event_id="order-1:event:2", order_id=ORDER, reservation_id="order-1:reservation"),)


def test_confirm_and_fail_are_stamped_with_the_given_time():
    state = step_on(step_on(started(), OK), OK)
    append = d.record(state, d.ConfirmOrder(ORDER), now_unix_ms=42)
    assert isinstance(append, d.Append)
    assert append.events[0] == d.OrderConfirmedEvent(
        event_id="order-1:event:4", order_id=ORDER, confirmed_at_unix_ms=42)


def test_a_stale_step_is_refused():
    state = started()
    stale = d.next_step(state)
    moved = step_on(state, OK)
    with pytest.raises(d.InvalidCommand, match="not the next step"):
        d.record(moved, stale, OK, now_unix_ms=NOW)


def test_an_effect_step_needs_its_result():
    state = started()
    with pytest.raises(d.InvalidCommand, match="needs the module's result"):
        d.record(state, d.next_step(state), None, now_unix_ms=NOW)


def test_a_terminal_order_records_nothing():
    state = step_on(step_on(step_on(started(), OK), OK))
    with pytest.raises(d.InvalidCommand, match="Finished records nothing"):
        d.record(state, d.next_step(state), now_unix_ms=NOW)


def test_advance_refuses_an_append_made_for_another_version():
    state = started()
    append = d.record(state, d.next_step(state), OK, now_unix_ms=NOW)
    assert isinstance(append, d.Append)
    with pytest.raises(d.InvalidCommand, match="does not follow"):
        d.advance(step_on(state, OK), append, recorded_at_unix_ms=NOW)
    with pytest.raises(d.InvalidCommand, match="does not follow"):
        d.advance(state, attrs.evolve(append, order_id="order-2"), recorded_at_unix_ms=NOW)


def test_advance_is_what_a_replay_gives():
    state = d.OrderAggregate.empty(ORDER)
    records: list[d.Recorded] = []
    outcomes = [None, OK, d.EffectResult(False, "declined"), OK, None]
    for i, result in enumerate(outcomes):
        if i == 0:
            append = d.start(state, start_command())
        else:
            append = d.record(state, d.next_step(state), result, now_unix_ms=NOW)
        assert isinstance(append, d.Append)
        records += [d.Recorded(version=append.expected_version + 1, event=append.events[0],
                               source_command_id=append.source_command_id,
                               created_at_unix_ms=NOW + i)]
        state = d.advance(state, append, recorded_at_unix_ms=NOW + i)
        assert state == d.fold(ORDER, records)
    assert names(state, records) == [
        "OrderStartedEvent", "InventoryReservedEvent", "PaymentFailedEvent",
        "InventoryReleasedEvent", "OrderFailedEvent"]
