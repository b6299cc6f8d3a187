"""Execution-lane values: lane kinds, bounds, tickets and statistics.

Theory of operation
-------------------
These are the values :mod:`zlink_trio.core.lanes` keeps its books with; they
sit below it, and ``lanes`` re-exports them (the lane imports them, never the
other way round). :class:`LaneKind` names the two lanes of a Spot,
*application* and *lifecycle*. :class:`LaneBounds` is one lane's mandatory
count and byte bound -- there is no unbounded lane, so anything but a positive
``int`` raises :class:`InvalidConfiguration` -- and :data:`DEFAULT_APPLICATION_BOUNDS`
and :data:`DEFAULT_LIFECYCLE_BOUNDS` are the defaults (1,024 items / 64 MiB and
128 items / 4 MiB). A work item reserves its payload size plus
:data:`PER_ITEM_BYTES` (256): the fixed cost of its envelope, metadata and queue
node, so an empty payload still counts.

A :class:`Ticket` is the proof of one admitted item's reservation, handed back
at the item's terminal completion; :class:`LaneStatistics` is a snapshot of one
lane's usage (:func:`idle_lane_statistics` that of a lane holding nothing).

This module is sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, NamedTuple

import attrs

from zlink_trio.core.errors import InvalidConfiguration

__all__ = (
    "DEFAULT_APPLICATION_BOUNDS",
    "DEFAULT_LIFECYCLE_BOUNDS",
    "PER_ITEM_BYTES",
    "LaneBounds",
    "LaneKind",
    "LaneStatistics",
    "Ticket",
    "idle_lane_statistics",
)

#: Fixed retained cost, in bytes, of one work item on top of its payload.
PER_ITEM_BYTES: Final = 256

_MiB: Final = 1024 * 1024


class LaneKind(StrEnum):
    """The two execution lanes of a Spot; the value is what ``CapacityExceeded.lane`` holds."""

    #: Application messages from callers.
    APPLICATION = "application"
    #: Framework lifecycle work (close, idle eviction, relocation steps).
    LIFECYCLE = "lifecycle"


def _positive_int(instance: LaneBounds, attribute: attrs.Attribute[int], value: int) -> None:
    # bool is an int subclass, and float('inf') or None would mean "unbounded".
    if type(value) is not int or value <= 0:
        raise InvalidConfiguration(
            f"lane bound {attribute.name} must be a positive int, got {value!r}; "
            "every execution lane needs a finite count and byte bound (no lane is "
            "unbounded), so pass a whole number greater than 0"
        )


@attrs.frozen
class LaneBounds:
    """The count and byte bound of one execution lane.

    Both bounds are mandatory positive ``int``\\ s: ``0``, negative values,
    ``None``, floats (including ``inf``) and ``bool`` raise
    :class:`InvalidConfiguration`, because an unbounded lane is forbidden.
    """

    #: Largest number of work items holding a reservation (queued + running).
    max_items: int = attrs.field(validator=_positive_int)
    #: Largest sum of reservations (payload bytes + PER_ITEM_BYTES each).
    max_bytes: int = attrs.field(validator=_positive_int)


#: Default bounds of the application lane: 1,024 items / 64 MiB.
DEFAULT_APPLICATION_BOUNDS: Final = LaneBounds(1024, 64 * _MiB)
#: Default bounds of the lifecycle lane: 128 items / 4 MiB.
DEFAULT_LIFECYCLE_BOUNDS: Final = LaneBounds(128, 4 * _MiB)


class _TicketFields(NamedTuple):
    #: The lane that issued the ticket.
    lane: LaneKind
    #: Bytes this item reserves (payload + PER_ITEM_BYTES).
    reserved_bytes: int


class Ticket(_TicketFields):
    """Proof of one admitted work item's reservation; hand it back to ``Lane.complete``.

    ``lane`` is the lane that issued it, ``reserved_bytes`` the bytes the item reserves
    (payload + PER_ITEM_BYTES). Tickets compare by identity: every admission issues a
    distinct ticket. Immutable; a ``NamedTuple`` (the lane builds it with ``tuple.__new__``)
    because every admission makes one, and an attrs frozen class costs several times as much.
    """

    __slots__ = ()

    # Identity, not the tuple's value: two items of the same size are two reservations.
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__


@attrs.frozen(kw_only=True)
class LaneStatistics:
    """A snapshot of one lane's usage (``items == queued + running``)."""

    lane: LaneKind
    bounds: LaneBounds
    #: Work items holding a reservation.
    items: int
    #: Sum of the outstanding reservations.
    bytes: int
    #: Items admitted and not yet popped.
    queued: int
    #: Items popped and not yet completed.
    running: int


def idle_lane_statistics(kind: LaneKind, bounds: LaneBounds) -> LaneStatistics:
    """The snapshot of a lane that holds nothing (one not built yet)."""
    return LaneStatistics(lane=kind, bounds=bounds, items=0, bytes=0, queued=0, running=0)
