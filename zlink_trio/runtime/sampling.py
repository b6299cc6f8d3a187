"""``sample_node``: one node's gauges, read when a scrape collects them.

It walks the catalog's Ready hosts once (two lane snapshots each) and reads the route
cache's and the transport's counters; nothing is kept between scrapes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zlink_trio.runtime.observe.metrics import LaneSample, NodeSample

if TYPE_CHECKING:
    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime

__all__ = ("sample_node",)


def sample_node(rt: NodeRuntime) -> NodeSample:
    """The gauges of ``rt``'s node now."""
    totals = {"application": [0, 0, 0], "lifecycle": [0, 0, 0]}
    hosts = list(rt.catalog.hosts.values())
    for host in hosts:
        stats = host.lanes.statistics()
        for lane in (stats.application, stats.lifecycle):
            total = totals[lane.lane.value]
            total[0] += lane.items
            total[1] += lane.bytes
            total[2] = max(total[2], lane.items)
    cache = rt.route_cache.statistics()
    transport = rt.peers.transport
    links = transport.statistics() if transport is not None else None
    return NodeSample(
        active_spots=len(hosts), activating=rt.catalog.pending,
        lanes={name: LaneSample(items=t[0], bytes=t[1], max_items=t[2])
               for name, t in totals.items()},
        route_cache_hits=cache.hits, route_cache_misses=cache.misses,
        route_cache_entries=cache.size,
        links=links.links if links else 0, links_opened=links.links_opened if links else 0,
        reconnects=links.reconnects if links else 0,
        dial_failures=links.dial_failures if links else 0,
        pending_replies=rt.peers.pending, follow_routes=len(rt.follow))
