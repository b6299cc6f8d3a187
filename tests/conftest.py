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

from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")
