"""The test kit's own tests: ``kit_store`` runs a test once per store backend.

``memory`` is the kit's default (a fresh named store per cluster), ``sqlite`` a fresh
file in ``tmp_path``, ``redis`` the test Redis (``ZLINK_TEST_REDIS``) without a prefix --
the kit gives every cluster a fresh one and deletes its keys at exit; absent Redis
fails under ``CI`` and skips locally (``tests/store/redis_helpers.py``); ``postgresql``
the test PostgreSQL (``ZLINK_TEST_POSTGRES``) likewise, each cluster in a fresh schema
(``tests/store/postgres_helpers.py``).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import trio

if TYPE_CHECKING:
    from collections.abc import Iterator

HERE = Path(__file__).parent


def _redis_helpers() -> Any:
    return _helpers("redis_helpers")


def _helpers(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"kit_{name}", HERE.parent / "store" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(params=["memory", "sqlite", "redis", "postgresql"])
def kit_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL for ``open_test_cluster`` on each backend (see the module doc); a sync
    fixture, so that sync tests (a race model runs its own ``trio.run``) take it too."""
    if request.param == "memory":
        yield "memory://"
        return
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'kit.db'}"
        return
    if request.param == "postgresql":  # the kit gives each cluster a fresh schema
        postgres = _helpers("postgres_helpers")
        try:
            postgres.ping()
        except Exception as exc:
            postgres.unreachable(str(exc))
        yield str(postgres.POSTGRES_URL)
        return
    helpers = _redis_helpers()

    async def ping() -> str:
        try:
            async with helpers.raw_client() as client:
                await client.command(["PING"])
        except Exception as exc:
            return str(exc)
        return ""

    problem = trio.run(ping)
    if problem:
        helpers.unreachable(problem)
    yield str(helpers.REDIS_URL)
