"""The domain's own types stay name-for-name the contracts', so the application maps by name.

The domain owns its events, line and status (wire types stay out of it);
the application turns a domain event into its contract (and an aggregate into
``OrderState``) field by field. These tests fail the moment the two drift.
"""

from __future__ import annotations

import typing

import attrs
import pytest

from zlink_trio.samples.shoppingmall.server.order_workflow import domain as d
from zlink_trio.samples.shoppingmall.shared import contracts as c

DOMAIN_EVENTS = typing.get_args(d.OrderEvent)


def _hints(cl: type) -> dict[str, str]:
    """Field name -> annotation, with each package's own classes named alike."""
    return {
        name: str(hint).replace(d.OrderLine.__module__, "X").replace(c.__name__, "X")
        for name, hint in typing.get_type_hints(cl).items()
        if name in attrs.fields_dict(cl)
    }


def test_the_domain_has_the_contracts_events_in_the_same_order():
    assert [cl.__name__ for cl in DOMAIN_EVENTS] == list(c.EVENT_TYPES)


@pytest.mark.parametrize("event", DOMAIN_EVENTS, ids=lambda cl: cl.__name__)
def test_each_event_has_the_contracts_fields_and_types(event: type) -> None:
    contract = c.EVENT_TYPES[event.__name__]
    assert [f.name for f in attrs.fields(event)] == [f.name for f in attrs.fields(contract)]
    assert _hints(event) == _hints(contract)


def test_order_line_and_status_match():
    names = [f.name for f in attrs.fields(d.OrderLine)]
    assert names == [f.name for f in attrs.fields(c.OrderLine)]
    assert [(s.name, s.value) for s in d.OrderStatus] == [(s.name, s.value) for s in c.OrderStatus]


def test_the_aggregate_has_every_order_state_field():
    aggregate = {f.name for f in attrs.fields(d.OrderAggregate)} | {"status"}
    assert {f.name for f in attrs.fields(c.OrderState)} <= aggregate


def test_mapping_by_name_round_trips_an_event():
    line = d.OrderLine("sku-1", 2)
    event = d.OrderStartedEvent(event_id="e", order_id="o", cart_id="c", shipping_address_id="a",
                                lines=(line,), amount=1.5, currency="KRW", source_command_id="s")
    values = attrs.asdict(event, recurse=False)
    values["lines"] = tuple(c.OrderLine(x.sku, x.quantity) for x in event.lines)
    contract = c.OrderStartedEvent(**values)
    assert contract.lines == (c.OrderLine("sku-1", 2),)
    assert attrs.asdict(contract) == attrs.asdict(event)
