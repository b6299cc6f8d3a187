"""The chaos runs' stores: a fresh SQLite file or a fresh Redis prefix per run.

:func:`chaos_store` yields a store URL: a SQLite file in ``directory`` with a 0.5 s busy
timeout (so "locked past the busy timeout" fits the time budget), or the test Redis
(``tests/store/redis_helpers.py``, ``ZLINK_TEST_REDIS``) under a fresh ``?prefix=`` whose
keys are deleted afterwards; absent Redis fails under ``CI`` and skips locally.
"""

from __future__ import annotations

import importlib.util
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

__all__ = ("chaos_store",)

HERE = Path(__file__).parent


def redis_helpers() -> Any:
    spec = importlib.util.spec_from_file_location(
        "chaos_redis_helpers", HERE.parent / "store" / "redis_helpers.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@asynccontextmanager
async def chaos_store(backend: str, directory: Path) -> AsyncIterator[str]:
    """A fresh store URL on ``backend`` (``sqlite`` or ``redis``); see the module doc."""
    if backend == "sqlite":
        yield f"sqlite://{directory / 'chaos.db'}?busy_timeout=0.5"
        return
    helpers = redis_helpers()

    try:
        async with helpers.raw_client() as client:
            await client.ping()
    except Exception as exc:
        problem = str(exc)
    else:
        problem = ""
    if problem:
        helpers.unreachable(problem)
    prefix = helpers.fresh_prefix()
    try:
        yield helpers.url_with(prefix)
    finally:
        await helpers.delete_prefix(prefix)
