"""Test-suite wide settings.

Rules every test module follows (trio-websocket's discipline):

- Tests assert behaviour a user can observe; no test passes by printing.
- Nothing sleeps for real to wait for something: use events, or
  ``trio.testing.MockClock(autojump_threshold=0)`` (pytest-trio's
  ``autojump_clock`` fixture) for anything timed.
- Every test that does I/O runs under an absolute ``trio.fail_after``.
- Anything that listens binds 127.0.0.1 with port 0.

Hypothesis runs derandomized under CI (``CI`` set), so a red run replays the
same examples; locally it explores new ones each run.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from hypothesis import HealthCheck, settings

import zlink_trio.testing.pytest_plugin

if TYPE_CHECKING:
    import pytest

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


def pytest_configure(config: pytest.Config) -> None:
    """The test kit's plugin (fixtures ``zl_node``, ``zl_cluster``), also before the
    ``pytest11`` entry point is installed (it registers under the same name)."""
    if not config.pluginmanager.has_plugin("zlink_trio"):
        config.pluginmanager.register(zlink_trio.testing.pytest_plugin, "zlink_trio")
