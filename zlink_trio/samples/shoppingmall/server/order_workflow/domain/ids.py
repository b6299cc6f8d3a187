"""Deterministic identifiers, all derived from the OrderId, so a duplicate converges.

An external effect retried with the same ID converges on its first result
(the modules promise that), and an append retried with the same
SourceCommandId is recorded once (the OrderEventStore promises that). Both
hold only if a retry computes the *same* ID: after a restart, a relocation or
a duplicate command. So no ID here comes from a clock or a random source;
each is a pure function of the OrderId and the stage.

Every function is injective in its arguments (a fixed suffix after the
OrderId, an integer last), so two orders, two stages or two versions never
share an ID.
"""

from __future__ import annotations

import enum

__all__ = (
    "Stage",
    "event_id",
    "payment_id",
    "reservation_id",
    "stage_command_id",
    "start_command_id",
)


class Stage(enum.StrEnum):
    """The workflow's steps after the start: each records its outcome at most once."""

    RESERVE_INVENTORY = "reserve-inventory"
    AUTHORIZE_PAYMENT = "authorize-payment"
    RELEASE_INVENTORY = "release-inventory"
    CONFIRM = "confirm"
    FAIL = "fail"


def reservation_id(order_id: str) -> str:
    """The ReservationId of the order's one inventory reservation."""
    return f"{order_id}:reservation"


def payment_id(order_id: str) -> str:
    """The PaymentId of the order's one payment authorization."""
    return f"{order_id}:payment"


def stage_command_id(order_id: str, stage: Stage) -> str:
    """The SourceCommandId of the append that records ``stage``'s outcome for the order."""
    return f"{order_id}:{stage.value}"


def start_command_id(idempotency_key: str) -> str:
    """The SourceCommandId of the start, the same for every retry of one IdempotencyKey.

    Two CommerceApi processes starting the same key send the same ID, so the
    OrderStartedEvent is recorded once whichever arrives first.
    """
    return f"start:{idempotency_key}"


def event_id(order_id: str, version: int) -> str:
    """The EventId of the event recorded at ``version`` in the order's stream."""
    return f"{order_id}:event:{version}"
