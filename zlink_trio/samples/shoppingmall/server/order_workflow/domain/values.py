"""The order's own values: its status and a cart line.

The domain owns these rather than importing ``shared.contracts``: the domain
stays free of wire types, and the contracts may gain wire-only concerns
(names, optional keys) the rules should not see. The names and values are the
contracts' on purpose -- ``OrderStatus`` is a ``StrEnum`` with the contract's values,
``OrderLine`` has the contract's fields -- so the application maps one to the other by
name (a test checks they stay equal).
"""

from __future__ import annotations

import enum

import attrs

__all__ = ("OrderLine", "OrderStatus")


class OrderStatus(enum.StrEnum):
    """An order's status. Confirmed and Failed are terminal."""

    CREATED = "Created"
    INVENTORY_RESERVED = "InventoryReserved"
    PAYMENT_AUTHORIZED = "PaymentAuthorized"
    CONFIRMED = "Confirmed"
    FAILED = "Failed"

    @property
    def terminal(self) -> bool:
        """Whether no later event may follow (Confirmed, Failed)."""
        return self in (OrderStatus.CONFIRMED, OrderStatus.FAILED)


def _non_empty(instance: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{attribute.name} must be a non-empty string, got {value!r}")


def _positive(instance: object, attribute: attrs.Attribute[int], value: int) -> None:
    if type(value) is not int or value < 1:
        raise ValueError(f"{attribute.name} must be a positive int, got {value!r}")


@attrs.frozen
class OrderLine:
    """One cart line: a non-empty SKU and a positive quantity (else ``ValueError``)."""

    sku: str = attrs.field(validator=_non_empty)
    quantity: int = attrs.field(validator=_positive)
