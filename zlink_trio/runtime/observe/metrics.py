"""``MetricsRecorder``: one node's counters and histograms, kept in plain Python.

A report is a dict increment (and, for latencies, one ``bisect`` into fixed buckets):
no lock, no label lookup, no prometheus-client object on the paths that report.  A
scrape reads the counts through :mod:`.prometheus`, together with one
:class:`NodeSample` of the node's gauges that the node's ``sample`` function builds
then (lane depth and bytes, links, route-cache counters), so gauges cost nothing
between scrapes.  Everything here runs in the node's Trio thread; a scrape from another
thread reads counts that are at most one report behind.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING, ClassVar, Final

import attrs

from zlink_trio.runtime.observe.fields import Operation
from zlink_trio.runtime.observe.recorder import Recorder

if TYPE_CHECKING:
    from collections.abc import Callable

    from zlink_trio.runtime.observe.fields import FollowEvent, StaleReason

__all__ = (
    "OPERATION_BUCKETS",
    "REMINDER_BUCKETS",
    "REQUEST_BUCKETS",
    "STORE_BUCKETS",
    "Histogram",
    "LaneSample",
    "MetricsRecorder",
    "NodeSample",
)

#: Upper bounds (seconds) of the request latency buckets.
REQUEST_BUCKETS: Final = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                          0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Upper bounds (seconds) of the operation latency buckets (create, activation, ...).
OPERATION_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                            2.5, 5.0, 10.0, 30.0, 60.0)
#: Upper bounds (seconds) of a reminder's lateness, its due to the end of its delivery.
REMINDER_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
#: Upper bounds (seconds) of the store call latency buckets.
STORE_BUCKETS: Final = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                        0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Histogram:
    """Cumulative-ready bucket counts of observed values (Prometheus ``le`` semantics)."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds: Final = bounds
        #: Observations per bucket, not cumulative; the last is above every bound.
        self.counts = [0] * (len(bounds) + 1)
        self.total = 0.0

    def observe(self, value: float) -> None:
        """Count ``value`` in the first bucket whose bound is >= it."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value

    def cumulative(self) -> list[tuple[str, float]]:
        """``(le, count)`` pairs, cumulative, ending with ``+Inf`` (the total count)."""
        out: list[tuple[str, float]] = []
        running = 0
        for bound, count in zip(self.bounds, self.counts, strict=False):
            running += count
            out.append((repr(bound), float(running)))
        out.append(("+Inf", float(running + self.counts[-1])))
        return out


@attrs.frozen(kw_only=True)
class LaneSample:
    """One lane kind summed over this node's Spots."""

    #: Work items holding a reservation (queued + running).
    items: int
    #: Bytes of the outstanding reservations.
    bytes: int
    #: The most items any one Spot's lane of this kind holds.
    max_items: int


@attrs.frozen(kw_only=True)
class NodeSample:
    """The gauges of one node, read when a scrape collects them."""

    active_spots: int
    activating: int
    #: By lane kind (``application``, ``lifecycle``).
    lanes: dict[str, LaneSample]
    route_cache_hits: int
    route_cache_misses: int
    route_cache_entries: int
    links: int
    links_opened: int
    reconnects: int
    dial_failures: int
    pending_replies: int
    follow_routes: int


class MetricsRecorder(Recorder):
    """The counts of one node (``node_id``), for its registry's collector."""

    __slots__ = ("closed_incarnations", "follow_events", "node_id", "operation_seconds",
                 "operations", "reminder_lateness", "reminders", "request_seconds",
                 "requests", "sample", "stale_reasons", "store_errors", "store_seconds")

    enabled: ClassVar[bool] = True

    def __init__(self, node_id: str) -> None:
        self.node_id: Final = node_id
        self.requests: dict[tuple[str, str], int] = {}
        # Both kinds exist from the start: a call's report is two dict updates, no branch.
        self.request_seconds: dict[str, Histogram] = {
            Operation.SEND.value: Histogram(REQUEST_BUCKETS),
            Operation.REQUEST.value: Histogram(REQUEST_BUCKETS)}
        self.operations: dict[tuple[str, str], int] = {}
        self.operation_seconds: dict[str, Histogram] = {}
        self.follow_events: dict[str, int] = {}
        self.stale_reasons: dict[str, int] = {}
        self.closed_incarnations: dict[str, int] = {}
        self.store_seconds: dict[tuple[str, str, str], Histogram] = {}
        self.store_errors: dict[tuple[str, str, str, str], int] = {}
        self.reminders: dict[str, int] = {}
        self.reminder_lateness = Histogram(REMINDER_BUCKETS)
        #: Builds the node's gauges at scrape time (set once the node runs).
        self.sample: Callable[[], NodeSample] | None = None

    def request(self, kind: Operation, outcome: str, seconds: float) -> None:
        """Count the call by kind and outcome and its latency by kind."""
        # ``kind`` is a StrEnum: it hashes and compares as its value, so it is the key.
        key = (kind, outcome)
        requests = self.requests
        requests[key] = requests.get(key, 0) + 1
        self.request_seconds[kind].observe(seconds)

    def operation(self, kind: Operation, outcome: str, seconds: float) -> None:
        """Count the operation by kind and outcome and its latency by kind."""
        key = (kind.value, outcome)
        self.operations[key] = self.operations.get(key, 0) + 1
        histogram = self.operation_seconds.get(kind.value)
        if histogram is None:
            histogram = self.operation_seconds[kind.value] = Histogram(OPERATION_BUCKETS)
        histogram.observe(seconds)

    def follow(self, event: FollowEvent) -> None:
        """Count one Message Follow hop or drop."""
        self.follow_events[event.value] = self.follow_events.get(event.value, 0) + 1

    def stale(self, reason: StaleReason) -> None:
        """Count one stale classification."""
        self.stale_reasons[reason.value] = self.stale_reasons.get(reason.value, 0) + 1

    def incarnation_closed(self, reason: str) -> None:
        """Count one local incarnation that ended, by close reason."""
        self.closed_incarnations[reason] = self.closed_incarnations.get(reason, 0) + 1

    def reminder(self, outcome: str, lateness: float) -> None:
        """Count one reminder delivery by outcome; observe how late a delivered one was."""
        self.reminders[outcome] = self.reminders.get(outcome, 0) + 1
        if outcome in ("delivered", "handler_error"):
            self.reminder_lateness.observe(max(0.0, lateness))

    def store_call(self, backend: str, part: str, method: str, seconds: float,
                   error: str | None) -> None:
        """Observe one store call's latency; count it by error class if it raised."""
        key = (backend, part, method)
        histogram = self.store_seconds.get(key)
        if histogram is None:
            histogram = self.store_seconds[key] = Histogram(STORE_BUCKETS)
        histogram.observe(seconds)
        if error is not None:
            ekey = (backend, part, method, error)
            self.store_errors[ekey] = self.store_errors.get(ekey, 0) + 1
