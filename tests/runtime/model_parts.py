"""Parts both stateful models share (``test_runtime_model.py``, ``test_relocation_model.py``).

- :class:`Gate` -- holds a Spot's turn: open, closed, or let the oldest waiter through;
- :class:`LogCapture` -- collects the runtime's warnings into a list the model reads;
- :func:`chart_violation` -- whether a transition the runtime took (``charts.TRACE``) is
  one the charts in ``statecharts/`` define.
"""

from __future__ import annotations

import logging
from typing import Final

import trio

import statecharts

TABLES: Final = {t.name: t for t in map(statecharts.compile, statecharts.ALL_CHARTS)}


class Gate:
    """Open (everyone passes) or closed (waiters queue); ``pass_one`` lets the oldest through."""

    def __init__(self, is_open: bool) -> None:
        self.is_open = is_open
        self._lot = trio.lowlevel.ParkingLot()

    def act(self, action: str) -> None:
        if action == "pass_one":
            self._lot.unpark()
            return
        self.is_open = action == "open"
        if self.is_open:
            self._lot.unpark_all()

    async def wait(self) -> None:
        if not self.is_open:
            await self._lot.park()


class LogCapture(logging.Handler):
    """Appends the message of every WARNING-or-worse record to ``logs``."""

    def __init__(self, logs: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.logs = logs

    def emit(self, record: logging.LogRecord) -> None:
        self.logs.append(record.getMessage())


def chart_violation(chart: str, state: str, event: str, target: str) -> str | None:
    """What is wrong with the runtime stepping ``chart`` from ``state`` by ``event`` to
    ``target``, or ``None`` when the chart defines exactly that transition."""
    try:
        defined = TABLES[chart].step(state, event)
    except statecharts.UndefinedTransition as exc:
        return f"undefined transition taken: {exc}"
    if defined != target:
        return f"{chart}: {state} --{event}--> {target}, but the chart says {defined}"
    return None
