"""The ``store`` fixture: every conformance test runs once per backend.

To add a backend, add its URL to ``BACKENDS`` (for Redis, read the URL from
``ZLINK_TEST_REDIS`` and fail -- not skip -- when CI sets it and Redis is
absent). Each test bounds itself with ``trio.fail_after``.

The Redis Cluster backend runs with its default bucket count (1024), as deployed: Spot
IDs spread over slots and masters, and its ObjectGenerations are its own (per bucket).
The suite checks of generations only what spec 06 promises every backend (strictly
increasing per Spot ID, unique store-wide, never reused); "no generation used" goes
through ``store_helpers.issued``, which on the cluster reads every bucket's counter.
"""

from __future__ import annotations

import pytest
from postgres_helpers import postgres_test_store
from redis_helpers import cluster_test_store, redis_test_store

from zlink_trio.store import open_store

BACKENDS = ["memory://", "sqlite://?dispatch=inline", "sqlite://?dispatch=thread", "redis",
            "redis-cluster", "postgresql"]


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path):
    url = request.param
    if url.startswith("sqlite://?"):  # a fresh file per test, both dispatch modes
        url = f"sqlite://{tmp_path / 'store.db'}?busy_timeout=1&{url.partition('?')[2]}"
    if url == "redis":  # ZLINK_TEST_REDIS, a fresh key prefix per test (redis_helpers)
        async with redis_test_store() as opened:
            yield opened
        return
    if url == "redis-cluster":  # ZLINK_TEST_REDIS_CLUSTER (redis_helpers), 1024 buckets
        async with cluster_test_store() as opened:
            yield opened
        return
    if url == "postgresql":  # ZLINK_TEST_POSTGRES, a fresh schema per test (postgres_helpers)
        async with postgres_test_store() as opened:
            yield opened
        return
    async with open_store(url) as opened:
        yield opened
