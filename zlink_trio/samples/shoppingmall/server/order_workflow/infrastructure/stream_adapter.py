"""The OrderEventStore as the application's OrderStream: domain events <-> stored JSON.

An event is stored as its contract class (``shared.contracts``), encoded
by the framework's typed JSON codec (``zl.MessageCodec.to_json``: camelCase,
no per-message registration), under ``eventType`` = the class name. The
domain's events carry the contracts' names field for field
(``tests/samples/shoppingmall/test_order_domain_matches_contracts.py``), so
each direction is a copy by name; only the lines change class.

The store's :class:`ExpectedVersionConflict` becomes the application's
:class:`StreamConflict`; everything else propagates.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

from zlink_trio.samples.shoppingmall.server.order_workflow import domain
from zlink_trio.samples.shoppingmall.server.order_workflow.application import (
    AppendOutcome,
    StreamConflict,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_records import (
    ExpectedVersionConflict,
    NewEvent,
    StoredEvent,
)
from zlink_trio.samples.shoppingmall.shared import contracts

if TYPE_CHECKING:
    import zlink_trio as zl
    from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
        OrderEventStore,
    )

__all__ = ("EventStoreStream", "domain_event_of", "recorded_of", "stored_payload_of")

#: The domain's event classes by their (and the contracts') class name.
_DOMAIN_EVENTS: Final[dict[str, type[Any]]] = {
    cl.__name__: cl for cl in (
        domain.OrderStartedEvent, domain.InventoryReservedEvent,
        domain.InventoryReservationFailedEvent, domain.PaymentAuthorizedEvent,
        domain.PaymentFailedEvent, domain.InventoryReleasedEvent, domain.OrderConfirmedEvent,
        domain.OrderFailedEvent)
}


def _fields(event: Any) -> dict[str, Any]:
    return {a.name: getattr(event, a.name) for a in attrs.fields(type(event))}


def stored_payload_of(event: domain.OrderEvent, codec: zl.MessageCodec) -> NewEvent:
    """The domain ``event`` as the store keeps it (its contract class's JSON)."""
    name = type(event).__name__
    fields = _fields(event)
    if "lines" in fields:
        fields["lines"] = tuple(contracts.OrderLine(line.sku, line.quantity)
                                for line in fields["lines"])
    wire = contracts.EVENT_TYPES[name](**fields)
    return NewEvent(event_type=name, payload=codec.to_json(wire).decode(),
                    event_id=event.event_id)


def domain_event_of(stored: StoredEvent, codec: zl.MessageCodec) -> domain.OrderEvent:
    """The domain event ``stored`` holds; ``domain.CorruptStream`` for an unknown type."""
    contract = contracts.EVENT_TYPES.get(stored.event_type)
    if contract is None:
        raise domain.CorruptStream(f"order {stored.order_id!r} version {stored.version}: "
                                   f"unknown event type {stored.event_type!r}")
    fields = _fields(codec.from_json(stored.payload.encode(), contract))
    if "lines" in fields:
        fields["lines"] = tuple(domain.OrderLine(line.sku, line.quantity)
                                for line in fields["lines"])
    event: domain.OrderEvent = _DOMAIN_EVENTS[stored.event_type](**fields)
    return event


def recorded_of(stored: StoredEvent, codec: zl.MessageCodec) -> domain.Recorded:
    """``stored`` as the fold reads it: the event and its envelope facts."""
    return domain.Recorded(version=stored.version, event=domain_event_of(stored, codec),
                           source_command_id=stored.source_command_id,
                           created_at_unix_ms=stored.created_at_unix_ms)


class EventStoreStream:
    """:class:`~..application.OrderStream` over an :class:`OrderEventStore`."""

    def __init__(self, store: OrderEventStore, codec: zl.MessageCodec) -> None:
        self._store = store
        self._codec = codec

    async def read(self, order_id: str, *, after_version: int = 0,
                   ) -> tuple[domain.Recorded, ...]:
        """See :meth:`OrderStream.read`."""
        stored = await self._store.read(order_id, after_version=after_version)
        return tuple(recorded_of(event, self._codec) for event in stored)

    async def append(self, append: domain.Append, *, now_unix_ms: int) -> AppendOutcome:
        """See :meth:`OrderStream.append`."""
        events = [attrs.evolve(stored_payload_of(event, self._codec),
                               created_at_unix_ms=now_unix_ms) for event in append.events]
        try:
            result = await self._store.append(append.order_id, append.expected_version, events,
                                              source_command_id=append.source_command_id)
        except ExpectedVersionConflict as exc:
            raise StreamConflict(str(exc)) from exc
        return AppendOutcome(records=tuple(recorded_of(e, self._codec) for e in result.events),
                             deduplicated=result.deduplicated)
