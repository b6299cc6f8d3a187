"""A node's startup never hangs: a failed or slow startup scan, or a lease that ran out
before admission opened, ends ``open_node`` with a typed error (``runtime/node.py``).

The Spots' task group is shielded (``Catalog.serve``) so that cancelling the node's
block cannot kill Spots before the drain closes them; every way out of ``open_node``
must therefore cancel it, a startup that failed before the block was entered included.
A regression would hang ``open_node`` beyond any cancel scope, so each test opens the
node in a Trio run of its own (on a ``MockClock`` that jumps ahead) in a worker thread,
and fails when that run has not ended within a real-time bound.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest
import trio
import trio.testing
from runtime_spots import Counter

import zlink_trio as zl
from zlink_trio.store.memory import MemoryLocationStore
from zlink_trio.testing import MemoryStoreWith, open_test_node

#: The node's ``default_timeout``: it bounds the startup scan.
TIMEOUT = 5.0


class FailingScan(MemoryLocationStore):
    """The startup scan's first read fails as a store outage would."""

    async def orphans(self, node_id: str, **kwargs: Any) -> Any:
        raise zl.StoreUnavailable("the store did not answer the orphan scan (test)")


class HangingScan(MemoryLocationStore):
    """The startup scan's first read never answers."""

    async def orphans(self, node_id: str, **kwargs: Any) -> Any:
        await trio.sleep_forever()


class SlowStore(MemoryLocationStore):
    """The scan answers after ``delay``; renewals never answer, so the lease runs out."""

    delay = 0.0

    async def orphans(self, node_id: str, **kwargs: Any) -> Any:
        await trio.sleep(self.delay)
        return await super().orphans(node_id, **kwargs)

    async def renew(self, *args: Any, **kwargs: Any) -> Any:
        await trio.sleep_forever()


async def _open(location: MemoryLocationStore, **options: Any) -> None:
    async with open_test_node("node-a", store=MemoryStoreWith(location), spots=[Counter],
                              default_timeout=TIMEOUT, **options):
        pytest.fail("the node opened although its startup failed")


async def _startup_error(location: MemoryLocationStore, **options: Any
                         ) -> tuple[BaseException | None, float]:
    """What opening a node on ``location`` raised, and the virtual time it took."""

    def own_run() -> tuple[BaseException | None, float]:
        clock = trio.testing.MockClock(autojump_threshold=0)
        try:
            trio.run(functools.partial(_open, location, **options), clock=clock)
        except BaseException as exc:  # (the outcome under test)
            return exc, clock.current_time()
        return None, clock.current_time()

    with trio.fail_after(30):  # real time: the run jumps its clock, so it ends at once
        return await trio.to_thread.run_sync(own_run, abandon_on_cancel=True)


async def test_a_failed_startup_scan_ends_open_node_with_its_error():
    error, _ = await _startup_error(FailingScan())
    assert isinstance(error, zl.StoreUnavailable), error
    assert "orphan scan" in str(error)


async def test_a_startup_scan_past_the_deadline_ends_open_node_unavailable():
    error, took = await _startup_error(HangingScan())
    assert isinstance(error, zl.Unavailable), error
    assert "startup authority scan" in str(error)
    assert took >= TIMEOUT


async def test_a_lease_that_ran_out_during_startup_is_a_typed_error():
    slow = SlowStore()
    slow.delay = 4.0  # past the 3 s lease, within the scan's 5 s bound
    error, _ = await _startup_error(slow, lease=3.0)
    assert isinstance(error, zl.Unavailable), error
    assert "lease ran out before" in str(error)
