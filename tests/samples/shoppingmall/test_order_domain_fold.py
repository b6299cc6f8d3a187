"""The order fold: the three event orders fold to their states; anything else is refused.

Pure tests: the domain has no I/O.
"""

from __future__ import annotations

import attrs
import pytest

from zlink_trio.samples.shoppingmall.server.order_workflow import domain as d

ORDER = "order-1"
LINES = (d.OrderLine("sku-1", 2), d.OrderLine("sku-2", 1))


def ev(kind: type, version: int, order_id: str = ORDER, **fields: object) -> d.OrderEvent:
    """An event of class ``kind`` with plausible fields for ``version``."""
    defaults: dict[type, dict[str, object]] = {
        d.OrderStartedEvent: {"cart_id": "cart-1", "shipping_address_id": "addr-1",
                              "lines": LINES, "amount": 30.5, "currency": "KRW",
                              "source_command_id": "start:key-1"},
        d.InventoryReservedEvent: {"reservation_id": d.reservation_id(order_id)},
        d.InventoryReservationFailedEvent: {"reason": "out-of-stock"},
        d.PaymentAuthorizedEvent: {"payment_id": d.payment_id(order_id)},
        d.PaymentFailedEvent: {"reason": "card-declined"},
        d.InventoryReleasedEvent: {"reservation_id": d.reservation_id(order_id),
                                   "reason": "card-declined"},
        d.OrderConfirmedEvent: {"confirmed_at_unix_ms": 1000 + version},
        d.OrderFailedEvent: {"reason": "card-declined", "failed_at_unix_ms": 1000 + version},
    }
    return kind(event_id=d.event_id(order_id, version), order_id=order_id,
                **{**defaults[kind], **fields})


def stream(*kinds: type) -> list[d.Recorded]:
    return [
        d.Recorded(version=v, event=ev(kind, v), source_command_id=f"cmd-{v}",
                   created_at_unix_ms=100 * v)
        for v, kind in enumerate(kinds, start=1)
    ]


SUCCESS = (d.OrderStartedEvent, d.InventoryReservedEvent, d.PaymentAuthorizedEvent,
           d.OrderConfirmedEvent)
INVENTORY_FAILURE = (d.OrderStartedEvent, d.InventoryReservationFailedEvent, d.OrderFailedEvent)
PAYMENT_FAILURE = (d.OrderStartedEvent, d.InventoryReservedEvent, d.PaymentFailedEvent,
                   d.InventoryReleasedEvent, d.OrderFailedEvent)


def test_an_empty_stream_is_a_new_order():
    state = d.fold(ORDER, [])
    assert state == d.OrderAggregate.empty(ORDER)
    assert state.version == 0
    assert state.status is None
    assert not state.started
    assert not state.terminal


def test_success_folds_to_confirmed():
    state = d.fold(ORDER, stream(*SUCCESS))
    assert state.status is d.OrderStatus.CONFIRMED
    assert state.terminal
    assert state.version == 4
    assert state.reservation_id == d.reservation_id(ORDER)
    assert state.payment_id == d.payment_id(ORDER)
    assert (state.amount, state.currency, state.lines) == (30.5, "KRW", LINES)
    assert state.shipping_address_id == "addr-1"
    assert state.reason is None
    assert state.updated_at_unix_ms == 400
    assert state.source_command_ids == {"cmd-1", "cmd-2", "cmd-3", "cmd-4"}


def test_inventory_failure_folds_to_failed_without_payment():
    state = d.fold(ORDER, stream(*INVENTORY_FAILURE))
    assert state.status is d.OrderStatus.FAILED
    assert state.payment_id is None
    assert state.reservation_id is None
    assert state.reason == "card-declined"  # OrderFailedEvent's reason is the last word


def test_payment_failure_folds_to_failed_keeping_the_released_reservation():
    state = d.fold(ORDER, stream(*PAYMENT_FAILURE))
    assert state.status is d.OrderStatus.FAILED
    assert state.reservation_id == d.reservation_id(ORDER)
    assert state.payment_id is None
    assert state.reason == "card-declined"


@pytest.mark.parametrize(
    ("kinds", "phase", "status"),
    [
        (SUCCESS[:1], d.Phase.CREATED, d.OrderStatus.CREATED),
        (SUCCESS[:2], d.Phase.RESERVED, d.OrderStatus.INVENTORY_RESERVED),
        (SUCCESS[:3], d.Phase.PAYMENT_AUTHORIZED, d.OrderStatus.PAYMENT_AUTHORIZED),
        (SUCCESS, d.Phase.CONFIRMED, d.OrderStatus.CONFIRMED),
        # Failed only with OrderFailedEvent: compensation in progress keeps the milestone.
        (INVENTORY_FAILURE[:2], d.Phase.RESERVATION_FAILED, d.OrderStatus.CREATED),
        (PAYMENT_FAILURE[:3], d.Phase.PAYMENT_FAILED, d.OrderStatus.INVENTORY_RESERVED),
        (PAYMENT_FAILURE[:4], d.Phase.RELEASED, d.OrderStatus.INVENTORY_RESERVED),
        (PAYMENT_FAILURE, d.Phase.FAILED, d.OrderStatus.FAILED),
    ],
)
def test_every_prefix_has_its_phase_and_status(kinds, phase, status):
    state = d.fold(ORDER, stream(*kinds))
    assert state.phase is phase
    assert state.status is status
    assert state.terminal is status.terminal


def test_the_transition_table_has_exactly_the_three_orders():
    """Walk TRANSITIONS from NEW: its complete paths are the three event orders, no other."""
    paths = []

    def walk(phase: d.Phase, path: tuple[type, ...]) -> None:
        nexts = [(event, to) for (at, event), to in d.TRANSITIONS.items() if at is phase]
        if not nexts:
            paths.append(path)
        for event, to in nexts:
            walk(to, (*path, event))

    walk(d.Phase.NEW, ())
    assert sorted(paths, key=len) == sorted([SUCCESS, INVENTORY_FAILURE, PAYMENT_FAILURE], key=len)
    assert set(d.STATUS_OF) == set(d.Phase)


@pytest.mark.parametrize(
    ("kinds", "message"),
    [
        ((d.InventoryReservedEvent,), "cannot follow phase 'new'"),
        ((d.OrderStartedEvent, d.OrderStartedEvent), "cannot follow phase 'created'"),
        ((d.OrderStartedEvent, d.PaymentAuthorizedEvent), "PaymentAuthorizedEvent cannot follow"),
        ((d.OrderStartedEvent, d.OrderConfirmedEvent), "cannot follow"),
        ((d.OrderStartedEvent, d.InventoryReservationFailedEvent, d.PaymentAuthorizedEvent),
         "cannot follow phase 'reservation-failed'"),
        ((*INVENTORY_FAILURE[:2], d.InventoryReleasedEvent), "cannot follow"),
        ((*PAYMENT_FAILURE[:3], d.OrderFailedEvent), "cannot follow phase 'payment-failed'"),
        ((*SUCCESS, d.OrderFailedEvent), "cannot follow phase 'confirmed'"),
        ((*PAYMENT_FAILURE, d.OrderConfirmedEvent), "cannot follow phase 'failed'"),
    ],
)
def test_events_out_of_order_are_a_corrupt_stream(kinds, message):
    with pytest.raises(d.CorruptStream, match=message):
        d.fold(ORDER, stream(*kinds))


def test_version_gaps_and_repeats_are_a_corrupt_stream():
    records = stream(*SUCCESS)
    with pytest.raises(d.CorruptStream, match="expected version 2"):
        d.fold(ORDER, [records[0], records[2]])
    with pytest.raises(d.CorruptStream, match="expected version 2"):
        d.fold(ORDER, [records[0], records[0]])
    with pytest.raises(d.CorruptStream, match="expected version 1"):
        d.fold(ORDER, records[1:])


def test_an_event_of_another_order_is_a_corrupt_stream():
    records = stream(*SUCCESS[:1])
    other = d.Recorded(version=2, event=ev(d.InventoryReservedEvent, 2, order_id="order-2"),
                       source_command_id=None, created_at_unix_ms=0)
    with pytest.raises(d.CorruptStream, match="belongs to order 'order-2'"):
        d.fold(ORDER, [*records, other])


def test_releasing_another_reservation_is_a_corrupt_stream():
    records = stream(*PAYMENT_FAILURE[:3])
    release = d.Recorded(version=4, event=ev(d.InventoryReleasedEvent, 4, reservation_id="x"),
                         source_command_id=None, created_at_unix_ms=0)
    with pytest.raises(d.CorruptStream, match="released reservation 'x'"):
        d.fold(ORDER, [*records, release])


def test_an_append_without_a_source_command_id_adds_none():
    records = [attrs.evolve(r, source_command_id=None) for r in stream(*SUCCESS[:2])]
    assert d.fold(ORDER, records).source_command_ids == frozenset()


def test_folding_is_replay_of_apply():
    records = stream(*PAYMENT_FAILURE)
    state = d.OrderAggregate.empty(ORDER)
    for record in records:
        state = d.apply(state, record)
    assert state == d.fold(ORDER, records)
