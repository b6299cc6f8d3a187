"""The ``store`` fixture: every conformance test runs once per backend.

To add a backend, add its URL to ``BACKENDS`` (for Redis, read the URL from
``ZLINK_TEST_REDIS`` and fail -- not skip -- when CI sets it and Redis is
absent). Each test bounds itself with ``trio.fail_after``.
"""

from __future__ import annotations

import pytest

from zlink_trio.store import open_store

BACKENDS = ["memory://"]


@pytest.fixture(params=BACKENDS)
async def store(request):
    async with open_store(request.param) as opened:
        yield opened
