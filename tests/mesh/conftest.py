"""The shared store of the multi-process mesh tests: a SQLite file, a Redis prefix or a
PostgreSQL schema.

``mesh_url`` runs a test once per shared backend: ``sqlite`` (a fresh file in
``tmp_path``), ``redis`` (the test Redis of ``tests/store/redis_helpers.py`` under a
fresh ``?prefix=`` whose keys are deleted afterwards; absent Redis fails under ``CI`` and
skips locally) and ``postgresql`` (the test PostgreSQL of
``tests/store/postgres_helpers.py`` in a fresh schema, dropped afterwards; likewise).
``relocation_url`` adds ``memory`` (a fresh named in-process store); ``chat_url`` adds
``redis-cluster`` (the test cluster under a fresh prefix).
Tests that use real sockets run on the real clock: they never take
``autojump_clock``, and bound themselves with ``trio.fail_after``.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

HERE = Path(__file__).parent


def redis_helpers() -> Any:
    return _helpers("redis_helpers")


def postgres_helpers() -> Any:
    return _helpers("postgres_helpers")


def _helpers(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"mesh_{name}", HERE.parent / "store" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def shared_url(backend: str, tmp_path: Path) -> AsyncIterator[str]:
    """One test's store URL on ``backend`` (``memory``: a fresh named in-process store)."""
    if backend == "memory":
        yield f"memory://mesh-{uuid.uuid4().hex}"
        return
    if backend == "sqlite":
        yield f"sqlite://{tmp_path / 'mesh.db'}"
        return
    if backend == "redis-cluster":
        async with redis_helpers().fresh_cluster_url() as url:
            yield url
        return
    if backend == "postgresql":
        async with postgres_helpers().fresh_url() as url:
            yield url
        return
    async with redis_helpers().fresh_url() as url:
        yield url


@pytest.fixture(params=["sqlite", "redis", "postgresql"])
async def mesh_url(request, tmp_path):
    async for url in shared_url(request.param, tmp_path):
        yield url


@pytest.fixture(params=["sqlite", "redis", "redis-cluster"])
async def chat_url(request, tmp_path):
    """``mesh_url`` plus ``redis-cluster``: the Actors test across processes runs there
    too (a room's members follow its SpotWide move in their own buckets)."""
    async for url in shared_url(request.param, tmp_path):
        yield url


@pytest.fixture(params=["memory", "sqlite", "redis", "postgresql"])
async def relocation_url(request, tmp_path):
    """``mesh_url`` plus ``memory``, whose nodes run in the test's process (see
    ``mesh_node_procs.open_mesh``): the relocation tests run on every backend."""
    async for url in shared_url(request.param, tmp_path):
        yield url
