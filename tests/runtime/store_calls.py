"""The test Redis helpers, loaded once for the runtime tests (``tests/store/redis_helpers.py``).

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


def redis_helpers() -> ModuleType:
    """``tests/store/redis_helpers.py``, shared (one module object) with the store suite."""
    module = sys.modules.get("redis_helpers")
    if module is None:
        path = Path(__file__).parent.parent / "store" / "redis_helpers.py"
        spec = importlib.util.spec_from_file_location("redis_helpers", path)
        assert spec is not None
        assert spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules["redis_helpers"] = module
        spec.loader.exec_module(module)
    return module
