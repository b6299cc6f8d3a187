"""Execution-lane accounting (spec 09 §6 and §8 "Execution Queue Bound")."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from zlink_trio.core.errors import CapacityExceeded, InvalidConfiguration, InvalidOperation
from zlink_trio.core.lanes import (
    DEFAULT_APPLICATION_BOUNDS,
    DEFAULT_LIFECYCLE_BOUNDS,
    PER_ITEM_BYTES,
    Lane,
    LaneBounds,
    LaneKind,
    Lanes,
    Ticket,
)

MiB = 1024 * 1024


def fill(lane: Lane[int], payload_size: int) -> tuple[int, CapacityExceeded]:
    """Admit items of ``payload_size`` until refused; return how many fit and the refusal."""
    admitted = 0
    while True:
        try:
            lane.admit(admitted, payload_size)
        except CapacityExceeded as error:
            return admitted, error
        admitted += 1


def drain(lane: Lane[int] | Lane[str]) -> list[object]:
    """Pop every queued item, oldest first."""
    items: list[object] = []
    while (entry := lane.pop()) is not None:
        items.append(entry[0])
    return items


# --- spec 09 §8 "Execution Queue Bound": one test per item -------------------------------


def test_execution_queue_is_bounded_on_count_and_bytes_whichever_first():
    bounds = LaneBounds(10, 10 * (PER_ITEM_BYTES + 100))
    # 100-byte payloads: both bounds fall on the same item; the 11th is refused.
    lane = Lane[int](LaneKind.APPLICATION, bounds)
    assert fill(lane, 100)[0] == 10
    # 1,000-byte payloads: bytes run out first, after fewer items than the count bound.
    lane = Lane[int](LaneKind.APPLICATION, bounds)
    by_bytes, error = fill(lane, 1000)
    assert by_bytes == bounds.max_bytes // (1000 + PER_ITEM_BYTES) < bounds.max_items
    assert "byte bound" in error.message
    assert "count bound" not in error.message
    # Empty payloads: the count runs out first, with byte headroom left.
    lane = Lane[int](LaneKind.APPLICATION, bounds)
    by_count, error = fill(lane, 0)
    assert by_count == bounds.max_items
    assert lane.statistics().bytes < bounds.max_bytes
    assert "count bound" in error.message
    assert "byte bound" not in error.message


def test_large_messages_hit_byte_bound_before_count_bound():
    lane = Lane[int](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    admitted, error = fill(lane, MiB)
    assert admitted == DEFAULT_APPLICATION_BOUNDS.max_bytes // (MiB + PER_ITEM_BYTES)
    assert admitted < DEFAULT_APPLICATION_BOUNDS.max_items
    assert error.lane == "application"
    assert "byte bound of 67108864 bytes" in error.message
    assert "count bound" not in error.message


def test_empty_payloads_hit_count_bound_before_byte_bound():
    lane = Lane[int](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    admitted, error = fill(lane, 0)
    assert admitted == DEFAULT_APPLICATION_BOUNDS.max_items == 1024
    assert lane.statistics().bytes == 1024 * PER_ITEM_BYTES < DEFAULT_APPLICATION_BOUNDS.max_bytes
    assert error.lane == "application"
    assert "count bound of 1024 items" in error.message
    assert "byte bound" not in error.message


def test_byte_accounting_includes_fixed_per_work_cost():
    assert PER_ITEM_BYTES == 256
    lane = Lane[str](LaneKind.LIFECYCLE, LaneBounds(100, 3 * PER_ITEM_BYTES))
    ticket = lane.admit("empty", 0)
    assert ticket.reserved_bytes == PER_ITEM_BYTES
    assert lane.statistics().bytes == PER_ITEM_BYTES
    lane.admit("ten", 10)
    assert lane.statistics().bytes == 2 * PER_ITEM_BYTES + 10
    # Only empty payloads, yet the byte bound refuses the third: the fixed cost counts.
    lane = Lane[str](LaneKind.LIFECYCLE, LaneBounds(100, 2 * PER_ITEM_BYTES))
    lane.admit("a", 0)
    lane.admit("b", 0)
    with pytest.raises(CapacityExceeded, match="byte bound"):
        lane.admit("c", 0)


@pytest.mark.parametrize(
    "bad", [0, -1, None, math.inf, float("nan"), 1.5, True, "1024"],
)
@pytest.mark.parametrize("field", ["max_items", "max_bytes"])
def test_every_execution_lane_has_count_and_byte_bound(field, bad):
    lanes = Lanes[int]()
    for lane, defaults in ((lanes.application, (1024, 64 * MiB)),
                           (lanes.lifecycle, (128, 4 * MiB))):
        assert (lane.bounds.max_items, lane.bounds.max_bytes) == defaults
    assert LaneBounds(128, 4 * MiB) == DEFAULT_LIFECYCLE_BOUNDS
    good = {"max_items": 1, "max_bytes": 1}
    with pytest.raises(InvalidConfiguration, match=field):
        LaneBounds(**{**good, field: bad})


# --- behaviour ---------------------------------------------------------------------------


def test_refusal_names_lane_bound_usage_and_remedy():
    lanes = Lanes[str](lifecycle=LaneBounds(1, 10_000))
    lanes.lifecycle.admit("close", 5)
    with pytest.raises(CapacityExceeded) as refused:
        lanes.lifecycle.admit("evict", 5)
    error = refused.value
    assert error.lane == "lifecycle"
    assert "lifecycle lane" in error.message
    assert "count bound of 1 items" in error.message
    assert f"in use: 1 items, {5 + PER_ITEM_BYTES} bytes" in error.message
    assert "raise the lifecycle lane bounds" in error.message
    # Refusal changed nothing.
    assert lanes.lifecycle.statistics().items == 1


def test_refusal_names_both_bounds_when_both_are_hit():
    lane = Lane[int](LaneKind.APPLICATION, LaneBounds(1, PER_ITEM_BYTES))
    lane.admit(1, 0)
    with pytest.raises(CapacityExceeded) as refused:
        lane.admit(2, 0)
    assert "count bound" in refused.value.message
    assert "byte bound" in refused.value.message


def test_reservation_is_held_until_completion_not_dequeue():
    lane = Lane[str](LaneKind.APPLICATION, LaneBounds(1, 10_000))
    lane.admit("first", 0)
    popped = lane.pop()
    assert popped is not None
    item, ticket = popped
    assert item == "first"
    stats = lane.statistics()
    assert (stats.queued, stats.running, stats.items) == (0, 1, 1)
    # Dequeued but still running: the slot is still taken.
    with pytest.raises(CapacityExceeded):
        lane.admit("second", 0)
    lane.complete(ticket)
    assert lane.statistics().items == 0
    assert lane.statistics().bytes == 0
    lane.admit("second", 0)


def test_complete_twice_or_unpopped_or_foreign_ticket_is_refused():
    lane = Lane[str](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    other = Lane[str](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    queued = lane.admit("a", 1)
    with pytest.raises(InvalidOperation, match="still queued"):
        lane.complete(queued)
    popped = lane.pop()
    assert popped is not None
    with pytest.raises(InvalidOperation):
        other.complete(popped[1])
    lane.complete(popped[1])
    before = lane.statistics()
    with pytest.raises(InvalidOperation, match="already"):
        lane.complete(popped[1])
    assert lane.statistics() == before


def test_pop_is_fifo_and_none_when_empty():
    lane = Lane[int](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    assert lane.pop() is None
    for n in range(5):
        lane.admit(n, n)
    assert drain(lane) == list(range(5))
    assert lane.pop() is None


def test_push_front_restores_first_record_at_head_and_bypasses_bounds():
    lane = Lane[str](LaneKind.APPLICATION, LaneBounds(2, 10_000))
    lane.admit("later-1", 0)
    lane.admit("later-2", 0)
    ticket = lane.push_front("first", 100)
    assert ticket.reserved_bytes == 100 + PER_ITEM_BYTES
    stats = lane.statistics()
    assert stats.items == 3 > lane.bounds.max_items
    assert stats.bytes == 3 * PER_ITEM_BYTES + 100
    with pytest.raises(CapacityExceeded):
        lane.admit("later-3", 0)
    assert drain(lane) == ["first", "later-1", "later-2"]


def test_push_front_only_once_and_only_before_the_first_turn():
    lane = Lane[str](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    lane.push_front("first", 0)
    with pytest.raises(InvalidOperation, match="restored head"):
        lane.push_front("again", 0)
    started = Lane[str](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    started.admit("x", 0)
    started.pop()
    with pytest.raises(InvalidOperation, match="ran a turn"):
        started.push_front("late", 0)


@pytest.mark.parametrize("size", [-1, 1.0, None, True])
def test_bad_payload_size_is_refused(size):
    lane = Lane[int](LaneKind.APPLICATION, DEFAULT_APPLICATION_BOUNDS)
    with pytest.raises(InvalidOperation, match="payload_size"):
        lane.admit(1, size)
    with pytest.raises(InvalidOperation, match="payload_size"):
        lane.push_front(1, size)
    assert lane.statistics().items == 0


def test_next_turn_takes_lifecycle_before_application_and_completes_on_issuing_lane():
    lanes = Lanes[str]()
    assert lanes.next_turn() is None
    lanes.application.admit("app-1", 0)
    lanes.lifecycle.admit("close", 0)
    lanes.application.admit("app-2", 0)
    turns = [lanes.next_turn() for _ in range(3)]
    assert [(t.lane, t.item) for t in turns if t] == [
        (LaneKind.LIFECYCLE, "close"),
        (LaneKind.APPLICATION, "app-1"),
        (LaneKind.APPLICATION, "app-2"),
    ]
    assert lanes.next_turn() is None
    stats = lanes.statistics()
    assert (stats.lifecycle.running, stats.application.running) == (1, 2)
    for turn in turns:
        assert turn is not None
        lanes.complete(turn.ticket)
    stats = lanes.statistics()
    assert (stats.lifecycle.items, stats.application.items) == (0, 0)
    assert (stats.lifecycle.bytes, stats.application.bytes) == (0, 0)


# --- properties --------------------------------------------------------------------------

bounds_strategy = st.builds(
    LaneBounds, st.integers(1, 8), st.integers(1, 6 * PER_ITEM_BYTES)
)


class LaneMachine(RuleBasedStateMachine):
    """Drive a Lane with admit/pop/complete and compare it to a plain model."""

    def __init__(self) -> None:
        super().__init__()
        self.lanes: Lanes[int] | None = None
        self.model: dict[LaneKind, tuple[list[tuple[int, int]], dict[int, int]]] = {}
        self.tickets: dict[int, Ticket] = {}
        self.counter = 0

    @precondition(lambda self: self.lanes is None)
    @rule(app=bounds_strategy, life=bounds_strategy)
    def start(self, app, life):
        self.lanes = Lanes[int](application=app, lifecycle=life)
        self.model = {kind: ([], {}) for kind in LaneKind}

    @precondition(lambda self: self.lanes is not None)
    @rule(kind=st.sampled_from(LaneKind), size=st.integers(0, 3 * PER_ITEM_BYTES))
    def admit(self, kind, size):
        assert self.lanes is not None
        lane = self.lanes.lane(kind)
        queued, running = self.model[kind]
        items = len(queued) + len(running)
        used = sum(s for _, s in queued) + sum(running.values())
        fits = items < lane.bounds.max_items and used + size + PER_ITEM_BYTES <= (
            lane.bounds.max_bytes
        )
        self.counter += 1
        item = self.counter
        if fits:
            ticket = lane.admit(item, size)
            self.tickets[item] = ticket
            queued.append((item, size + PER_ITEM_BYTES))
        else:
            with pytest.raises(CapacityExceeded) as refused:
                lane.admit(item, size)
            assert refused.value.lane == kind.value
            assert f"{kind.value} lane" in refused.value.message

    @precondition(lambda self: self.lanes is not None)
    @rule()
    def next_turn(self):
        assert self.lanes is not None
        turn = self.lanes.next_turn()
        expected_kind = next(
            (k for k in (LaneKind.LIFECYCLE, LaneKind.APPLICATION) if self.model[k][0]), None
        )
        if expected_kind is None:
            assert turn is None
            return
        assert turn is not None
        assert turn.lane is expected_kind
        queued, running = self.model[expected_kind]
        item, size = queued.pop(0)  # FIFO
        assert turn.item == item
        assert turn.ticket is self.tickets[item]
        running[item] = size

    @precondition(lambda self: self.lanes is not None)
    @rule(data=st.data())
    def complete(self, data):
        assert self.lanes is not None
        running = [(k, i) for k in LaneKind for i in self.model[k][1]]
        if not running:
            return
        kind, item = data.draw(st.sampled_from(running))
        self.lanes.complete(self.tickets[item])
        del self.model[kind][1][item]
        with pytest.raises(InvalidOperation):
            self.lanes.complete(self.tickets[item])

    @invariant()
    def usage_matches_model_and_stays_within_bounds(self):
        if self.lanes is None:
            return
        for kind in LaneKind:
            lane = self.lanes.lane(kind)
            stats = lane.statistics()
            queued, running = self.model[kind]
            assert stats.queued == len(queued)
            assert stats.running == len(running)
            assert stats.items == len(queued) + len(running) <= lane.bounds.max_items
            assert stats.bytes == sum(s for _, s in queued) + sum(running.values())
            assert stats.bytes <= lane.bounds.max_bytes


LaneMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40)
TestLaneMachine = LaneMachine.TestCase


@given(
    bounds=bounds_strategy,
    sizes=st.lists(st.integers(0, 4 * PER_ITEM_BYTES), max_size=30),
)
def test_admitted_prefix_is_popped_in_order_and_refusal_is_exactly_when_a_bound_breaks(
    bounds, sizes
):
    lane = Lane[int](LaneKind.APPLICATION, bounds)
    admitted: list[int] = []
    used = 0
    for index, size in enumerate(sizes):
        would_break = (len(admitted) + 1 > bounds.max_items
                       or used + size + PER_ITEM_BYTES > bounds.max_bytes)
        if would_break:
            with pytest.raises(CapacityExceeded) as refused:
                lane.admit(index, size)
            assert refused.value.lane == "application"
        else:
            lane.admit(index, size)
            admitted.append(index)
            used += size + PER_ITEM_BYTES
    assert drain(lane) == admitted


def test_append_unbounded_queues_past_the_bounds_and_counts_the_bytes():
    lane: Lane[str] = Lane(LaneKind.APPLICATION, LaneBounds(max_items=1, max_bytes=1_000))
    lane.admit("first", 10)
    with pytest.raises(CapacityExceeded):
        lane.admit("refused", 10)
    lane.append_unbounded("held", 10)  # moved here whole: never refused
    assert lane.queued_items() == ["first", "held"]
    assert lane.statistics().bytes == 2 * (10 + PER_ITEM_BYTES)


def test_take_queued_removes_the_queued_items_and_their_reservations_only():
    lane: Lane[str] = Lane(LaneKind.APPLICATION, LaneBounds(max_items=10, max_bytes=10_000))
    for name in ("a", "b", "c"):
        lane.admit(name, 5)
    popped = lane.pop()
    assert popped is not None
    assert lane.take_queued() == ["b", "c"]
    assert lane.queued == 0
    assert lane.statistics().bytes == 5 + PER_ITEM_BYTES  # the running item keeps its own
    lane.complete(popped[1])
    assert lane.statistics().bytes == 0


def test_several_running_items_complete_in_any_order():
    # One running item is kept as its ticket alone; a second one makes it a set.
    lane: Lane[int] = Lane(LaneKind.APPLICATION, LaneBounds(10, 10 * MiB))
    tickets = [lane.admit(i, i) for i in range(3)]
    popped = [lane.pop() for _ in range(3)]
    assert [entry[1] for entry in popped if entry is not None] == tickets
    assert lane.counts() == (0, 3)
    for ticket in (tickets[1], tickets[2], tickets[0]):
        lane.complete(ticket)
        with pytest.raises(InvalidOperation):
            lane.complete(ticket)
    assert lane.counts() == (0, 0)
    assert lane.statistics().bytes == 0
    ticket = lane.admit(9, 0)
    lane.pop()
    assert lane.counts() == (0, 1)
    with pytest.raises(InvalidOperation):
        lane.complete(tickets[0])  # not running: the one running ticket is another
    lane.complete(ticket)
    assert lane.counts() == (0, 0)
