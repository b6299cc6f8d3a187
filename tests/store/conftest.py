"""The ``store`` fixture: every conformance test runs once per backend.

To add a backend, add its URL to ``BACKENDS`` (for Redis, read the URL from
``ZLINK_TEST_REDIS`` and fail -- not skip -- when CI sets it and Redis is
absent). Each test bounds itself with ``trio.fail_after``.

The Redis Cluster backend runs with ``?buckets=1``: the suite checks
``last_object_generation`` as one store-wide sequence (it grows by exactly one per
NewClaim), which per-bucket ObjectGenerations reproduce only with one bucket. Its Spot
keys then share one slot and its node claims another, so the split transactions
(facts, capacity units, load shifts) still cross masters; the many-bucket layout is
covered by ``test_redis_cluster.py``, the multi-process and the reshard tests.
"""

from __future__ import annotations

import pytest
from redis_helpers import cluster_test_store, redis_test_store

from zlink_trio.store import open_store

CLUSTER_BUCKETS = 1
BACKENDS = ["memory://", "sqlite://?dispatch=inline", "sqlite://?dispatch=thread", "redis",
            "redis-cluster"]


@pytest.fixture(params=BACKENDS)
async def store(request, tmp_path):
    url = request.param
    if url.startswith("sqlite://?"):  # a fresh file per test, both dispatch modes
        url = f"sqlite://{tmp_path / 'store.db'}?busy_timeout=1&{url.partition('?')[2]}"
    if url == "redis":  # ZLINK_TEST_REDIS, a fresh key prefix per test (redis_helpers)
        async with redis_test_store() as opened:
            yield opened
        return
    if url == "redis-cluster":  # ZLINK_TEST_REDIS_CLUSTER (redis_helpers), one bucket
        async with cluster_test_store(buckets=CLUSTER_BUCKETS) as opened:
            yield opened
        return
    async with open_store(url) as opened:
        yield opened
