"""The backends the ShoppingMall store tests run on: the ``url`` fixture and its helpers.

``url`` is a store URL of each backend, isolated for one test: SQLite -- a fresh
file (every store in it: they share one file without sharing a table); Redis --
``ZLINK_TEST_REDIS`` (default 127.0.0.1:6379) with a fresh key prefix, deleted
afterwards. Unreachable Redis **fails** under CI (``CI`` set) and is skipped
locally, exactly as ``tests/store/redis_helpers.py`` decides. Test modules
import ``url`` from here (no conftest, so the sample's other test modules keep
theirs to themselves).
"""

from __future__ import annotations

import importlib.util
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    open_order_event_store,
)

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from types import ModuleType

#: The bound of every I/O test (``trio.fail_after``).
TIMEOUT = 20
BACKENDS = ("sqlite", "redis")


def redis_helpers() -> ModuleType:
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


@asynccontextmanager
async def backend_url(kind: str, directory: Path) -> AsyncIterator[str]:
    """A fresh URL of backend ``kind``; a SQLite file goes in ``directory``."""
    if kind == "sqlite":
        yield f"sqlite://{directory / 'shoppingmall.db'}"
        return
    helpers = redis_helpers()
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


@pytest.fixture(params=BACKENDS)
async def url(request, tmp_path):
    """A store URL of each backend, isolated for one test (module docstring)."""
    async with backend_url(request.param, tmp_path) as opened:
        yield opened


@attrs.frozen
class Line:
    """Stands in for the domain's OrderLine (the modules need only sku and quantity)."""

    sku: str
    quantity: int
