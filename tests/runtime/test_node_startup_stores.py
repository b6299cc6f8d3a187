"""A node's startup never hangs on a real store that stops answering or drops its link.

``open_node`` on Redis behind a relay (``tests/chaos/relay.py``) that black-holes or
cuts the store's connections, and on a SQLite file another process keeps locked, either
starts (once the store answers) or ends with a typed error (``zl.ZLinkError``) within a
bound set by its own deadlines -- never waits for ever, and never hands back a node whose
lease has already expired. Real sockets and files: the real clock, bounded by
``trio.fail_after``.
"""

from __future__ import annotations

import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import pytest
import trio
from runtime_spots import Add, Counter, Total
from store_calls import chaos_relay, redis_helpers

import zlink_trio as zl

if TYPE_CHECKING:
    from pathlib import Path

#: The nodes' bounds: every startup store step within ``TIMEOUT``, a short lease.
TIMEOUT = 1.0
LEASE = 1.5
#: Real seconds a failed startup may take: the claim's wait, the scan, the close.
GIVE_UP = 4 * TIMEOUT + 2 * LEASE + 5


def _relayed(url: str, port: int) -> str:
    """``url`` through the relay on ``port``, each store call bounded by ``TIMEOUT``."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}")) + f"&timeout={TIMEOUT}"


def _port(url: str) -> int:
    return urlsplit(url).port or 6379


async def _opens(url: str) -> BaseException | None:
    """Open a node on ``url``: ``None`` when it served one call, else what it raised."""
    try:
        async with zl.open_node("n1", store=url, spots=[Counter], listen=None,
                                default_timeout=TIMEOUT, lease=LEASE) as node:
            assert node.statistics().lease_expires_at > time.time()  # never expired
            reply = await node.client.request("c-1", Add(1), reply=Total).instance_spot()
            assert reply.value >= 1
    except zl.ZLinkError as exc:
        return exc
    return None


@pytest.mark.parametrize("fault", ["blackhole", "cut"])
async def test_redis_that_stops_answering_during_startup_ends_it_typed(fault: str) -> None:
    helpers = redis_helpers()
    async with helpers.fresh_url() as direct, chaos_relay().open_relay(
            _port(direct)) as relay:
        url = _relayed(direct, relay.port)
        getattr(relay, fault)()
        with trio.fail_after(GIVE_UP + 10):
            began = trio.current_time()
            error = await _opens(url)
            took = trio.current_time() - began
        assert isinstance(error, zl.ZLinkError), error
        assert took < GIVE_UP, took
        relay.heal()  # the store answers again: the next start serves
        with trio.fail_after(GIVE_UP + 10):
            assert await _opens(url) is None


async def test_redis_whose_link_drops_in_the_middle_of_startup_never_hangs() -> None:
    """The relay cuts the store's connections while the startup runs (after the claim,
    before or during the scan): the start succeeds or fails typed, in bounded time."""
    helpers = redis_helpers()
    async with helpers.fresh_url() as direct, chaos_relay().open_relay(
            _port(direct)) as relay:
        url = _relayed(direct, relay.port)
        outcomes: list[BaseException | None] = []
        for delay in (0.0, 0.005, 0.02, 0.05):
            relay.heal()

            async def cut_soon(delay: float = delay) -> None:
                await trio.sleep(delay)
                relay.cut()
                await trio.sleep(0.3)
                relay.heal()

            with trio.fail_after(GIVE_UP + 10):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(cut_soon)
                    outcomes.append(await _opens(url))
        assert all(o is None or isinstance(o, zl.ZLinkError) for o in outcomes), outcomes


LOCKER = """
import sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
sys.stdin.readline()
conn.execute("ROLLBACK")
"""


async def test_sqlite_file_locked_during_startup_ends_it_typed(tmp_path: Path) -> None:
    path = tmp_path / "startup.db"
    url = f"sqlite://{path}?busy_timeout=0.2"
    assert await _opens(url) is None  # the schema exists; the lock is the only fault
    locker: Any = await trio.lowlevel.open_process(
        [sys.executable, "-c", LOCKER, str(path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE)
    try:
        with trio.fail_after(10):
            assert (await locker.stdout.receive_some(64)).startswith(b"locked")
        with trio.fail_after(GIVE_UP + 10):
            began = trio.current_time()
            error = await _opens(url)
            took = trio.current_time() - began
        assert isinstance(error, zl.ZLinkError), error
        assert took < GIVE_UP, took
    finally:
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            if locker.returncode is None:
                await locker.stdin.send_all(b"\n")
            await locker.wait()
            await locker.stdin.aclose()
            await locker.stdout.aclose()
    with trio.fail_after(GIVE_UP + 10):
        assert await _opens(url) is None  # released: the next start serves
