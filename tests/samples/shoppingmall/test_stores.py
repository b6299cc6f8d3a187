"""ShoppingMall's application stores and module stand-ins: one conformance suite, both backends.

Every test taking ``url`` runs on SQLite (a fresh file per test, every store in
it: they share one file without sharing a table) and on Redis
(``ZLINK_TEST_REDIS``, default 127.0.0.1:6379, a fresh key prefix per test,
deleted afterwards; unreachable Redis **fails** under CI and is skipped
locally, as in ``tests/store/redis_helpers.py``). Concurrency goes through two
store objects opened on the same URL -- two connections, as two processes
would have. Each test bounds itself with ``trio.fail_after``; nothing sleeps.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.state_store import (
    IdempotencyStatus,
    MappingConflict,
    open_commerce_state_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.effect_calls import (
    EffectResult,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    ExpectedVersionConflict,
    NewEvent,
    open_order_event_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.inventory import (
    INSUFFICIENT,
    NOT_RESERVED,
    open_inventory,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.payment import (
    REJECTED,
    UNKNOWN_METHOD,
    open_payment,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.read_model_store import (
    open_order_read_model_store,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.store_url import (
    RedisTarget,
    SqliteTarget,
    parse_store_url,
)

if TYPE_CHECKING:
    from types import ModuleType

TIMEOUT = 20


def _redis_helpers() -> ModuleType:
    """``tests/store/redis_helpers.py``, shared (one module object) with the store suite."""
    module = sys.modules.get("redis_helpers")
    if module is None:
        path = Path(__file__).parents[2] / "store" / "redis_helpers.py"
        spec = importlib.util.spec_from_file_location("redis_helpers", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["redis_helpers"] = module
        spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["sqlite", "redis"])
async def url(request, tmp_path):
    """A store URL of each backend, isolated for one test (module docstring)."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'shoppingmall.db'}"
        return
    helpers = _redis_helpers()
    prefix = helpers.fresh_prefix()
    redis_url = helpers.url_with(prefix)
    problem = ""
    try:
        with trio.fail_after(TIMEOUT):
            async with open_order_event_store(redis_url):  # opening PINGs the server
                pass
    except zl.Unavailable as error:
        problem = error.message  # fail/skip outside the handler, once the error is gone
    if problem:
        helpers.unreachable(problem)  # fails under CI, skips locally
    try:
        yield redis_url
    finally:
        await helpers.delete_prefix(prefix)


@attrs.frozen
class Line:
    """Stands in for the domain's OrderLine (the module needs only sku and quantity)."""

    sku: str
    quantity: int


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


# -- CommerceStateStore -------------------------------------------------------------------


async def test_idempotency_50_concurrent_identical_starts_one_winner(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with (open_commerce_state_store(url) as a,
                    open_commerce_state_store(url) as b):
            async def start(i: int) -> None:
                results.append((i, await (a, b)[i % 2].reserve_order(
                    "idem-1", f"order-{i}", f'{{"candidate":{i}}}')))

            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(start, i)
            winners = [i for i, result in results if result.reserved]
            assert len(winners) == 1
            mappings = {result.mapping for _, result in results}
            assert len(mappings) == 1
            (mapping,) = mappings
            assert mapping.order_id == f"order-{winners[0]}"
            assert mapping.snapshot == f'{{"candidate":{winners[0]}}}'
            assert mapping.status is IdempotencyStatus.PENDING
            assert await a.get_mapping("idem-1") == mapping
            assert await a.get_mapping("idem-2") is None


async def test_idempotency_pending_to_started_is_a_compare_and_set(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with (open_commerce_state_store(url) as a,
                    open_commerce_state_store(url) as b):
            with pytest.raises(zl.NotFound):
                await a.mark_started("idem-1", "order-1")
            await a.reserve_order("idem-1", "order-1")
            with pytest.raises(MappingConflict) as caught:
                await b.mark_started("idem-1", "order-2")
            assert isinstance(caught.value, zl.StaleFence)
            assert caught.value.mapping.order_id == "order-1"
            pending = await a.get_mapping("idem-1")
            assert pending is not None
            assert pending.status is IdempotencyStatus.PENDING  # the conflict wrote nothing

            async def mark(i: int) -> None:
                results.append(await (a, b)[i % 2].mark_started("idem-1", "order-1"))

            async with trio.open_nursery() as nursery:
                for i in range(50):
                    nursery.start_soon(mark, i)
            assert sum(r.changed for r in results) == 1
            assert {r.mapping.status for r in results} == {IdempotencyStatus.STARTED}
            again = await a.reserve_order("idem-1", "order-9")
            assert not again.reserved
            assert (again.mapping.order_id, again.mapping.status) == (
                "order-1", IdempotencyStatus.STARTED)


async def test_cart_snapshots(url):
    with trio.fail_after(TIMEOUT):
        async with open_commerce_state_store(url) as store:
            assert await store.get_cart("cart-1") is None
            await store.put_cart("cart-1", '{"lines":[]}')
            await store.put_cart("cart-1", '{"lines":[["sku-1",1]]}')
            assert await store.get_cart("cart-1") == '{"lines":[["sku-1",1]]}'
            with pytest.raises(zl.InvalidOperation):
                await store.put_cart("", "{}")


# -- Inventory and Payment ------------------------------------------------------------------


async def test_inventory_first_result_wins_under_concurrency(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as a, open_inventory(url) as b:
            await a.seed_stock("sku-1", 5)
            await a.seed_stock("sku-2", 1)

            async def reserve(i: int) -> None:
                results.append(await (a, b)[i % 2].reserve(
                    "o-1", "o-1:reservation", [Line("sku-1", 1), Line("sku-2", 1),
                                               Line("sku-1", 1)]))

            async with trio.open_nursery() as nursery:
                for i in range(30):
                    nursery.start_soon(reserve, i)
            assert set(results) == {EffectResult(accepted=True)}
            assert (await a.stock("sku-1"), await a.stock("sku-2")) == (3, 0)  # taken once
            calls = await b.calls("o-1")
            assert len(calls) == 30
            assert [c.effect for c in calls].count(True) == 1
            assert {(c.module, c.operation, c.request_id) for c in calls} == {
                ("inventory", "reserve", "o-1:reservation")}


async def test_inventory_insufficient_stock_is_refused_for_good(url):
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as inventory:
            await inventory.seed_stock("sku-1", 1)
            refused = await inventory.reserve("o-1", "r-1", [Line("sku-1", 2)])
            assert refused == EffectResult(accepted=False, reason=INSUFFICIENT)
            unseeded = await inventory.reserve("o-2", "r-2", [Line("sku-9", 1)])
            assert unseeded == EffectResult(accepted=False, reason=INSUFFICIENT)
            assert await inventory.stock("sku-1") == 1  # nothing taken
            await inventory.seed_stock("sku-1", 10)
            assert await inventory.reserve("o-1", "r-1", [Line("sku-1", 2)]) == refused
            assert await inventory.stock("sku-1") == 10
            release = await inventory.release("o-1", "r-1", "inventory failed")
            assert release == EffectResult(accepted=False, reason=NOT_RESERVED)
            with pytest.raises(zl.InvalidOperation):
                await inventory.reserve("o-3", "r-3", [])
            with pytest.raises(zl.InvalidOperation):
                await inventory.reserve("o-3", "r-3", [Line("sku-1", 0)])


async def test_inventory_release_returns_the_stock_once(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as a, open_inventory(url) as b:
            await a.seed_stock("sku-1", 4)
            assert (await a.reserve("o-1", "r-1", [Line("sku-1", 3)])).accepted
            assert await a.stock("sku-1") == 1

            async def release(i: int) -> None:
                results.append(await (a, b)[i % 2].release("o-1", "r-1", "payment failed"))

            async with trio.open_nursery() as nursery:
                for i in range(20):
                    nursery.start_soon(release, i)
            assert set(results) == {EffectResult(accepted=True)}
            assert await a.stock("sku-1") == 4
            releases = [c for c in await a.calls("o-1") if c.operation == "release"]
            assert len(releases) == 20
            assert [c.effect for c in releases].count(True) == 1


async def test_payment_first_result_wins_under_concurrency(url):
    results = []
    with trio.fail_after(TIMEOUT):
        async with open_payment(url) as a, open_payment(url) as b:
            await a.seed_payment_method("card-ok", accept=True)

            async def authorize(i: int) -> None:
                results.append(await (a, b)[i % 2].authorize(
                    "o-1", "o-1:payment", "card-ok", 42.5, "KRW"))

            async with trio.open_nursery() as nursery:
                for i in range(30):
                    nursery.start_soon(authorize, i)
            assert set(results) == {EffectResult(accepted=True)}
            await a.seed_payment_method("card-ok", accept=False)  # the first result stays
            assert await b.authorize("o-1", "o-1:payment", "card-ok", 42.5, "KRW") == \
                EffectResult(accepted=True)
            calls = await a.calls("o-1")
            assert len(calls) == 31
            assert [c.effect for c in calls].count(True) == 1
            assert {(c.module, c.operation) for c in calls} == {("payment", "authorize")}


async def test_payment_follows_the_seeds(url):
    with trio.fail_after(TIMEOUT):
        async with open_payment(url) as payment:
            await payment.seed_payment_method("card-declined", accept=False)
            await payment.seed_payment_method("card-limit", accept=False, reason="over-limit")
            assert await payment.authorize("o-1", "p-1", "card-declined", 10, "KRW") == \
                EffectResult(accepted=False, reason=REJECTED)
            assert await payment.authorize("o-2", "p-2", "card-limit", 10, "KRW") == \
                EffectResult(accepted=False, reason="over-limit")
            assert await payment.authorize("o-3", "p-3", "card-nobody", 10, "KRW") == \
                EffectResult(accepted=False, reason=UNKNOWN_METHOD)
            with pytest.raises(zl.InvalidOperation):
                await payment.authorize("o-4", "p-4", "card-limit", True, "KRW")


async def test_module_calls_are_kept_per_order_and_module(url):
    with trio.fail_after(TIMEOUT):
        async with open_inventory(url) as inventory, open_payment(url) as payment:
            await inventory.seed_stock("sku-1", 1)
            await payment.seed_payment_method("card-ok", accept=True)
            await inventory.reserve("o-1", "r-1", [Line("sku-1", 1)])
            await payment.authorize("o-1", "p-1", "card-ok", 1, "KRW")
            await inventory.reserve("o-2", "r-2", [Line("sku-1", 1)])
            assert [c.operation for c in await inventory.calls("o-1")] == ["reserve"]
            assert [c.operation for c in await payment.calls("o-1")] == ["authorize"]
            (refused,) = await inventory.calls("o-2")
            assert refused.result == EffectResult(accepted=False, reason=INSUFFICIENT)
            assert await payment.calls("o-2") == ()  # no Payment module call


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
    _redis_helpers().collect_failed_connections()


async def test_two_processes_converge_on_one_order(url):
    """§9.2-1 across processes: one IdempotencyKey, one OrderId, one start event."""
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
