"""How the background continuation paces itself between its turns, and who may say so.

After the start replies at the Created boundary, the order goes on by itself:
the Spot runs one step per turn of its own (a timer it arms), and before each
step asks a :class:`ContinuationControl` how to go on. In production the
control is :data:`RUN_FREELY` (always :attr:`Pace.GO`, every projection
written). The runner's fixtures (``infrastructure.fixture_control``) answer
otherwise for the orders they were armed for:

=========================  ===================================================
answer                      what the continuation does
=========================  ===================================================
``Pace.GO``                 runs the next step now, then arms its next turn
``Pace.STOP``               ends; the order waits for a ContinueOrderWorkflowReq
                            (item 9.2-2: interrupted at InventoryReserved)
``Pace.PARK``               runs nothing and looks again a little later; the
                            pending turn is a timer, so it moves with a planned
                            relocation and fires at the target (item 9.2-6)
``skip_projection`` True    the step's events are appended, its projection is
                            not written (item 9.2-3: interrupted after the terminal
                            event, before the read model reflected it)
=========================  ===================================================

Explicit commands (start, continue, rebuild) never ask the control: a fixture
interrupts the background continuation only.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, Protocol

if TYPE_CHECKING:
    from ..domain import OrderAggregate, Step

__all__ = ("RUN_FREELY", "ContinuationControl", "Pace", "RunFreely")


class Pace(enum.Enum):
    """The continuation's next move (module docstring)."""

    GO = "go"
    STOP = "stop"
    PARK = "park"


class ContinuationControl(Protocol):
    """Asked by the background continuation before each step."""

    def pace(self, state: OrderAggregate) -> Pace:
        """How to go on from ``state`` (the fold before the next step)."""
        ...

    def skip_projection(self, state: OrderAggregate, step: Step) -> bool:
        """Whether to leave the read model as it is after recording ``step`` on ``state``."""
        ...

    @property
    def park_poll(self) -> float:
        """Seconds between two looks of a parked continuation."""
        ...


class RunFreely:
    """The production control: always go, always project."""

    park_poll: Final = 0.05

    def pace(self, state: OrderAggregate) -> Pace:
        """Always :attr:`Pace.GO`."""
        return Pace.GO

    def skip_projection(self, state: OrderAggregate, step: Step) -> bool:
        """Never."""
        return False


#: The control every node runs with unless the runner injects its fixtures.
RUN_FREELY: Final = RunFreely()
