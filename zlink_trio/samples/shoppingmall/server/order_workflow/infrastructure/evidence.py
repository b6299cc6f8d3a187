"""The OrderWorkflow's evidence lines: the only place that spells them.

The runner counts these strings verbatim in each Workflow node's log, so
they are built here and nowhere else, and written once each -- to standard
output by default, one ``write`` + flush per line, so a node process's log
file has them whatever the process does with ``logging`` (a logging handler
*and* a print would double every count).

===============================================================  ========================
line                                                             when
===============================================================  ========================
``shoppingmall-order started order=<OrderId> spot=<SpotId>``     this node recorded an
                                                                 order's OrderStartedEvent
``shoppingmall-order replayed order=<OrderId> generation=<N>``   a planned relocation's
                                                                 target replayed the stream
                                                                 in the same generation and
                                                                 resumes at the next step
``shoppingmall-order external-effect-repeated order=<OrderId>``  a module reports a second
                                                                 effect for one deterministic
                                                                 ID (the runner expects 0)
===============================================================  ========================

Besides, :meth:`Evidence.activated` writes ``shoppingmall-workflow activated
...`` (factory execution, ObjectGeneration, owner NodeId: the planned
relocation's evidence). It is not an evidence row (``docs/shoppingmall.md``,
"Evidence rows"), and its prefix differs from every row's, so no count can match
it.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("Evidence", "stdout_line")


def stdout_line(line: str) -> None:
    """Write ``line`` and a newline to standard output at once, and flush."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


class Evidence:
    """Writes the evidence lines (module docstring) through ``write`` (default: stdout)."""

    def __init__(self, write: Callable[[str], None] = stdout_line) -> None:
        self._write = write

    def started(self, order_id: str, spot_id: str) -> None:
        """This node recorded ``order_id``'s OrderStartedEvent in Spot ``spot_id``."""
        self._write(f"shoppingmall-order started order={order_id} spot={spot_id}")

    def replayed(self, order_id: str, generation: int) -> None:
        """A relocation target replayed ``order_id`` in ``generation`` and resumes."""
        self._write(f"shoppingmall-order replayed order={order_id} generation={generation}")

    def external_effect_repeated(self, order_id: str) -> None:
        """A module reports an external effect of ``order_id`` that ran twice."""
        self._write(f"shoppingmall-order external-effect-repeated order={order_id}")

    def activated(self, order_id: str, generation: int, node_id: str, version: int) -> None:
        """The factory ran for ``order_id`` at ``node_id`` and replayed ``version`` events."""
        self._write(f"shoppingmall-workflow activated order={order_id} generation={generation} "
                    f"node={node_id} version={version}")
