"""Opening the test Redis (and Redis Cluster): a fresh key prefix per test, fail (CI) or
skip (local) when absent.

``ZLINK_TEST_REDIS`` names the server (default ``redis://127.0.0.1:6379/0``).
Every test gets its own ``?prefix=`` so tests never see each other's keys, and
every key under that prefix is deleted when the test ends. When Redis cannot
be reached the test **fails** if ``CI`` is set (CI must never silently skip a
backend) and is skipped with the reason otherwise. A test that acts on the whole
server (``CLIENT PAUSE``, ``SCRIPT FLUSH``) runs on a ``redis-server`` of its own
(:func:`own_server`), so it never stalls the tests running beside it.

The Redis Cluster tests read ``ZLINK_TEST_REDIS_CLUSTER``
(``redis+cluster://host:port,...``; ``.ci/run`` starts a 3-master cluster and sets it).
When it is unset and ``redis-server`` is on PATH, the first test that needs a cluster
starts a throw-away one with ``.ci/redis-cluster`` on free loopback ports and stops it
when the test session ends; without either it fails under ``CI`` and skips otherwise.
"""

from __future__ import annotations

import atexit
import gc
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
import warnings
from contextlib import AsyncExitStack, asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING

import pytest
import trio

from zlink_trio.core.errors import Unavailable
from zlink_trio.store import open_store
from zlink_trio.store.redis.admin import delete_matching, open_connection

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from contextlib import AbstractAsyncContextManager

    from zlink_trio.store.redis.pipeline import Pipeline

REDIS_URL = os.environ.get("ZLINK_TEST_REDIS") or "redis://127.0.0.1:6379/0"
CLEANUP_TIMEOUT = 10


def fresh_prefix() -> str:
    """A prefix no other test (or run) uses."""
    return f"zltest-{uuid.uuid4().hex[:12]}"


def url_with(prefix: str, server: str = "", **options: object) -> str:
    """``REDIS_URL`` (or ``server``) with ``?prefix=`` (and further options) set."""
    query = "&".join([f"prefix={prefix}", *(f"{k}={v}" for k, v in options.items())])
    return f"{(server or REDIS_URL).split('?')[0]}?{query}"


def raw_client(server: str = "") -> AbstractAsyncContextManager[Pipeline]:
    """One plain connection (the store's own client) to the test server, or to
    ``server``: enter it with ``async with``, send with ``await client.command([...])``."""
    return open_connection(server or REDIS_URL)


def collect_failed_connections() -> None:
    """Collect the coredis connections that failed to connect, without their warnings.

    coredis 6.9 (the ShoppingMall sample's application stores use it) leaves the memory
    streams of a connection that never connected unclosed; their ``ResourceWarning``
    would surface (as an error, under ``filterwarnings = error``) in whichever later
    test the GC happens to run. Tests that make its connections fail on purpose call
    this right after.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()


def unreachable(error: object) -> None:
    """Fail under CI, skip locally: Redis at ``REDIS_URL`` is not there."""
    message = (f"Redis at {REDIS_URL} (env ZLINK_TEST_REDIS) cannot be reached: {error}. "
               "Start it, e.g. redis-server --port 6379 --save '' --appendonly no")
    collect_failed_connections()
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(reason=message)


async def delete_prefix(prefix: str, server: str = "") -> int:
    """Delete every key of ``prefix`` (both stores) on the test server or ``server``;
    returns how many."""
    with trio.fail_after(CLEANUP_TIMEOUT):
        async with raw_client(server) as client:
            return await delete_matching(client.call, f"{prefix}:*", per_command=500)


@asynccontextmanager
async def redis_test_store(server: str = "", **options: object):
    """Open a Redis store under a fresh prefix (on ``REDIS_URL``, or on ``server``: see
    :func:`own_server`); delete its keys afterwards."""
    prefix = fresh_prefix()
    problem = ""
    async with AsyncExitStack() as stack:
        try:
            store = await stack.enter_async_context(
                open_store(url_with(prefix, server, **options)))
        except Unavailable as error:
            problem = error.message  # fail/skip outside the handler, once the error is gone
        if not problem:
            stack.push_async_callback(delete_prefix, prefix, server)
            yield store
    if problem:
        unreachable(problem)


@asynccontextmanager
async def fresh_url(server: str = "") -> AsyncIterator[str]:
    """A store URL on the test server (or ``server``) under a fresh prefix, for tests
    that open their own stores or nodes; fails/skips as above when Redis cannot be
    reached, and deletes the prefix's keys afterwards."""
    try:
        async with raw_client(server) as client:
            await client.command(["PING"])
    except Exception as exc:
        problem = str(exc)
    else:
        problem = ""
    if problem:
        unreachable(problem)  # outside the handler, once the error is gone
    prefix = fresh_prefix()
    try:
        yield url_with(prefix, server)
    finally:
        await delete_prefix(prefix, server)


#: Bound on an own server's start-up (its "Ready to accept connections" line).
SERVER_START_TIMEOUT = 10


@asynccontextmanager
async def own_server() -> AsyncIterator[str]:
    """The URL of a ``redis-server`` of this test alone, stopped when the block ends.

    For the tests that act on the whole server -- ``CLIENT PAUSE``, ``SCRIPT FLUSH``:
    on the shared ``REDIS_URL`` a pause stalls every client of every test running
    beside them (pytest-xdist, or another run on the machine), and the short leases
    of the crash, relocation and chaos tests then run out. Without ``redis-server``
    on PATH it yields ``REDIS_URL`` (the shared server; run such tests alone).
    """
    binary = shutil.which("redis-server")
    if binary is None:
        yield REDIS_URL
        return
    directory = tempfile.mkdtemp(prefix="zlink-redis-")
    proc = None
    try:
        with trio.fail_after(SERVER_START_TIMEOUT):
            for _attempt in range(3):  # a free port another process took meanwhile
                port = _free_port()
                proc = await trio.lowlevel.open_process(
                    [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                     "--appendonly", "no", "--dir", directory],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
                if await _ready(proc):
                    break
                await _stop_server(proc)
                proc = None
        assert proc is not None, "redis-server did not start on a free loopback port"
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        if proc is not None:
            await _stop_server(proc)
        shutil.rmtree(directory, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _ready(proc: trio.Process) -> bool:
    """Until the server says it accepts connections (True) or exits (False)."""
    assert proc.stdout is not None
    seen = b""
    while b"Ready to accept connections" not in seen:
        chunk = await proc.stdout.receive_some(65536)
        if not chunk:
            return False
        seen = seen[-200:] + chunk
    return True


async def _stop_server(proc: trio.Process) -> None:
    with trio.CancelScope(shield=True), trio.move_on_after(CLEANUP_TIMEOUT):
        proc.terminate()
        with trio.move_on_after(CLEANUP_TIMEOUT / 2):
            await proc.wait()
        proc.kill()
        await proc.wait()
        if proc.stdout is not None:
            await proc.stdout.aclose()


# -- Redis Cluster ------------------------------------------------------------------------

_CLUSTER_SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", ".ci", "redis-cluster")
_started: list[str] = []  # the URL of the cluster this process started, if any


def _ports_free(base: int) -> bool:
    for port in (base, base + 1, base + 2, base + 10000, base + 10001, base + 10002):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def cluster_url() -> str:
    """``ZLINK_TEST_REDIS_CLUSTER``, or a cluster started for this test session ('' if none)."""
    url = os.environ.get("ZLINK_TEST_REDIS_CLUSTER", "")
    if url or _started:
        return url or _started[0]
    if shutil.which("redis-server") is None or shutil.which("redis-cli") is None:
        return ""
    directory = tempfile.mkdtemp(prefix="zlink-cluster-")
    for base in range(17000 + os.getpid() % 50 * 20, 19000, 20):
        if not _ports_free(base):
            continue
        done = subprocess.run([_CLUSTER_SCRIPT, "start", directory, str(base)],
                              capture_output=True, text=True, timeout=60, check=False)
        if done.returncode == 0:
            _started.append(done.stdout.strip())
            atexit.register(subprocess.run, [_CLUSTER_SCRIPT, "stop", directory],
                            capture_output=True, timeout=60, check=False)
            return _started[0]
        subprocess.run([_CLUSTER_SCRIPT, "stop", directory], capture_output=True,
                       timeout=60, check=False)
    return ""


def cluster_url_with(prefix: str, **options: object) -> str:
    """The test cluster's URL with ``?prefix=`` (and further options) set."""
    query = "&".join([f"prefix={prefix}", *(f"{k}={v}" for k, v in options.items())])
    return f"{cluster_url().split('?')[0]}?{query}"


@asynccontextmanager
async def fresh_cluster_url(**options: object) -> AsyncIterator[str]:
    """A Redis Cluster store URL under a fresh prefix, for tests whose nodes open their own
    stores (other processes); fails/skips as :func:`cluster_test_store`, and deletes the
    prefix's keys afterwards."""
    async with cluster_test_store(**options) as store:
        yield cluster_url_with(store.config.prefix, **options)


def cluster_unreachable(error: object) -> None:
    """Fail under CI, skip locally: no Redis Cluster to test against."""
    message = (f"Redis Cluster (env ZLINK_TEST_REDIS_CLUSTER) cannot be reached: {error}. "
               "Start one with .ci/redis-cluster start, or put redis-server on PATH")
    collect_failed_connections()
    if os.environ.get("CI"):
        pytest.fail(message, pytrace=False)
    pytest.skip(reason=message)


async def delete_cluster_prefix(store: object) -> int:
    """Delete every key of ``store``'s prefix on every master of the cluster."""
    prefix = store.config.prefix  # type: ignore[attr-defined]
    deleted = 0
    router = store.router  # type: ignore[attr-defined]
    with trio.fail_after(CLEANUP_TIMEOUT):
        for master in router.masters():  # one key per DEL: keys of many slots
            deleted += await delete_matching(partial(router.call_master, master),
                                             f"{prefix}:*")
    return deleted


@asynccontextmanager
async def cluster_test_store(**options: object):
    """Open a Redis Cluster store under a fresh prefix; delete its keys afterwards."""
    url = cluster_url()
    problem = "" if url else "ZLINK_TEST_REDIS_CLUSTER is unset and redis-server is absent"
    async with AsyncExitStack() as stack:
        if not problem:
            try:
                store = await stack.enter_async_context(
                    open_store(cluster_url_with(fresh_prefix(), **options)))
            except Unavailable as error:
                problem = error.message
        if not problem:
            stack.push_async_callback(delete_cluster_prefix, store)
            yield store
    if problem:
        cluster_unreachable(problem)
