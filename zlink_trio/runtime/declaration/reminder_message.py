"""``Reminder``: the message a due durable reminder delivers to its Spot (docs/reminders.md).

A Spot type that declares a handler taking :class:`Reminder` may set reminders
(``ctx.remind``); each due one arrives as a request with this message, through the same
path as any call with Instance intent (a User Spot's: existing only). Delivery is at
least once: ``due`` names the due time it was for, so a handler can tell a redelivery
(the same ``name`` and ``due`` again) from the next one.
"""

from typing import ClassVar

import attrs

__all__ = ("Reminder",)


@attrs.frozen(kw_only=True)
class Reminder:
    """A reminder, as set (``ctx.remind`` returns it) and as delivered."""

    __zlink_type__: ClassVar[str] = "zlink_trio.Reminder"

    #: The name it was set under (one reminder per name per Spot).
    name: str
    #: The due time this delivery is for, on the store's clock (``ctx.now()``).
    due: float
    #: Seconds between two dues of a repeating reminder; ``None``: it fires once.
    period: float | None = None
