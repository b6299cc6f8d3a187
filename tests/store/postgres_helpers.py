"""Opening the test PostgreSQL: a fresh schema (``?prefix=``) per test, fail (CI) or skip
(local) when absent.

``ZLINK_TEST_POSTGRES`` names the server and database (default
``postgresql://postgres@127.0.0.1:5432/test``: this machine's trust-auth server). Every
test gets its own prefix -- a schema of its own -- so tests never see each other's rows,
and the schema is dropped when the test ends. When PostgreSQL cannot be reached the test
**fails** if ``CI`` is set (CI never silently skips a backend) and is skipped with the
reason otherwise.
"""

from __future__ import annotations

import os
import uuid
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING

import psycopg
import pytest
import trio

from zlink_trio.core.errors import Unavailable
from zlink_trio.store import open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

POSTGRES_URL = (os.environ.get("ZLINK_TEST_POSTGRES")
                or "postgresql://postgres@127.0.0.1:5432/test")
CLEANUP_TIMEOUT = 10


def fresh_prefix() -> str:
    """A schema name no other test uses."""
    return f"zt_{uuid.uuid4().hex[:20]}"


def url_with(prefix: str, **options: object) -> str:
    """The test server's URL with ``prefix`` and ``options``."""
    query = "&".join(f"{k}={v}" for k, v in {"prefix": prefix, **options}.items())
    return f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}{query}"


def unreachable(error: object) -> None:
    """Fail under CI, skip locally: PostgreSQL at ``POSTGRES_URL`` is not there."""
    message = (f"PostgreSQL at {POSTGRES_URL} (env ZLINK_TEST_POSTGRES) cannot be reached: "
               f"{error}. Start it (e.g. service postgresql start) or point "
               "ZLINK_TEST_POSTGRES at one")
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(reason=message)


def _drop(prefix: str) -> None:
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')


async def drop_prefix(prefix: str) -> None:
    """Drop the schema of ``prefix`` (every table of both stores)."""
    with trio.fail_after(CLEANUP_TIMEOUT):
        await trio.to_thread.run_sync(_drop, prefix)


@asynccontextmanager
async def postgres_test_store(**options: object) -> AsyncIterator[object]:
    """Open a PostgreSQL store under a fresh prefix; drop its schema afterwards."""
    prefix = fresh_prefix()
    problem = ""
    async with AsyncExitStack() as stack:
        try:
            store = await stack.enter_async_context(open_store(url_with(prefix, **options)))
        except Unavailable as error:
            problem = error.message  # fail/skip outside the handler, once the error is gone
        if not problem:
            stack.push_async_callback(drop_prefix, prefix)
            yield store
    if problem:
        unreachable(problem)


@asynccontextmanager
async def fresh_url(**options: object) -> AsyncIterator[str]:
    """A store URL under a fresh prefix, for tests that open their own stores or nodes;
    fails/skips as above when PostgreSQL cannot be reached, drops the schema afterwards."""
    try:
        await trio.to_thread.run_sync(ping)
    except psycopg.Error as error:
        problem = str(error)
    else:
        problem = ""
    if problem:
        unreachable(problem)
    prefix = fresh_prefix()
    try:
        yield url_with(prefix, **options)
    finally:
        await drop_prefix(prefix)


def ping() -> None:
    """Raise unless the test server answers."""
    with psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute("SELECT 1")
