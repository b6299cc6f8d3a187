"""Execution-lane accounting: two bounded FIFO lanes per Spot.

Theory of operation
-------------------
A Spot runs one handler turn at a time. Work waiting for (or running in) a
turn sits in one of two FIFO lanes: *application* (messages from callers, timer
ticks) and *lifecycle* (the framework's own requests the Spot's task takes up at a
turn boundary: a relocation's seal, ``ctx.close()``'s BeginClose; docs/decisions.md,
"The lifecycle lane carries lifecycle work").
Each lane has two bounds, both mandatory (no execution queue is unbounded):

* a **count** bound — how many work items hold a reservation, and
* a **byte** bound — how many bytes those reservations add up to.

A reservation is the item's payload size plus :data:`PER_ITEM_BYTES` (256), so
an empty payload still counts. Admission checks both bounds and whichever would be
exceeded first refuses the item with :class:`~zlink_trio.core.errors.CapacityExceeded`
whose ``lane`` names the lane. A single axis could be gamed through the other: count
alone lets a few huge payloads exhaust memory, bytes alone lets empty payloads pile up.

The reservation is held from admission until the handler's *terminal
completion*, not until dequeue: :meth:`Lane.pop` hands the item and its
:class:`Ticket` to the runtime, the item then counts as *running*, and only
:meth:`Lane.complete` returns its bytes and its slot. So a Spot whose handler
is slow keeps its running work on the books and the bound measures everything
the Spot holds, not just what is waiting.

:meth:`Lane.push_front` restores the first message of a cold activation to the
head of the application lane (the step 11 barrier of
``statecharts.cold_activation``). That record was accepted before the lane
existed (with the activation envelope, and durably in the activation inbox), so
refusing it now would drop an accepted operation that must run first. It
therefore **bypasses the bounds**: it always succeeds and its reservation is
counted, so the lane may exceed its bounds by that single record until it
completes; later admissions see the usage and are refused accordingly. It is
allowed only before the lane's first :meth:`~Lane.pop` and only once, because
anything else would break "the first message is processed first".

:class:`Lanes` holds both lanes of one Spot. :meth:`Lanes.next_turn` takes
lifecycle work before application work (strict priority): lifecycle work is
what changes whether application work may run at all (a close seals admission,
a relocation seals the unit), so it must not wait behind up to 1,024 queued
application messages; and because the lifecycle lane is small (128 items) and
fed only by the framework, it cannot starve the application lane in practice.
Running one turn at a time is the runtime's job; this module only decides
what runs next and keeps the books.

The values it keeps its books with (:class:`LaneKind`, :class:`LaneBounds` and
the defaults, :class:`Ticket`, :class:`LaneStatistics`) live one layer down in
:mod:`zlink_trio.core._lane_values`, re-exported here. Sans-IO: no trio, no clock, no I/O.
"""

from __future__ import annotations

from collections import deque
from typing import Final, Generic, NamedTuple, TypeVar

import attrs

# Imported by name: the hot methods below read these as this module's globals.
from zlink_trio.core._lane_values import (
    DEFAULT_APPLICATION_BOUNDS,
    DEFAULT_LIFECYCLE_BOUNDS,
    PER_ITEM_BYTES,
    LaneBounds,
    LaneKind,
    LaneStatistics,
    Ticket,
    idle_lane_statistics,
)
from zlink_trio.core.errors import CapacityExceeded, InvalidConfiguration, InvalidOperation

__all__ = (
    "DEFAULT_APPLICATION_BOUNDS",
    "DEFAULT_LIFECYCLE_BOUNDS",
    "PER_ITEM_BYTES",
    "Lane",
    "LaneBounds",
    "LaneKind",
    "LaneStatistics",
    "Lanes",
    "LanesStatistics",
    "Ticket",
    "Turn",
)

T = TypeVar("T")

# Building a Ticket or a Turn skips the NamedTuple's Python-level ``__new__``.
_new_tuple: Final = tuple.__new__


#: ``Lane._front`` once a restored head is queued / once the lane ran a turn.
_HAS_HEAD: Final = "has a restored head"
_RAN_A_TURN: Final = "ran a turn"


def _check_payload_size(payload_size: int) -> None:
    if type(payload_size) is not int or payload_size < 0:
        raise InvalidOperation(
            f"payload_size must be a non-negative int (the encoded payload length in "
            f"bytes), got {payload_size!r}"
        )


class Lane(Generic[T]):
    """One bounded FIFO execution lane holding reservations until terminal completion.

    Not thread-safe; the runtime drives it from one task (sans-IO).
    """

    __slots__ = ("_bounds", "_bytes", "_front", "_kind", "_queue", "_running")

    def __init__(self, kind: LaneKind, bounds: LaneBounds) -> None:
        # (a LaneKind as it is: calling the enum is most of a lane's construction)
        self._kind: Final = kind if type(kind) is LaneKind else LaneKind(kind)
        if not isinstance(bounds, LaneBounds):
            raise InvalidConfiguration(
                f"bounds must be a LaneBounds, got {type(bounds).__name__}; "
                "build one with LaneBounds(max_items, max_bytes)"
            )
        self._bounds: Final = bounds
        # Built on first use, dropped when empty: an idle Spot's lanes hold no container
        # (an empty deque is ~760 B, an empty set ~220 B, docs/performance.md); one running
        # item (a host runs one turn at a time) is its Ticket itself, a set only for more.
        self._queue: deque[tuple[T, Ticket]] | None = None
        self._running: set[Ticket] | Ticket | None = None
        self._bytes = 0
        #: Why :meth:`push_front` may not run any more (``None`` while it may): one slot
        #: for both reasons, since every resident Spot has a lane.
        self._front: str | None = None

    @property
    def kind(self) -> LaneKind:
        """Which lane this is."""
        return self._kind

    @property
    def bounds(self) -> LaneBounds:
        """The lane's count and byte bounds."""
        return self._bounds

    @property
    def queued(self) -> int:
        """How many items wait in the lane (not yet popped). Never raises."""
        return len(self._queue) if self._queue is not None else 0

    def _tail(self) -> deque[tuple[T, Ticket]]:
        queue = self._queue
        if queue is None:
            queue = self._queue = deque()
        return queue

    def admit(self, item: T, payload_size: int) -> Ticket:
        """Queue ``item`` at the tail, reserving ``payload_size + PER_ITEM_BYTES`` bytes.

        Raises :class:`CapacityExceeded` (``lane`` = this lane's name) when one
        more item would exceed the count bound or the reservation would exceed
        the byte bound; nothing changes then. Raises :class:`InvalidOperation`
        for a negative or non-int ``payload_size``. Not idempotent: admitting
        the same object twice queues it twice.
        """
        if type(payload_size) is not int or payload_size < 0:
            _check_payload_size(payload_size)  # (raises)
        reservation = payload_size + PER_ITEM_BYTES
        queue, running, bounds = self._queue, self._running, self._bounds
        items = ((len(queue) if queue is not None else 0)
                 + (0 if running is None else 1 if type(running) is Ticket else len(running)))
        count_hit = items + 1 > bounds.max_items
        bytes_hit = self._bytes + reservation > bounds.max_bytes
        if count_hit or bytes_hit:
            raise CapacityExceeded(
                self._refusal(count_hit, bytes_hit, reservation, items), lane=self._kind.value
            )
        ticket: Ticket = _new_tuple(Ticket, (self._kind, reservation))
        if queue is None:
            queue = self._queue = deque()
        queue.append((item, ticket))
        self._bytes += reservation
        return ticket

    def _refusal(self, count_hit: bool, bytes_hit: bool, reservation: int, items: int) -> str:
        bounds = self._bounds
        hit = []
        if count_hit:
            hit.append(f"its count bound of {bounds.max_items} items")
        if bytes_hit:
            hit.append(f"its byte bound of {bounds.max_bytes} bytes")
        return (
            f"the {self._kind.value} lane of this Spot is full: one more item reserving "
            f"{reservation} bytes ({reservation - PER_ITEM_BYTES} payload + {PER_ITEM_BYTES} "
            f"per-item cost) would exceed {' and '.join(hit)} (in use: {items} items, "
            f"{self._bytes} bytes); retry after the Spot drains its backlog, send smaller "
            f"or fewer messages, or raise the {self._kind.value} lane bounds"
        )

    def push_front(self, item: T, payload_size: int) -> Ticket:
        """Restore the first record of a cold activation to the head of the lane.

        Bypasses both bounds (the record was accepted before the lane existed)
        but counts its reservation, so usage may exceed the bounds by this one
        record. Raises :class:`InvalidOperation` if the lane already popped an
        item or already has a restored head (the first record must run first
        and there is only one), or for a bad ``payload_size``.
        """
        _check_payload_size(payload_size)
        if self._front is not None:
            raise InvalidOperation(
                f"push_front on the {self._kind.value} lane is only for restoring the first "
                f"record of a cold activation, once, before the first turn runs; this lane "
                f"already {self._front}; use admit() for later work"
            )
        reservation = payload_size + PER_ITEM_BYTES
        ticket = _new_tuple(Ticket, (self._kind, reservation))
        self._tail().appendleft((item, ticket))
        self._bytes += reservation
        self._front = _HAS_HEAD
        return ticket

    def append_unbounded(self, item: T, payload_size: int) -> Ticket:
        """Queue ``item`` at the tail without checking the bounds (its reservation counts).

        For work that was accepted elsewhere and moves here whole: a relocation's held
        ingress returning to the source queue, or the captured queue restored at the
        target (a move loses no accepted message, so neither is refused). Raises
        :class:`InvalidOperation` for a bad ``payload_size``.
        """
        _check_payload_size(payload_size)
        reservation = payload_size + PER_ITEM_BYTES
        ticket = _new_tuple(Ticket, (self._kind, reservation))
        self._tail().append((item, ticket))
        self._bytes += reservation
        return ticket

    def queued_items(self) -> list[T]:
        """The queued (not yet popped) items, oldest first; the lane is unchanged."""
        return [item for item, _ in self._queue or ()]

    def take_queued(self) -> list[T]:
        """Remove every queued item, oldest first, returning their reservations.

        For work that leaves this lane whole (a committed relocation moved it to the
        target); running items are not touched.
        """
        queue = self._queue or ()
        taken = [item for item, _ in queue]
        self._bytes -= sum(ticket.reserved_bytes for _, ticket in queue)
        self._queue = None
        return taken

    def pop(self) -> tuple[T, Ticket] | None:
        """Take the oldest queued item (FIFO), or ``None`` if nothing is queued.

        The item becomes *running*: its reservation stays held until
        :meth:`complete` is called with the returned ticket. Never raises.
        """
        queue = self._queue
        if not queue:
            return None
        entry = queue.popleft()
        if not queue:
            self._queue = None
        running = self._running
        if running is None:
            self._running = entry[1]
        elif isinstance(running, set):
            running.add(entry[1])
        else:
            self._running = {running, entry[1]}
        self._front = _RAN_A_TURN
        return entry

    def complete(self, ticket: Ticket) -> None:
        """Return the reservation of a popped item at its handler's terminal completion.

        Raises :class:`InvalidOperation`, changing nothing, when ``ticket`` is
        not running in this lane: already completed (completion is not
        idempotent, a second call is a bookkeeping bug), still queued (pop it
        first), or issued by another lane.
        """
        running = self._running
        if running is ticket:
            self._running = None
        elif not isinstance(running, set) or ticket not in running:
            raise InvalidOperation(
                f"ticket is not running in the {self._kind.value} lane: it was already "
                "completed, is still queued, or was issued by another lane; complete each "
                "ticket exactly once, after pop(), on the lane that issued it"
            )
        else:
            running.remove(ticket)
            if not running:
                self._running = None
        self._bytes -= ticket.reserved_bytes

    def counts(self) -> tuple[int, int]:
        """Queued and running items (what :meth:`statistics` reports, without the snapshot)."""
        running = self._running
        return self.queued, (0 if running is None else 1 if type(running) is Ticket
                             else len(running))

    def statistics(self) -> LaneStatistics:
        """Return a frozen snapshot of the lane's usage. Never raises."""
        queued, running = self.counts()
        return LaneStatistics(lane=self._kind, bounds=self._bounds, items=queued + running,
                              bytes=self._bytes, queued=queued, running=running)


class Turn(NamedTuple, Generic[T]):
    """The work :meth:`Lanes.next_turn` chose: run ``item``, then complete ``ticket``.

    Immutable; a ``NamedTuple`` because every turn makes one.
    """

    lane: LaneKind
    item: T
    ticket: Ticket


@attrs.frozen(kw_only=True)
class LanesStatistics:
    """A snapshot of both lanes of one Spot."""

    application: LaneStatistics
    lifecycle: LaneStatistics


class Lanes(Generic[T]):
    """The application and lifecycle lanes of one Spot incarnation.

    ``application`` and ``lifecycle`` are the two :class:`Lane` objects; admit
    work on the one it belongs to. Raises :class:`InvalidConfiguration` for
    bounds that are not :class:`LaneBounds`. The lifecycle lane is built the
    first time it is asked for: most Spots never queue framework work, and
    every resident Spot would pay for an empty lane.
    """

    __slots__ = ("_lifecycle", "application")

    def __init__(
        self,
        *,
        application: LaneBounds = DEFAULT_APPLICATION_BOUNDS,
        lifecycle: LaneBounds = DEFAULT_LIFECYCLE_BOUNDS,
    ) -> None:
        # No ``Lane[T](...)``: calling a subscripted generic builds an alias per call.
        self.application: Final[Lane[T]] = Lane(LaneKind.APPLICATION, application)
        if not isinstance(lifecycle, LaneBounds):
            Lane(LaneKind.LIFECYCLE, lifecycle)  # raises the same error at once
        # Its bounds until the lane is built: one slot for both (every resident Spot
        # has its Lanes).
        self._lifecycle: Lane[T] | LaneBounds = lifecycle

    @property
    def lifecycle(self) -> Lane[T]:
        """The lifecycle lane (built on first use)."""
        lane = self._lifecycle
        if isinstance(lane, LaneBounds):
            lane = self._lifecycle = Lane(LaneKind.LIFECYCLE, lane)
        return lane

    def lane(self, kind: LaneKind) -> Lane[T]:
        """Return the lane named ``kind``."""
        return self.lifecycle if kind is LaneKind.LIFECYCLE else self.application

    def next_turn(self) -> Turn[T] | None:
        """Pop the next work item: lifecycle first, then application; ``None`` if both are empty.

        The popped item is running until :meth:`complete` gets its ticket.
        Never raises.
        """
        lifecycle = self._lifecycle
        if type(lifecycle) is Lane:
            entry = lifecycle.pop()
            if entry is not None:
                return _new_tuple(Turn, (LaneKind.LIFECYCLE, *entry))
        application = self.application
        if not application._queue:  # (nothing queued: asked after every turn)
            return None
        entry = application.pop()
        if entry is not None:
            return _new_tuple(Turn, (LaneKind.APPLICATION, *entry))
        return None

    def next_lifecycle_turn(self) -> Turn[T] | None:
        """Pop the next lifecycle work item only (``None`` if there is none): for a Spot
        that runs no application turn now (sealed for a relocation). Never raises."""
        lifecycle = self._lifecycle
        if type(lifecycle) is not Lane:
            return None
        entry = lifecycle.pop()
        return None if entry is None else _new_tuple(Turn, (LaneKind.LIFECYCLE, *entry))

    def counts(self) -> tuple[int, int]:
        """Queued and running items over both lanes, without building a snapshot."""
        queued, running = self.application.counts()
        lifecycle = self._lifecycle
        if type(lifecycle) is Lane:
            more_queued, more_running = lifecycle.counts()
            queued, running = queued + more_queued, running + more_running
        return queued, running

    def complete(self, ticket: Ticket) -> None:
        """Complete ``ticket`` on the lane that issued it; see :meth:`Lane.complete`."""
        if ticket.lane is LaneKind.APPLICATION:
            self.application.complete(ticket)
        else:
            self.lifecycle.complete(ticket)

    def statistics(self) -> LanesStatistics:
        """Return a frozen snapshot of both lanes. Never raises."""
        lifecycle = self._lifecycle
        return LanesStatistics(
            application=self.application.statistics(),
            lifecycle=(idle_lane_statistics(LaneKind.LIFECYCLE, lifecycle)
                       if isinstance(lifecycle, LaneBounds) else lifecycle.statistics()),
        )
