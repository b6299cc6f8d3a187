"""Helpers of the other suites, loaded once for the runtime tests: the test Redis and
PostgreSQL helpers (``tests/store/redis_helpers.py``, ``tests/store/postgres_helpers.py``)
and the chaos harness's TCP relay (``tests/chaos/relay.py``).

Counting store calls in flight (MockClock autojump suspended meanwhile, a watchdog for
hangs) is the public test kit's :class:`zlink_trio.testing.InFlight`.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from types import ModuleType


def _shared(name: str, suite: str) -> ModuleType:
    """``tests/<suite>/<name>.py``, one module object shared with its own suite."""
    module = sys.modules.get(name)
    if module is None:
        path = Path(__file__).parent.parent / suite / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return module


def redis_helpers() -> ModuleType:
    """``tests/store/redis_helpers.py``, shared (one module object) with the store suite."""
    return _shared("redis_helpers", "store")


def postgres_helpers() -> ModuleType:
    """``tests/store/postgres_helpers.py``, shared (one module object) with the store suite."""
    return _shared("postgres_helpers", "store")


def chaos_relay() -> ModuleType:
    """``tests/chaos/relay.py``: a loopback TCP relay that can cut the links it carries."""
    return _shared("relay", "chaos")
