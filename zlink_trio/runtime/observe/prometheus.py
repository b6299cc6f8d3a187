"""The prometheus-client side: one collector per registry, holding that registry's nodes.

``open_node(metrics=registry)`` calls :func:`attach`: the first node of a registry
registers one collector in it, every node adds its
:class:`~.metrics.MetricsRecorder`, and leaving ``open_node`` removes it again (its
series go with it).  So several nodes of one process can share a registry -- each
series carries a ``node_id`` label -- and no metric family is registered twice.
Spot IDs are never a label (they are unbounded): every label value comes from a small fixed set
(kinds, outcomes, error class names, lane kinds, store methods) or is the NodeId.

A scrape (``registry.collect()``, ``generate_latest``) builds every family from the
recorders' counts and one :class:`~.metrics.NodeSample` per node.  The families and
their labels are listed in ``docs/observability.md``; ``describe`` names them all, so
a name clash with another collector of the registry is refused when the first node
attaches.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Final

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.runtime.observe.fields import FollowEvent, Operation, StaleReason

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from zlink_trio.runtime.observe.metrics import MetricsRecorder, NodeSample

__all__ = ("CollectorRegistry", "attach", "hub_of", "new_registry")

#: Operation kind -> (counter name, histogram name, what it counts).
_OPERATIONS: Final = {
    Operation.CREATE: ("zlink_creates", "zlink_create_duration_seconds",
                       "User Spot create/get_or_create operations"),
    Operation.COLD_ACTIVATION: ("zlink_activations", "zlink_activation_duration_seconds",
                                "cold activations run on this node (target side)"),
    Operation.CLOSE: ("zlink_closes", "zlink_close_duration_seconds",
                      "spots.close operations"),
    Operation.RELOCATION: ("zlink_relocations", "zlink_relocation_duration_seconds",
                           "planned relocations from this node"),
}

_DROPS: Final = tuple(event for event in FollowEvent if event is not FollowEvent.HOP)

_hubs: weakref.WeakKeyDictionary[CollectorRegistry, _Hub] = weakref.WeakKeyDictionary()


def new_registry() -> CollectorRegistry:
    """A fresh registry (``metrics_port=`` without ``metrics=`` serves one of its own)."""
    return CollectorRegistry()


def hub_of(registry: CollectorRegistry) -> _Hub:
    """The collector of ``registry``'s nodes, registered in it on first use.

    Raises ``ValueError`` (from prometheus-client) when another collector of the
    registry already uses one of the ``zlink_`` names.
    """
    hub = _hubs.get(registry)
    if hub is None:
        hub = _Hub()
        registry.register(hub)
        _hubs[registry] = hub
    return hub


def attach(registry: CollectorRegistry, recorder: MetricsRecorder) -> Callable[[], None]:
    """Add ``recorder``'s node to ``registry``; returns the function that removes it."""
    hub = hub_of(registry)
    hub.nodes.append(recorder)

    def detach() -> None:
        if recorder in hub.nodes:
            hub.nodes.remove(recorder)

    return detach


class _Hub(Collector):
    """The collector of every node attached to one registry."""

    def __init__(self) -> None:
        self.nodes: list[MetricsRecorder] = []

    def describe(self) -> Iterable[Metric]:
        return _families([])

    def collect(self) -> Iterable[Metric]:
        return _families([(node, node.sample() if node.sample is not None else None)
                          for node in list(self.nodes)])


def _families(nodes: list[tuple[MetricsRecorder, NodeSample | None]]) -> list[Metric]:
    out: list[Metric] = []
    out.extend(_call_families(nodes))
    out.extend(_operation_families(nodes))
    out.extend(_follow_families(nodes))
    out.extend(_reminder_families(nodes))
    out.extend(_store_families(nodes))
    out.extend(_gauge_families(nodes))
    return out


def _call_families(nodes: list[tuple[MetricsRecorder, NodeSample | None]]) -> list[Metric]:
    requests = CounterMetricFamily(
        "zlink_requests", "Direct calls of this node's clients (node.client, ctx.client) by "
        "kind (send, request) and outcome (ok or the error class name)",
        labels=("node_id", "kind", "outcome"))
    latency = HistogramMetricFamily(
        "zlink_request_duration_seconds", "Direct call latency, admission to reply (a send: "
        "to admission), by kind", labels=("node_id", "kind"))
    stale = CounterMetricFamily(
        "zlink_stale_routes", "Messages classified stale (StaleRoute, not run), by reason",
        labels=("node_id", "reason"))
    hits = CounterMetricFamily("zlink_route_cache_hits", "Route cache lookups that found a "
                               "route", labels=("node_id",))
    misses = CounterMetricFamily("zlink_route_cache_misses", "Route cache lookups that found "
                                 "none (the store was read)", labels=("node_id",))
    for node, sample in nodes:
        for (kind, outcome), count in list(node.requests.items()):
            requests.add_metric((node.node_id, kind, outcome), count)
        for kind, histogram in list(node.request_seconds.items()):
            latency.add_metric((node.node_id, kind), histogram.cumulative(), histogram.total)
        for reason in StaleReason:
            stale.add_metric((node.node_id, reason.value),
                             node.stale_reasons.get(reason.value, 0))
        if sample is not None:
            hits.add_metric((node.node_id,), sample.route_cache_hits)
            misses.add_metric((node.node_id,), sample.route_cache_misses)
    return [requests, latency, stale, hits, misses]


def _operation_families(nodes: list[tuple[MetricsRecorder, NodeSample | None]]
                        ) -> list[Metric]:
    out: list[Metric] = []
    for kind, (counter_name, histogram_name, what) in _OPERATIONS.items():
        counter = CounterMetricFamily(counter_name, f"Ended {what}, by outcome",
                                      labels=("node_id", "outcome"))
        histogram = HistogramMetricFamily(histogram_name, f"Latency of {what}",
                                          labels=("node_id",))
        for node, _ in nodes:
            for (op, outcome), count in list(node.operations.items()):
                if op == kind.value:
                    counter.add_metric((node.node_id, outcome), count)
            seconds = node.operation_seconds.get(kind.value)
            if seconds is not None:
                histogram.add_metric((node.node_id,), seconds.cumulative(), seconds.total)
        out.extend((counter, histogram))
    ended = CounterMetricFamily(
        "zlink_incarnations_closed", "Local Spot incarnations that ended, by close reason "
        "(closed, idle_evicted, node_shutdown, relocated, ownership_lost, activation_failed)",
        labels=("node_id", "reason"))
    for node, _ in nodes:
        for reason in CloseReason:
            ended.add_metric((node.node_id, reason.value),
                             node.closed_incarnations.get(reason.value, 0))
    out.append(ended)
    return out


def _follow_families(nodes: list[tuple[MetricsRecorder, NodeSample | None]]) -> list[Metric]:
    hops = CounterMetricFamily("zlink_follow_hops", "Messages this node sent on along a "
                               "Message Follow route (one per hop)", labels=("node_id",))
    drops = CounterMetricFamily("zlink_follow_drops", "Messages Message Follow could not "
                                "send on (not run), by reason", labels=("node_id", "reason"))
    for node, _ in nodes:
        events = node.follow_events
        hops.add_metric((node.node_id,), events.get(FollowEvent.HOP.value, 0))
        for event in _DROPS:
            drops.add_metric((node.node_id, event.value.removeprefix("drop_")),
                             events.get(event.value, 0))
    return [hops, drops]


#: The outcomes of a reminder's delivery (``coordinators.reminders``).
_REMINDER_OUTCOMES: Final = ("delivered", "handler_error", "dropped", "retry")


def _reminder_families(nodes: list[tuple[MetricsRecorder, NodeSample | None]]
                       ) -> list[Metric]:
    ended = CounterMetricFamily(
        "zlink_reminders", "Durable reminder deliveries this node made, by outcome "
        "(delivered; handler_error: the handler raised, counted as delivered; dropped: its "
        "User Spot is gone; retry: delivered again once its take runs out)",
        labels=("node_id", "outcome"))
    late = HistogramMetricFamily(
        "zlink_reminder_lateness_seconds", "How late a delivered reminder was: its due (store "
        "clock) to the end of its delivery", labels=("node_id",))
    for node, _ in nodes:
        for outcome in _REMINDER_OUTCOMES:
            ended.add_metric((node.node_id, outcome), node.reminders.get(outcome, 0))
        late.add_metric((node.node_id,), node.reminder_lateness.cumulative(),
                        node.reminder_lateness.total)
    return [ended, late]


def _store_families(nodes: list[tuple[MetricsRecorder, NodeSample | None]]) -> list[Metric]:
    latency = HistogramMetricFamily(
        "zlink_store_call_duration_seconds", "Store call latency by backend (memory, sqlite, "
        "redis), store (location, relocation, combined) and method",
        labels=("node_id", "backend", "store", "method"))
    errors = CounterMetricFamily(
        "zlink_store_errors", "Store calls that raised, by backend, store, method and error "
        "class", labels=("node_id", "backend", "store", "method", "error"))
    for node, _ in nodes:
        for (backend, part, method), histogram in list(node.store_seconds.items()):
            latency.add_metric((node.node_id, backend, part, method), histogram.cumulative(),
                               histogram.total)
        for (backend, part, method, error), count in list(node.store_errors.items()):
            errors.add_metric((node.node_id, backend, part, method, error), count)
    return [latency, errors]


def _gauge_families(nodes: list[tuple[MetricsRecorder, NodeSample | None]]) -> list[Metric]:
    def gauge(name: str, doc: str) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, doc, labels=("node_id",))

    active = gauge("zlink_active_spots", "Ready Spot incarnations on this node")
    activating = gauge("zlink_activating_spots", "Creations in flight on this node")
    items = GaugeMetricFamily("zlink_lane_items", "Work items holding a lane reservation "
                              "(queued + running), summed over this node's Spots",
                              labels=("node_id", "lane"))
    lane_bytes = GaugeMetricFamily("zlink_lane_bytes", "Bytes reserved in the lanes, summed "
                                   "over this node's Spots", labels=("node_id", "lane"))
    deepest = GaugeMetricFamily("zlink_lane_max_items", "The most items any one Spot's lane "
                                "holds", labels=("node_id", "lane"))
    entries = gauge("zlink_route_cache_entries", "Routes held in the route cache")
    links = gauge("zlink_links", "Open authenticated links to other nodes, both directions")
    opened = CounterMetricFamily("zlink_links_opened", "Links opened, both directions",
                                 labels=("node_id",))
    reconnects = CounterMetricFamily("zlink_link_reconnects", "Links opened to a node this "
                                     "node had a link to before that closed",
                                     labels=("node_id",))
    failures = CounterMetricFamily("zlink_link_dial_failures", "Outbound link attempts that "
                                   "failed", labels=("node_id",))
    pending = gauge("zlink_pending_replies", "Requests sent to other nodes, not answered yet")
    follow_routes = gauge("zlink_follow_routes", "Message Follow routes held (Spots that "
                          "moved away)")
    for node, sample in nodes:
        if sample is None:
            continue
        label = (node.node_id,)
        active.add_metric(label, sample.active_spots)
        activating.add_metric(label, sample.activating)
        for lane, lane_sample in sample.lanes.items():
            items.add_metric((node.node_id, lane), lane_sample.items)
            lane_bytes.add_metric((node.node_id, lane), lane_sample.bytes)
            deepest.add_metric((node.node_id, lane), lane_sample.max_items)
        entries.add_metric(label, sample.route_cache_entries)
        links.add_metric(label, sample.links)
        opened.add_metric(label, sample.links_opened)
        reconnects.add_metric(label, sample.reconnects)
        failures.add_metric(label, sample.dial_failures)
        pending.add_metric(label, sample.pending_replies)
        follow_routes.add_metric(label, sample.follow_routes)
    return [active, activating, items, lane_bytes, deepest, entries, links, opened,
            reconnects, failures, pending, follow_routes]
