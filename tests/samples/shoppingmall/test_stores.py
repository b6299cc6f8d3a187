"""ShoppingMall's OrderEventStore and OrderReadModelStore: one conformance suite, both backends.

Every test taking ``url`` runs on SQLite and on Redis (``store_backends``).
Concurrency goes through two store objects opened on the same URL -- two
connections, as two processes would have -- and once through two real
processes. Each test bounds itself with ``trio.fail_after``; nothing sleeps.
"""

from __future__ import annotations

import functools
import json
import logging
import random
import sys
from pathlib import Path

import pytest
import trio
from store_backends import TIMEOUT, redis_helpers, url

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    ExpectedVersionConflict,
    NewEvent,
    open_order_event_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.storage.redis_db import ONE_LINE
from zlink_trio.samples.shoppingmall.server.storage.store_url import (
    RedisTarget,
    SqliteTarget,
    parse_store_url,
)

__all__ = ("url",)  # the fixture, imported for pytest


def _event(event_type: str, body: str = "{}") -> NewEvent:
    return NewEvent(event_type=event_type, payload=body)


# -- OrderEventStore ----------------------------------------------------------------------


async def test_event_stream_reads_back_in_order(url):
    with trio.fail_after(TIMEOUT):
        async with open_order_event_store(url) as store:
            assert await store.read("o-1") == ()
            assert await store.current_version("o-1") == 0
            first = await store.append("o-1", 0, [_event("OrderStartedEvent", '{"a":1}')],
                                       source_command_id="start-1")
            assert (first.version, first.deduplicated) == (1, False)
            await store.append("o-1", 1, [_event("InventoryReservedEvent"),
                                          _event("PaymentAuthorizedEvent")])
            await store.append("o-2", 0, [_event("OrderStartedEvent")])  # another stream
            events = await store.read("o-1")
            assert [(e.version, e.event_type) for e in events] == [
                (1, "OrderStartedEvent"), (2, "InventoryReservedEvent"),
                (3, "PaymentAuthorizedEvent")]
            assert events[0].payload == '{"a":1}'
            assert events[0].source_command_id == "start-1"
            assert events[1].source_command_id is None
            assert events[0] == first.events[0]
            assert [e.version for e in await store.read("o-1", after_version=1)] == [2, 3]
            assert await store.current_version("o-1") == 3
            assert await store.current_version("o-2") == 1


async def test_event_expected_version_conflict_writes_nothing(url):
    with trio.fail_after(TIMEOUT):
        async with open_order_event_store(url) as store:
            await store.append("o-1", 0, [_event("OrderStartedEvent")])
            for stale in (0, 2):
                with pytest.raises(ExpectedVersionConflict) as caught:
                    await store.append("o-1", stale, [_event("A"), _event("B")],
                                       source_command_id=f"late-{stale}")
                assert isinstance(caught.value, zl.StaleFence)
                assert (caught.value.expected, caught.value.current) == (stale, 1)
            assert [e.event_type for e in await store.read("o-1")] == ["OrderStartedEvent"]
            # The refused command ids were not recorded: they may append later.
            later = await store.append("o-1", 1, [_event("C")], source_command_id="late-0")
            assert (later.version, later.deduplicated) == (2, False)


async def test_event_source_command_dedupe_returns_the_earlier_append(url):
    with trio.fail_after(TIMEOUT):
        async with open_order_event_store(url) as store:
            await store.append("o-1", 0, [_event("OrderStartedEvent")], source_command_id="s")
            first = await store.append("o-1", 1, [_event("A"), _event("B")],
                                       source_command_id="cont-1")
            await store.append("o-1", 3, [_event("C")])
            again = await store.append("o-1", 1, [_event("Other", '{"x":2}')],
                                       source_command_id="cont-1")
            assert again.deduplicated
            assert again.events == first.events
            assert again.version == 4  # the stream's current version
            assert len(await store.read("o-1")) == 4  # nothing written
            # SourceCommandIds are per stream: the same id starts another order.
            other = await store.append("o-2", 0, [_event("OrderStartedEvent")],
                                       source_command_id="s")
            assert not other.deduplicated


async def test_event_malformed_appends_are_refused(url):
    with trio.fail_after(TIMEOUT):
        async with open_order_event_store(url) as store:
            for order_id, expected, events, source in [
                ("", 0, [_event("A")], None),
                ("o-1", -1, [_event("A")], None),
                ("o-1", True, [_event("A")], None),
                ("o-1", 0, [], None),
                ("o-1", 0, [_event("")], None),
                ("o-1", 0, [_event("A")], ""),
            ]:
                with pytest.raises(zl.InvalidOperation):
                    await store.append(order_id, expected, events, source_command_id=source)
            assert await store.current_version("o-1") == 0
            with pytest.raises(zl.InvalidOperation):
                await store.read("o-1", after_version=-1)
            with pytest.raises(zl.InvalidOperation):
                await store.read("x" * 256)


async def test_event_concurrent_appends_one_winner(url):
    n = 20
    outcomes: list[str] = []
    with trio.fail_after(TIMEOUT):
        async with open_order_event_store(url) as a, open_order_event_store(url) as b:
            async def attempt(i: int) -> None:
                store = (a, b)[i % 2]
                try:
                    await store.append("o-1", 0, [_event("OrderStartedEvent"), _event("X")],
                                       source_command_id=f"cmd-{i}")
                except ExpectedVersionConflict as error:
                    outcomes.append(f"conflict at {error.current}")
                else:
                    outcomes.append("won")

            async with trio.open_nursery() as nursery:
                for i in range(n):
                    nursery.start_soon(attempt, i)
            assert sorted(outcomes) == ["conflict at 2"] * (n - 1) + ["won"]
            events = await a.read("o-1")
            assert [e.version for e in events] == [1, 2]  # one whole append, never half
            assert len({e.source_command_id for e in events}) == 1


async def test_event_concurrent_retries_of_one_command_write_once(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with open_order_event_store(url) as a, open_order_event_store(url) as b:
            async def attempt(i: int) -> None:
                results.append(await (a, b)[i % 2].append(
                    "o-1", 0, [_event("OrderStartedEvent")], source_command_id="start"))

            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(attempt, i)
            assert sum(not r.deduplicated for r in results) == 1
            assert len({r.events for r in results}) == 1
            assert await b.current_version("o-1") == 1


# -- OrderReadModelStore ------------------------------------------------------------------


async def test_read_model_put_get_delete(url):
    with trio.fail_after(TIMEOUT):
        async with open_order_read_model_store(url) as store:
            assert await store.get("o-1") is None
            put = await store.put("o-1", 1, '{"status":"Created"}')
            assert put.written
            assert (put.current.version, put.current.document) == (1, '{"status":"Created"}')
            assert await store.get("o-1") == put.current
            assert await store.delete("o-1")
            assert not await store.delete("o-1")
            assert await store.get("o-1") is None
            with pytest.raises(zl.InvalidOperation):
                await store.put("o-1", -1, "{}")


async def test_read_model_older_version_never_overwrites(url):
    with trio.fail_after(TIMEOUT):
        async with open_order_read_model_store(url) as store:
            await store.put("o-1", 3, '{"v":3}')
            older = await store.put("o-1", 2, '{"v":2}')
            assert not older.written
            assert (older.current.version, older.current.document) == (3, '{"v":3}')
            repaired = await store.put("o-1", 3, '{"v":"3 again"}')  # a rebuild repairs
            assert repaired.written
            assert (await store.put("o-1", 4, '{"v":4}')).written
            current = await store.get("o-1")
            assert current is not None
            assert (current.version, current.document) == (4, '{"v":4}')


async def test_read_model_concurrent_puts_keep_the_newest(url):
    versions = list(range(1, 31))
    random.Random(7).shuffle(versions)
    with trio.fail_after(TIMEOUT):
        async with (open_order_read_model_store(url) as a,
                    open_order_read_model_store(url) as b):
            async with trio.open_nursery() as nursery:
                for i, version in enumerate(versions):
                    nursery.start_soon((a, b)[i % 2].put, "o-1", version, f'{{"v":{version}}}')
            current = await a.get("o-1")
            assert current is not None
            assert (current.version, current.document) == (30, '{"v":30}')


# -- URLs --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [
    "memory://", "sqlite://host/x.db", "sqlite://relative.db", "sqlite:///dir/",
    "sqlite:///x.db?busy_timeout=-1", "sqlite:///x.db?dispatch=thread", "redis://h:x/0",
    "redis://h/notanumber", "redis://h/0?prefix=a:b", "redis://h/0?timeout=0", "no-scheme",
])
def test_malformed_store_urls_are_refused(bad):
    with pytest.raises(zl.InvalidConfiguration):
        parse_store_url(bad)


def test_store_urls_parse():
    assert parse_store_url("sqlite:///tmp/a.db?busy_timeout=2") == SqliteTarget(
        path="/tmp/a.db", busy_timeout=2.0)
    target = parse_store_url("redis://u:pw@10.0.0.1:6380/3?prefix=mall&timeout=1.5")
    assert isinstance(target, RedisTarget)
    assert (target.host, target.port, target.db, target.username, target.password,
            target.prefix, target.timeout) == ("10.0.0.1", 6380, 3, "u", "pw", "mall", 1.5)
    assert "pw" not in repr(target)


async def test_unreachable_redis_is_store_unavailable():
    with trio.fail_after(TIMEOUT):
        with pytest.raises(zl.StoreUnavailable):
            async with open_order_event_store("redis://127.0.0.1:1/0?timeout=2"):
                pass
    redis_helpers().collect_failed_connections()


async def test_a_redis_that_does_not_answer_is_one_coredis_line_without_a_traceback(caplog):
    """coredis logs a connection that failed during its setup with pages of traceback; while
    a store of the sample is open that is one line naming the errors, and the filter
    that does it leaves the ``coredis`` logger with the last store."""
    caplog.set_level(logging.INFO, logger="coredis")

    async def silent(stream: trio.SocketStream) -> None:
        async with stream:  # accepts, never answers: a paused or half-started server
            await trio.sleep_forever()

    with trio.fail_after(TIMEOUT):
        async with trio.open_nursery() as nursery:
            listeners = await nursery.start(
                functools.partial(trio.serve_tcp, silent, 0, host="127.0.0.1"))
            port = listeners[0].socket.getsockname()[1]
            for _ in range(3):
                with pytest.raises(zl.StoreUnavailable, match="Unable to establish"):
                    async with open_order_event_store(
                            f"redis://127.0.0.1:{port}/0?timeout=0.2"):
                        pass
            nursery.cancel_scope.cancel()
    redis_helpers().collect_failed_connections()
    lines = [r for r in caplog.records if r.name == "coredis"]
    assert len(lines) == 3  # one per failed connection attempt
    for record in lines:
        assert record.levelno == logging.ERROR
        assert record.exc_info is None
        assert record.getMessage().startswith("Connection attempt failed unexpectedly! (")
        assert "\n" not in record.getMessage()
    assert "Traceback" not in caplog.text
    assert ONE_LINE not in logging.getLogger("coredis").filters


async def test_two_processes_converge_on_one_order(url):
    """Item 9.2-1 across processes: one IdempotencyKey, one OrderId, one start event."""
    worker = Path(__file__).parent / "stores_worker.py"
    outputs: list[bytes] = []

    async def run(name: str) -> None:
        done = await trio.run_process([sys.executable, str(worker), url, name, "25"],
                                      capture_stdout=True)
        outputs.append(done.stdout)

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "a")
            nursery.start_soon(run, "b")
        reports = [json.loads(output) for output in outputs]
        assert sum(len(report["won"]) for report in reports) == 1
        assert len({order for report in reports for order in report["seen"]}) == 1
        assert sum(report["appended"] for report in reports) == 1
        async with open_order_event_store(url) as store:
            assert await store.current_version("o-mp") == 1
