"""OrderWorkflow's application: replay, fold, next step, expected-version appends, projection.

It drives the pure domain (``..domain``) through ports (protocols) the
infrastructure implements; it imports neither the framework nor a store.
Modules:

- ``ports``        -- OrderStream, Projection, Effects, Idempotency, Clock; StreamConflict
- ``order_state``  -- the OrderState a fold shows; UnknownOrder (an empty stream)
- ``use_cases``    -- OrderWorkflow: replay, start, step, continue, rebuild (event, then
  read model)
- ``continuation`` -- how the background continuation paces itself; the control the runner's
  fixtures implement
"""

from __future__ import annotations

from .continuation import RUN_FREELY, ContinuationControl, Pace, RunFreely
from .order_state import UnknownOrder, order_state_of
from .ports import (
    AppendOutcome,
    Clock,
    Effects,
    Idempotency,
    OrderStream,
    Projection,
    StreamConflict,
)
from .use_cases import (
    MAX_ATTEMPTS,
    MAX_STEPS,
    OrderPorts,
    OrderWorkflow,
    StartOutcome,
    StepOutcome,
)

__all__ = (
    "MAX_ATTEMPTS", "MAX_STEPS", "RUN_FREELY", "AppendOutcome", "Clock", "ContinuationControl",
    "Effects", "Idempotency", "OrderPorts", "OrderStream", "OrderWorkflow", "Pace", "Projection",
    "RunFreely", "StartOutcome", "StepOutcome", "StreamConflict", "UnknownOrder",
    "order_state_of",
)
