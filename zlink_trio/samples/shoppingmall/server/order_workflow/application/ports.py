"""The ports the order use cases drive: the stream, the read model, the modules, the clock.

The application speaks the domain's values (``Recorded``, ``Append``,
``OrderAggregate``, the steps) and nothing of the framework, the codec or a
database; the infrastructure adapts the OrderEventStore, the
OrderReadModelStore, the CommerceStateStore and the Inventory/Payment modules
to these protocols (``infrastructure.ports_adapters``), and tests may hand in
their own.

Errors a port raises and the use cases handle: :class:`StreamConflict` (an
append whose expected version is no longer the stream's: replay and decide
again). Anything else -- the store is down, an argument is refused --
propagates to the caller of the use case, and the request that ran it ends
with that error (never a made-up success: a timeout or failure is not turned into one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import attrs

if TYPE_CHECKING:
    from ..domain import (
        Append,
        AuthorizePayment,
        EffectResult,
        OrderAggregate,
        Recorded,
        ReleaseInventory,
        ReserveInventory,
    )

__all__ = (
    "AppendOutcome",
    "Clock",
    "Effects",
    "Idempotency",
    "OrderStream",
    "Projection",
    "StreamConflict",
)


class StreamConflict(Exception):
    """The stream moved past the append's expected version; nothing was written."""


@attrs.frozen(kw_only=True)
class AppendOutcome:
    """What an append did: the records it wrote, or -- ``deduplicated`` -- nothing.

    A deduplicated append found its SourceCommandId in the stream already (an
    earlier attempt of the same command committed); the use case then replays.
    """

    records: tuple[Recorded, ...]
    deduplicated: bool


class OrderStream(Protocol):
    """One OrderId's event stream in the OrderEventStore."""

    async def read(self, order_id: str, *, after_version: int = 0) -> tuple[Recorded, ...]:
        """The records above ``after_version``, in version order."""
        ...

    async def append(self, append: Append, *, now_unix_ms: int) -> AppendOutcome:
        """Append ``append.events`` at ``append.expected_version`` with its SourceCommandId.

        Raises :class:`StreamConflict` when the stream is elsewhere (nothing written).
        """
        ...


class Projection(Protocol):
    """The OrderReadModelStore, as the use cases write it."""

    async def put(self, state: OrderAggregate) -> None:
        """Store ``state``'s OrderState, tagged with ``state.version`` (never over a newer one)."""
        ...


class Effects(Protocol):
    """The external modules: each returns the first result for its deterministic ID."""

    async def reserve(self, step: ReserveInventory) -> EffectResult:
        """ReserveInventoryReq for the step's ReservationId and lines."""
        ...

    async def authorize(self, step: AuthorizePayment, *, payment_method_id: str | None,
                        source_command_ids: frozenset[str]) -> EffectResult:
        """AuthorizePaymentReq for the step's PaymentId.

        ``payment_method_id`` is the start command's when this incarnation ran the
        start; ``None`` otherwise, and the adapter finds it from ``step.cart_id`` or
        the start's SourceCommandId among ``source_command_ids`` (the stream does not
        hold it: the contract's OrderStartedEvent has no such field).
        """
        ...

    async def release(self, step: ReleaseInventory) -> EffectResult:
        """ReleaseInventoryReq for the reservation the stream recorded."""
        ...


class Idempotency(Protocol):
    """CommerceStateStore's IdempotencyKey -> OrderId mapping, as the workflow moves it."""

    async def mark_started(self, idempotency_key: str, order_id: str) -> None:
        """Move the key's mapping pending -> started (a no-op when it already is, or has none)."""
        ...


class Clock(Protocol):
    """Wall-clock milliseconds for the envelopes and the terminal events' stamps."""

    def __call__(self) -> int:
        """Milliseconds since the Unix epoch."""
        ...
