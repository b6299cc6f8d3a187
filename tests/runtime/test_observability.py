"""Observability (06 §9, docs/observability.md): the metric series a scrape shows, the
structured fields log records carry, and what a node prints by default.

Three listening nodes share one store (the ``url`` fixture: a named memory store, a
SQLite file, Redis under a fresh prefix): ``node-a`` takes every new Spot (``node-b``
and ``node-c`` have placement weight 0), ``node-a`` and ``node-b`` record metrics in
registries of their own and serve them on ``metrics_port=0``; ``node-c`` records none.
:func:`drive` runs, through the public API, a cold activation, a create and a
get_or_create, a close from another node, a relocation, a call that follows the Spot
along its Message Follow route, a stale route, errors, a node restart (a reconnect) and
a held handler turn with a message queued behind it; the test then scrapes ``GET
/metrics`` over HTTP and checks every series the issue names with the values those
steps imply. On the real clock (the scrape is a real socket), each test under
``trio.fail_after``.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import textwrap
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import attrs
import httpx
import pytest
import trio
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

import zlink_trio as zl
from zlink_trio.store import MemoryStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

#: Real seconds a test may take (a healthy one takes about one).
LIMIT = 30
GATE: dict[str, trio.Event] = {}


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@attrs.frozen
class Hold:
    pass


@attrs.frozen
class Quit:
    pass


@zl.instance_spot("obs-counter", relocation=zl.RecreateOnRelocation())
class ObsCounter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)

    @zl.handler
    async def hold(self, msg: Hold) -> None:
        GATE["holding"].set()
        await GATE["hold"].wait()

    @zl.handler
    async def quit(self, msg: Quit) -> None:
        self.ctx.close()


@zl.user_spot("obs-room", relocation=zl.DisableRelocation())
class ObsRoom:
    def __init__(self, ctx: zl.SpotContext, request: object | None) -> None:
        pass


SPOTS = (ObsCounter, ObsRoom)
SPOT_IDS = ("c-1", "c-2", "h-1", "r-1")


async def wait_until(predicate: Callable[[], Awaitable[bool]]) -> None:
    """Poll ``predicate`` in real time, bounded by the test's fail_after."""
    for _ in range(100_000):
        if await predicate():
            return
        await trio.sleep(0.01)
    pytest.fail("condition never became true")


def open_node(name: str, store: MemoryStore | str, **options: Any) -> Any:
    return zl.open_node(name, store=store, spots=SPOTS, on_stop="close",
                        placement_weight=1.0 if name == "node-a" else 0.0, **options)


@attrs.define
class Scraped:
    """One scrape: sample values by (name, labels without node_id)."""

    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]
    labels: set[str]

    def value(self, name: str, **labels: str) -> float:
        return self.samples[name, frozenset(labels.items())]

    def names(self) -> set[str]:
        return {name for name, _ in self.samples}


async def scrape(node: Any) -> Scraped:
    async with httpx.AsyncClient() as client:
        response = await client.get(node.metrics_url)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    labels: set[str] = set()
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            assert sample.labels.get("node_id") == node.node_id  # one node per registry
            labels.update(sample.labels)
            rest = frozenset((k, v) for k, v in sample.labels.items() if k != "node_id")
            samples[sample.name, rest] = sample.value
    return Scraped(samples, labels)


async def drive(store: MemoryStore | str, check: Callable[[Any, Any], Awaitable[None]]
                ) -> None:
    """Open the nodes, run every kind of operation, call ``check(a, b)`` while a handler
    turn on node-a is held with one more message queued behind it."""
    GATE["hold"], GATE["holding"] = trio.Event(), trio.Event()
    async with AsyncExitStack() as stack:
        a = await stack.enter_async_context(open_node(
            "node-a", store, metrics=CollectorRegistry(), metrics_port=0))
        b = await stack.enter_async_context(open_node(
            "node-b", store, metrics=CollectorRegistry(), metrics_port=0))
        async with open_node("node-c", store) as c:
            # Cold activation from node-b: built on node-a.
            assert await b.client.request("c-1", Add(2), reply=Total).instance_spot(
                "obs-counter") == Total(2)
            assert await b.client.request("c-1", Add(1), reply=Total) == Total(3)  # cached
            await b.client.send("c-1", Add(0))
            assert await c.client.request("c-1", Add(0), reply=Total) == Total(3)
            # Relocation a -> b; node-c's cached route still names a: Message Follow.
            moved = await a.relocate("c-1", to="node-b")
            assert moved.outcome is zl.RelocationOutcome.COMMITTED
            assert await c.client.request("c-1", Add(1), reply=Total) == Total(1)
            # Errors.
            with pytest.raises(zl.NotFound):
                await b.client.request("nobody", Add(1), reply=Total)
            with pytest.raises(zl.TypeMismatch):
                await b.client.request("c-1", Add(1), reply=None)
            # Create on a, get_or_create and close from b.
            created = await a.spots.create("obs-room")
            assert created.state is zl.CreateState.CREATED
            existing = await b.spots.get_or_create(created.ref.spot_id, "obs-room")
            assert existing.state is zl.CreateState.EXISTING
            assert await b.spots.close(created.ref) is True
            # A stale route: b's cache names a; the Spot closes itself on a.
            await b.client.request("c-2", Add(1), reply=Total).instance_spot("obs-counter")
            await b.client.request("c-2", Add(1), reply=Total)  # b now caches the route
            await a.client.send("c-2", Quit())
            await wait_until(lambda: _gone(a, "c-2"))
            with pytest.raises(zl.StaleRoute):
                await b.client.request("c-2", Add(1), reply=Total)
        # node-c left; node-a saw its link close. A new lifecycle of node-c links again.
        await wait_until(lambda: _links(a, 1))
        async with open_node("node-c", store) as c:
            await c.client.request("c-2", Add(1), reply=Total).instance_spot("obs-counter")
            # A held turn on node-a, one more message queued behind it.
            await a.client.request("h-1", Add(0), reply=Total).instance_spot("obs-counter")
            await a.client.send("h-1", Hold())
            await a.client.send("h-1", Add(5))
            await GATE["holding"].wait()
            await check(a, b)
            GATE["hold"].set()


async def _gone(node: Any, spot_id: str) -> bool:
    return await node.spots.find(spot_id) is None


async def _links(node: Any, count: int) -> bool:
    return bool(node.statistics().links == count)


async def test_a_scrape_shows_every_series_with_the_values_of_what_ran(url):
    backend = url.split("://", 1)[0]
    seen: dict[str, Scraped] = {}

    async def check(a: Any, b: Any) -> None:
        # A turn's reservation is returned once its first-record cleanup (a store call)
        # is done, which may trail its reply: wait for the lanes to hold just h-1's two.
        async def settled() -> bool:
            seen["a"] = await scrape(a)
            return seen["a"].value("zlink_lane_items", lane="application") == 2

        await wait_until(settled)
        seen["b"] = await scrape(b)

    with trio.fail_after(LIMIT):
        await drive(url, check)
    a, b = seen["a"], seen["b"]
    # Requests by kind and outcome (the callers' node).
    assert b.value("zlink_requests_total", kind="request", outcome="ok") == 4
    assert b.value("zlink_requests_total", kind="send", outcome="ok") == 1
    assert b.value("zlink_requests_total", kind="request", outcome="NotFound") == 1
    assert b.value("zlink_requests_total", kind="request", outcome="TypeMismatch") == 1
    assert b.value("zlink_requests_total", kind="request", outcome="StaleRoute") == 1
    assert b.value("zlink_request_duration_seconds_count", kind="request") == 7
    # Activations (target side), creates, closes, relocations, with their latencies.
    # c-1, c-2, c-2 again (node-c's call after it closed itself), h-1
    assert a.value("zlink_activations_total", outcome="activated") == 4
    assert a.value("zlink_activation_duration_seconds_count") == 4
    assert a.value("zlink_creates_total", outcome="created") == 1
    assert a.value("zlink_create_duration_seconds_count") == 1
    assert b.value("zlink_creates_total", outcome="existing") == 1
    assert b.value("zlink_closes_total", outcome="closed") == 1
    assert b.value("zlink_close_duration_seconds_count") == 1
    assert a.value("zlink_relocations_total", outcome="committed") == 1
    assert a.value("zlink_relocation_duration_seconds_count") == 1
    assert a.value("zlink_relocation_duration_seconds_sum") > 0
    # Incarnations that ended here: c-1 moved away, c-2 closed itself, the room closed.
    assert a.value("zlink_incarnations_closed_total", reason="relocated") == 1
    assert a.value("zlink_incarnations_closed_total", reason="closed") == 2
    assert a.value("zlink_incarnations_closed_total", reason="idle_evicted") == 0
    # Route cache hits and misses.
    assert b.value("zlink_route_cache_hits_total") >= 1
    assert b.value("zlink_route_cache_misses_total") >= 1
    # Lane depth and bytes: the held turn and the message behind it.
    assert a.value("zlink_lane_items", lane="application") == 2
    assert a.value("zlink_lane_max_items", lane="application") == 2
    assert a.value("zlink_lane_bytes", lane="application") >= 2 * 256
    assert a.value("zlink_lane_items", lane="lifecycle") == 0
    assert a.value("zlink_active_spots") == 2  # c-2 (node-c's new lifecycle), h-1
    # Message Follow: node-c's call went on from node-a to node-b; nothing dropped.
    assert a.value("zlink_follow_hops_total") == 1
    assert a.value("zlink_follow_drops_total", reason="max_hops") == 0
    assert a.value("zlink_follow_routes") == 1
    # Stale classification: node-a had no incarnation; node-b got the answer.
    assert a.value("zlink_stale_routes_total", reason="no_incarnation") == 1
    assert b.value("zlink_stale_routes_total", reason="answered") == 1
    # Store call latency by backend, store and method.
    assert a.value("zlink_store_call_duration_seconds_count", backend=backend,
                   store="location", method="find") >= 1
    assert a.value("zlink_store_call_duration_seconds_count", backend=backend,
                   store="combined", method="reserve_with_root") == 4
    assert a.value("zlink_store_call_duration_seconds_bucket", backend=backend,
                   store="location", method="find", le="+Inf") >= 1
    # Links and reconnects: node-a links to node-b and the second node-c.
    assert a.value("zlink_links") == 2
    assert a.value("zlink_link_reconnects_total") == 1
    assert a.value("zlink_links_opened_total") == 3
    # No Spot ID anywhere: not as a label, not as a label value.
    assert "spot_id" not in a.labels | b.labels
    for scraped in (a, b):
        values = {v for _, labels in scraped.samples for _, v in labels}
        assert not values & set(SPOT_IDS)


async def test_a_message_followed_to_an_owner_that_left_is_a_counted_drop(caplog):
    caplog.set_level(logging.INFO, logger="zlink_trio.runtime.follow")
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        async with open_node("node-a", store, metrics=CollectorRegistry(),
                             metrics_port=0) as a, open_node("node-c", store) as c:
            async with open_node("node-b", store) as _b:
                await c.client.request("c-1", Add(1), reply=Total).instance_spot()
                await c.client.request("c-1", Add(1), reply=Total)  # c caches a's route
                assert (await a.relocate("c-1", to="node-b")).outcome is \
                    zl.RelocationOutcome.COMMITTED
            # node-b left (its Spots closed with it); a's Message Follow route remains.
            with pytest.raises(zl.Unavailable):
                await c.client.request("c-1", Add(1), reply=Total)
            scraped = await scrape(a)
    assert scraped.value("zlink_follow_drops_total", reason="unreachable") == 1
    assert scraped.value("zlink_follow_hops_total") == 0
    (drop,) = [r for r in caplog.records if getattr(r, "follow", None) == "drop_unreachable"]
    assert drop.spot_id == "c-1"
    assert drop.operation == "follow"
    assert drop.levelno == logging.INFO


async def test_log_records_carry_the_documented_fields(caplog):
    caplog.set_level(logging.DEBUG, logger="zlink_trio")

    async def check(a: Any, b: Any) -> None:
        pass

    with trio.fail_after(LIMIT):
        await drive(MemoryStore(), check)

    def records(**fields: object) -> list[logging.LogRecord]:
        return [r for r in caplog.records
                if all(getattr(r, k, None) == v for k, v in fields.items())]

    activation = records(operation="cold_activation", spot_id="c-1", outcome="activated")
    assert len(activation) == 1
    assert activation[0].name == "zlink_trio.runtime.activation"
    assert activation[0].mesh == "world"
    assert activation[0].object_generation >= 1
    assert activation[0].node_id == "node-a"
    create = records(operation="create", outcome="created")
    assert len(create) == 1
    assert create[0].name == "zlink_trio.runtime.create"
    assert create[0].object_generation >= 1
    assert create[0].mesh == "world"
    assert records(operation="close", outcome="closed", node_id="node-b")
    moved = records(operation="relocation", spot_id="c-1", outcome="committed")
    assert len(moved) == 1
    assert moved[0].name == "zlink_trio.runtime.relocation"
    hop = records(operation="follow", follow="hop", spot_id="c-1")
    assert len(hop) == 1
    assert hop[0].follow_hops == 1
    assert hop[0].name == "zlink_trio.runtime.follow"
    resolved = records(spot_id="c-1", resolve="remote", cache="miss", node_id="node-b")
    assert resolved
    assert resolved[0].name == "zlink_trio.runtime.calls"
    assert records(spot_id="nobody", resolve="missing")
    assert records(spot_id="c-2", stale="no_incarnation", node_id="node-a")
    assert records(spot_id="c-2", stale="answered", node_id="node-b")
    ended = records(spot_id="c-2", outcome="closed", node_id="node-a")
    assert ended
    assert ended[0].name == "zlink_trio.runtime.spots"


class Broken:
    def collect(self) -> list[Any]:
        raise RuntimeError("broken collector")


async def test_the_exposition_answers_only_get_metrics_and_closes_with_the_node(caplog):
    registry = CollectorRegistry()
    with trio.fail_after(LIMIT):
        async with open_node("node-a", MemoryStore(), listen=None, metrics=registry,
                             metrics_port=0) as node:
            url = node.metrics_url
            assert url is not None
            assert url.startswith("http://127.0.0.1:")
            async with httpx.AsyncClient() as client:
                assert (await client.get(url)).status_code == 200
                assert (await client.get(url.replace("/metrics", "/other"))).status_code == 404
                refused = await client.post(url)
                assert refused.status_code == 405
                assert refused.headers["allow"] == "GET, HEAD"
                head = await client.head(url)
                assert head.status_code == 200
                assert head.content == b""
                # A collector that raises fails that scrape (500, logged), not the node.
                broken = Broken()
                registry.register(broken)
                assert (await client.get(url)).status_code == 500
                registry.unregister(broken)
                assert "a collector of the registry raised" in caplog.text
                await node.client.request("c-1", Add(1), reply=Total).instance_spot()
                # A node without links: its gauges still come, with zero links.
                text = (await client.get(url)).text
            assert 'zlink_links{node_id="node-a"} 0.0' in text
        async with httpx.AsyncClient() as client:
            with pytest.raises(httpx.ConnectError):
                await client.get(url)


async def test_bad_metrics_options_are_configuration_errors_before_anything_is_written():
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        with pytest.raises(zl.InvalidConfiguration, match="CollectorRegistry"):
            async with open_node("node-a", store, metrics="registry"):
                pass
        with pytest.raises(zl.InvalidConfiguration, match="metrics_port"):
            async with open_node("node-a", store, metrics_port=70000):
                pass
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = taken.getsockname()[1]
            with pytest.raises(zl.InvalidConfiguration, match="in use"):
                async with open_node("node-a", store, metrics_port=port):
                    pass
        async with open_node("node-a", store, listen=None) as node:
            assert node.metrics_url is None
            assert node.statistics().active_spots == 0  # the same store: nothing was left


async def test_two_nodes_may_share_one_registry_and_each_leaves_with_its_series():
    registry = CollectorRegistry()
    store = MemoryStore()
    with trio.fail_after(LIMIT):
        async with open_node("node-a", store, listen=None, metrics=registry) as a:
            async with open_node("node-b", store, listen=None, metrics=registry):
                await a.client.request("c-1", Add(1), reply=Total).instance_spot()
                both = {s.labels["node_id"] for f in registry.collect() for s in f.samples}
                assert both == {"node-a", "node-b"}
            left = {s.labels["node_id"] for f in registry.collect() for s in f.samples}
            assert left == {"node-a"}


def test_nothing_below_warning_is_printed_by_default_and_metrics_cost_no_import():
    """With no logging configured, INFO records (link opened, Spot moved) print nothing;
    a WARNING of the hierarchy still reaches stderr (Python's last resort handler). A
    node without ``metrics=`` never imports prometheus_client."""
    script = textwrap.dedent("""
        import logging, sys, attrs, trio
        import zlink_trio as zl
        from zlink_trio.store import MemoryStore

        @attrs.frozen
        class Add:
            n: int

        @zl.instance_spot("obs-counter", relocation=zl.RecreateOnRelocation())
        class ObsCounter:
            def __init__(self, ctx):
                pass

            @zl.handler
            async def add(self, msg: Add) -> None:
                pass

        SPOTS = [ObsCounter]

        async def main():
            store = MemoryStore()
            async with zl.open_node("node-a", store=store, spots=SPOTS) as a, \\
                    zl.open_node("node-b", store=store, spots=SPOTS,
                                 placement_weight=0.0) as b:
                await b.client.request("c-1", Add(1), reply=None).instance_spot()
                await a.relocate("c-1", to="node-b")
            logging.getLogger("zlink_trio.runtime.node").warning("probe warning")
            print("prometheus_client" in sys.modules)

        trio.run(main)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=LIMIT, check=True)
    assert done.stdout == "False\n"
    assert done.stderr == "probe warning\n"

