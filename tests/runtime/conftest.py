"""Backend parametrisation for the runtime tests that touch the store.

A test that asks for ``store_url`` runs once per backend: ``memory://`` (a named
in-process store), ``sqlite://`` (a fresh file in ``tmp_path``), ``postgresql://`` (the
test server of ``tests/store/postgres_helpers.py`` under a fresh schema, dropped when the
test ends) and ``redis://`` (the
test Redis of ``tests/store/redis_helpers.py`` -- ``ZLINK_TEST_REDIS``, default
``redis://127.0.0.1:6379/0`` -- under a fresh ``?prefix=`` whose keys are deleted when
the test ends). Redis absent **fails** the test when ``CI`` is set and skips it locally,
exactly as the store suite does. Only tests that exercise the store (cold activation,
get-or-create convergence, close, idle eviction, the capacity ceiling) take the fixture;
everything else stays on ``memory://``, which keeps the extra CI time small.

The ``store`` fixture is the same store opened once more for the test to *read*
(``find``, ``query``, ``statistics``): for memory it is the very object the nodes share
(the named store lives while the fixture holds it open); for SQLite and Redis it is a
second connection to the same file / prefix. Tests never write through it.

Clocks. These tests run on ``MockClock`` (``autojump_clock``), so ``trio.sleep`` and
every deadline are mock seconds. ``open_node`` stamps leases and route-cache ages with
the *store clock*, which defaults to ``trio.current_time`` only for ``memory://``; for a
shared store it is wall-clock ``time.time`` (several processes must agree on it). A test
that opens nodes on ``store_url`` in **one process** therefore passes
``clock=trio.current_time`` (``zlink_trio.testing.open_test_node`` does): then leases expire,
renewals land and cached routes age on the mock clock exactly as on ``memory://``, and a
test that moves the clock (``autojump_clock.jump``) sees the same lease expiry on every
backend. Without it, leases and cache ages would follow wall time, which barely moves
while mock time races ahead.

Autojump and real I/O. On SQLite and Redis the fixture counts the store calls in flight
with the test kit's :class:`zlink_trio.testing.InFlight` -- every public coroutine method
of the backend's Location and Relocation Store classes, and ``open_store`` as
``open_node`` uses it -- which suspends MockClock's autojump while any is in flight (a
jump in the middle of a round trip would land on an arbitrary deadline) and fails the
test, naming the call, when one hangs past ``STORE_CALL_LIMIT`` real seconds (its module
``zlink_trio/testing/store_io.py`` tells why and how).
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import attrs
import pytest
from store_calls import postgres_helpers, redis_helpers

from zlink_trio.core.errors import Unavailable
from zlink_trio.store import open_store
from zlink_trio.testing import InFlight

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import trio.testing

    from zlink_trio.store import Store

#: The backends ``store_url`` runs a test on (the parameter ids).
BACKENDS = ("memory", "sqlite", "redis", "postgresql")


@attrs.frozen
class Backend:
    url: str
    #: The same store opened for the test to read.
    view: Store


@pytest.fixture(params=BACKENDS)
async def _backend(request: pytest.FixtureRequest, tmp_path: Path,
                   autojump_clock: trio.testing.MockClock,
                   monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Backend]:
    kind = request.param
    if kind == "memory":
        url = f"memory://runtime-{uuid.uuid4().hex[:12]}"
        async with open_store(url) as view:
            yield Backend(url, view)
        return
    in_flight = InFlight(autojump_clock)
    in_flight.start()
    try:
        async with _shared_backend(kind, in_flight, tmp_path, monkeypatch) as backend:
            yield backend
    finally:
        in_flight.stop()
    in_flight.check()


@asynccontextmanager
async def _shared_backend(kind: str, in_flight: InFlight, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Backend]:
    """SQLite or Redis: store calls counted (autojump suspended) and watched."""
    opener = in_flight.open_store(open_store)
    in_flight.patch_open_store(monkeypatch)
    if kind == "sqlite":
        url = f"sqlite://{tmp_path / 'store.db'}"
        async with opener(url) as view:
            in_flight.patch_backend(monkeypatch, view)
            yield Backend(url, view)
        return
    helpers = postgres_helpers() if kind == "postgresql" else redis_helpers()
    prefix = helpers.fresh_prefix()
    url = helpers.url_with(prefix)

    async def delete_keys() -> None:
        with in_flight.io(f"deleting the data of {prefix!r}"):
            if kind == "postgresql":
                await helpers.drop_prefix(prefix)
            else:
                await helpers.delete_prefix(prefix)

    problem = ""
    async with AsyncExitStack() as stack:
        try:
            view = await stack.enter_async_context(opener(url))
        except Unavailable as error:
            problem = error.message  # fail/skip outside the handler, once the error is gone
        if not problem:
            stack.push_async_callback(delete_keys)
            in_flight.patch_backend(monkeypatch, view)
            yield Backend(url, view)
    if problem:
        helpers.unreachable(problem)  # fails under CI, skips locally


@pytest.fixture
def store_url(_backend: Backend) -> str:
    """A store URL of each backend, valid (and isolated) for one test; see the module doc."""
    return _backend.url


@pytest.fixture
def store(_backend: Backend) -> Store:
    """The ``store_url`` store, opened for the test to read; the nodes share its contents."""
    return _backend.view


@pytest.fixture(params=BACKENDS)
async def url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    """A store URL of each backend for tests on the *real* clock (links on sockets): a
    named ``memory://`` store, a SQLite file, or Redis under a fresh prefix deleted at the
    end (Redis absent fails under ``CI``, skips locally). Unlike ``store_url`` nothing is
    patched: the nodes' own clock and store calls run as in production."""
    if request.param == "memory":
        yield f"memory://runtime-{uuid.uuid4().hex}"
        return
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'shared.db'}"
        return
    if request.param == "postgresql":
        async with postgres_helpers().fresh_url() as postgres_url:
            yield postgres_url
        return
    helpers = redis_helpers()
    try:
        async with helpers.raw_client() as client:
            await client.command(["PING"])
    except Exception as exc:
        helpers.unreachable(str(exc))
    prefix = helpers.fresh_prefix()
    try:
        yield helpers.url_with(prefix)
    finally:
        await helpers.delete_prefix(prefix)
