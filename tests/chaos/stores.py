"""The chaos runs' stores: a fresh SQLite file, Redis prefix or PostgreSQL schema per run.

:func:`chaos_store` yields a store URL: a SQLite file in ``directory`` with a 0.5 s busy
timeout (so "locked past the busy timeout" fits the time budget), or the test Redis
(``tests/store/redis_helpers.py``, ``ZLINK_TEST_REDIS``) under a fresh ``?prefix=`` whose
keys are deleted afterwards; absent Redis fails under ``CI`` and skips locally. A row that
acts on the whole Redis server (``Fault.acts_on_the_store_server``: ``CLIENT PAUSE``) gets a
``redis-server`` of its own (``redis_helpers.own_server``): paused, the shared one would
stall every test running beside it. PostgreSQL (``tests/store/postgres_helpers.py``,
``ZLINK_TEST_POSTGRES``) gets a fresh schema, dropped afterwards, with ``?timeout=0.5``
(a wait for the write lock bounded like SQLite's busy timeout).
"""

from __future__ import annotations

import importlib.util
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ("chaos_store",)

HERE = Path(__file__).parent


def redis_helpers() -> Any:
    return _helpers("redis_helpers")


def _helpers(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"chaos_{name}", HERE.parent / "store" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def chaos_store(backend: str, directory: Path, *, own_server: bool = False
                      ) -> AsyncIterator[str]:
    """A fresh store URL on ``backend`` (``sqlite``, ``redis`` -- with ``own_server``, on
    a Redis server of this run alone -- or ``postgresql``); see the module doc."""
    if backend == "sqlite":
        yield f"sqlite://{directory / 'chaos.db'}?busy_timeout=0.5"
        return
    if backend == "postgresql":  # waits for a lock bounded like SQLite's busy timeout
        async with _helpers("postgres_helpers").fresh_url(timeout=0.5) as url:
            yield url
        return
    helpers = redis_helpers()
    async with AsyncExitStack() as stack:
        server = await stack.enter_async_context(helpers.own_server()) if own_server else ""
        yield await stack.enter_async_context(helpers.fresh_url(server))
