"""OrderWorkflow's domain: the order rules, pure -- no framework, HTTP, store or codec.

It imports only the standard library and ``attrs`` (``tests/samples/shoppingmall/
test_order_domain_imports.py`` walks every module's imports). The application
replays the stream, asks the domain what to do, calls the modules, appends and
projects; the domain only decides. Modules, bottom up:

- ``values`` -- ``OrderStatus`` and ``OrderLine``, the domain's own, named like the
  contracts'
- ``errors`` -- ``CorruptStream`` (a stream the fold refuses), ``InvalidCommand``
- ``ids``    -- deterministic ReservationId, PaymentId, EventId and SourceCommandIds
- ``events`` -- the order's eight events and ``Recorded``, an event with its envelope facts
- ``fold``   -- ``OrderAggregate``, the ``TRANSITIONS`` table, ``apply`` and ``fold``
- ``steps``  -- ``next_step`` and ``record``: the next step, and what its outcome appends
- ``start``  -- ``start``: the OrderStartedEvent once, whichever duplicate comes first

Everything listed in ``__all__`` is importable from this package.
"""

from __future__ import annotations

from .errors import CorruptStream, InvalidCommand, OrderRuleError
from .events import (
    InventoryReleasedEvent,
    InventoryReservationFailedEvent,
    InventoryReservedEvent,
    OrderConfirmedEvent,
    OrderEvent,
    OrderFailedEvent,
    OrderStartedEvent,
    PaymentAuthorizedEvent,
    PaymentFailedEvent,
    Recorded,
)
from .fold import STATUS_OF, TRANSITIONS, OrderAggregate, Phase, apply, fold
from .ids import (
    Stage,
    event_id,
    payment_id,
    reservation_id,
    stage_command_id,
    start_command_id,
)
from .start import AlreadyStarted, StartOrder, start
from .steps import (
    INVENTORY_REFUSED,
    PAYMENT_REFUSED,
    Append,
    AuthorizePayment,
    ConfirmOrder,
    Effect,
    EffectResult,
    FailOrder,
    Finished,
    Halt,
    NotStarted,
    ReleaseInventory,
    ReserveInventory,
    Step,
    advance,
    next_step,
    record,
)
from .values import OrderLine, OrderStatus

__all__ = (
    "INVENTORY_REFUSED", "PAYMENT_REFUSED", "STATUS_OF", "TRANSITIONS", "AlreadyStarted", "Append",
    "AuthorizePayment", "ConfirmOrder", "CorruptStream", "Effect", "EffectResult", "FailOrder",
    "Finished", "Halt", "InvalidCommand", "InventoryReleasedEvent",
    "InventoryReservationFailedEvent", "InventoryReservedEvent", "NotStarted", "OrderAggregate",
    "OrderConfirmedEvent", "OrderEvent", "OrderFailedEvent", "OrderLine", "OrderRuleError",
    "OrderStartedEvent", "OrderStatus", "PaymentAuthorizedEvent", "PaymentFailedEvent", "Phase",
    "Recorded", "ReleaseInventory", "ReserveInventory", "Stage", "StartOrder", "Step", "advance",
    "apply", "event_id", "fold", "next_step", "payment_id", "record", "reservation_id",
    "stage_command_id", "start", "start_command_id",
)
