"""The chaos harness's options and stores.

``--chaos-long`` (or ``ZLINK_CHAOS_LONG=1``) runs every row in its long mode: longer
faults and steady phases, three callers, ``ZLINK_CHAOS_RUNS`` runs per row (3 by
default). The default mode is the CI budget: all of ``tests/chaos`` in at most 3 minutes.

The option exists when this file is an initial conftest (``pytest tests/chaos ...``);
the environment variable works however pytest is started.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--chaos-long", action="store_true", default=False,
                     help="run the chaos rows in their long mode (also ZLINK_CHAOS_LONG=1)")


@pytest.fixture
def chaos_long(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--chaos-long", default=False)) or os.environ.get(
        "ZLINK_CHAOS_LONG", "") not in ("", "0")


@pytest.fixture
def chaos_runs(chaos_long: bool) -> int:
    return int(os.environ.get("ZLINK_CHAOS_RUNS", "3")) if chaos_long else 1
