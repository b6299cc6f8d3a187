"""What the runtime did, as a test reads it: factory runs, handler turns, closes, transitions.

Theory of operation
-------------------
A :class:`Recorder` is installed for the duration of a ``with`` block (``with
Recorder() as record:``; :func:`~zlink_trio.testing.open_test_cluster` installs one for
you).  While installed it is a :class:`~zlink_trio.runtime.observers.SpotObserver` --
every node in the process tells it when a Spot class is constructed
(:class:`FactoryRun`), when a handler turn begins and ends (:class:`Turn`, with the
node that ran it), when ``on_close`` ran (:class:`Closed`), and when an incarnation
loaded or wrote its durable state (:class:`StateEvent`) -- and a
:data:`~zlink_trio.runtime.charts.TRACE` observer of every lifecycle chart transition
(:class:`Transition`), each checked against the compiled charts of ``statecharts/``:
a transition the charts do not define lands in :attr:`Recorder.violations`.

Transitions are grouped by *operation*: ``with record.operation("goc-1"):`` around a
call labels every transition taken inside it, and in every task it starts (Trio copies
the context into new tasks), so ``record.transitions_of("goc-1")`` is the path that
call took through the charts.  Nodes are told apart by their NodeId.

:class:`Gate` holds turns back: ``record.gate("c-1").act("close")`` makes every turn of
Spot ``c-1`` wait before its handler runs until the gate opens (``"open"``) or lets one
waiter through (``"pass_one"``), so a test can keep a Spot busy with work queued behind
it without the Spot's own code knowing.  :class:`LogCapture` collects the runtime's
warnings.  Everything here runs in the Trio thread and never blocks.
"""

from __future__ import annotations

import contextvars
import logging
from collections import defaultdict
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final

import attrs
import trio

import statecharts
from statecharts.trace import trace_line
from zlink_trio.runtime import charts as _charts
from zlink_trio.runtime import observers as _observers

if TYPE_CHECKING:
    import os
    from collections.abc import Iterator
    from types import TracebackType

    from zlink_trio.runtime.declaration.policies import CloseReason

__all__ = ("Closed", "FactoryRun", "Gate", "LogCapture", "Recorder", "StateEvent",
           "Transition", "Turn", "chart_violation")

TABLES: Final = {t.name: t for t in map(statecharts.compile, statecharts.ALL_CHARTS)}
_OPERATION: Final = contextvars.ContextVar[str | None]("zlink_trio_testing_operation",
                                                       default=None)


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


class Gate:
    """Open (everyone passes) or closed (waiters queue); ``pass_one`` lets the oldest through."""

    def __init__(self, is_open: bool = True) -> None:
        self.is_open = is_open
        self._lot = trio.lowlevel.ParkingLot()

    def act(self, action: str) -> None:
        """``"open"``, ``"close"`` or ``"pass_one"``."""
        if action == "pass_one":
            self._lot.unpark()
            return
        if action not in ("open", "close"):
            raise ValueError(f"Gate.act: {action!r} is not 'open', 'close' or 'pass_one'")
        self.is_open = action == "open"
        if self.is_open:
            self._lot.unpark_all()

    @property
    def waiting(self) -> int:
        """How many turns wait at this gate."""
        return len(self._lot)

    async def wait(self) -> None:
        """Return at once when open; else wait for ``open`` or a ``pass_one``."""
        if not self.is_open:
            await self._lot.park()


class LogCapture(logging.Handler):
    """Appends the message of every WARNING-or-worse record to ``logs``."""

    def __init__(self, logs: list[str]) -> None:
        super().__init__(logging.WARNING)
        self.logs = logs

    def emit(self, record: logging.LogRecord) -> None:
        self.logs.append(record.getMessage())


@attrs.frozen
class FactoryRun:
    """A Spot class was constructed: ``spot_id``'s incarnation ``generation`` on ``node``."""

    node: str
    spot_id: str
    generation: int
    stable_type: str
    at: float
    #: The recorder's event counter: orders factory runs, turns and closes.
    seq: int = 0


@attrs.define(eq=False)
class Turn:
    """One handler turn: which owner ran which message, and how it ended."""

    node: str
    spot_id: str
    generation: int
    handler: str
    message: object
    began_at: float
    #: The recorder's event counter when the turn began.
    seq: int = 0
    ended_at: float | None = None
    #: What the handler returned (``None`` too while it runs or when it raised).
    result: object = None
    error: BaseException | None = None

    @property
    def done(self) -> bool:
        return self.ended_at is not None


@attrs.frozen
class Closed:
    """``on_close(reason)`` ran for ``spot_id``'s incarnation ``generation`` on ``node``."""

    node: str
    spot_id: str
    generation: int
    reason: CloseReason
    at: float
    seq: int = 0


@attrs.frozen
class StateEvent:
    """A durable state loaded (``action`` ``"load"``), saved or cleared by one incarnation:
    the value and version, or the error that refused a write (version ``None``)."""

    node: str
    spot_id: str
    generation: int
    #: The incarnation's ``ctx.state`` (the race model writes through old ones).
    durable: object = attrs.field(eq=False, repr=False)
    action: str
    value: object
    version: int | None
    error: BaseException | None
    at: float
    seq: int = 0
    #: Whether the incarnation had ended when the write ended (``DurableState.ended``).
    ended: bool = False


@attrs.frozen
class Transition:
    """One chart step the runtime took, and the operation (label) it belongs to."""

    chart: str
    state: str
    event: str
    target: str
    operation: str | None


class Recorder:
    """Everything the nodes of this process did while installed; see the module doc."""

    def __init__(self) -> None:
        self.factory_runs: list[FactoryRun] = []
        self.turns: list[Turn] = []
        self.closes: list[Closed] = []
        self.state_events: list[StateEvent] = []
        self.transitions: list[Transition] = []
        #: Problems found as they happened (transitions the charts do not define).
        self.violations: list[str] = []
        self.logs: list[str] = []
        self.gates: dict[str, Gate] = {}
        self._running: dict[tuple[str, str, int], Turn] = {}
        self._capture = LogCapture(self.logs)
        self._installed = False
        self._seq = 0

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    # ------------------------------------------------------------------ install

    def install(self) -> None:
        """Start recording (every node of this process); :meth:`uninstall` stops."""
        if self._installed:
            return
        self._installed = True
        _charts.TRACE.append(self._trace)
        _observers.OBSERVERS.append(self)
        logging.getLogger("zlink_trio").addHandler(self._capture)

    def uninstall(self) -> None:
        if not self._installed:
            return
        self._installed = False
        _charts.TRACE.remove(self._trace)
        _observers.OBSERVERS.remove(self)
        logging.getLogger("zlink_trio").removeHandler(self._capture)

    def __enter__(self) -> Recorder:
        self.install()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.uninstall()

    # ------------------------------------------------------------------ reading

    @contextmanager
    def operation(self, label: str) -> Iterator[None]:
        """Label every transition taken inside the block (and the tasks it starts)."""
        token = _OPERATION.set(label)
        try:
            yield
        finally:
            _OPERATION.reset(token)

    def transitions_of(self, label: str) -> list[Transition]:
        """The chart transitions the operation ``label`` took, in order."""
        return [t for t in self.transitions if t.operation == label]

    def write_trace(self, path: str | os.PathLike[str], label: str) -> int:
        """Write the transitions of operation ``label`` to a chart trace file.

        The file is JSON lines in the format of ``statecharts.trace`` (what
        ``zlink-trio statecharts CHART --trace FILE`` highlights); returns how many
        transitions were written.
        """
        taken = self.transitions_of(label)
        with open(path, "w", encoding="utf-8") as out:
            for t in taken:
                out.write(trace_line(t.chart, t.state, t.event, t.target))
        return len(taken)

    def factory_runs_of(self, spot_id: str) -> list[FactoryRun]:
        return [run for run in self.factory_runs if run.spot_id == spot_id]

    def turns_of(self, spot_id: str, generation: int | None = None) -> list[Turn]:
        """The turns of ``spot_id`` (of one incarnation), in the order they began."""
        return [t for t in self.turns if t.spot_id == spot_id
                and (generation is None or t.generation == generation)]

    def turns_by_incarnation(self) -> dict[tuple[str, int], list[Turn]]:
        """``(spot_id, generation)`` -> its turns, in the order they began (all nodes)."""
        grouped: dict[tuple[str, int], list[Turn]] = defaultdict(list)
        for turn in self.turns:
            grouped[turn.spot_id, turn.generation].append(turn)
        return dict(grouped)

    def turns_by_instance(self) -> dict[FactoryRun, list[Turn]]:
        """Each constructed instance -> the turns it ran: the turns of its (ID,
        generation) on its node after it was built and before the next instance of it
        there (a relocation builds a new instance of the same generation elsewhere)."""
        result: dict[FactoryRun, list[Turn]] = {run: [] for run in self.factory_runs}
        latest: dict[tuple[str, str, int], FactoryRun] = {}
        events: list[FactoryRun | Turn] = [*self.factory_runs, *self.turns]
        for event in sorted(events, key=lambda e: e.seq):
            key = (event.node, event.spot_id, event.generation)
            if isinstance(event, FactoryRun):
                latest[key] = event
            elif key in latest:
                result[latest[key]].append(event)
        return result

    def closes_of(self, spot_id: str) -> list[Closed]:
        return [c for c in self.closes if c.spot_id == spot_id]

    def gate(self, spot_id: str) -> Gate:
        """The :class:`Gate` every turn of ``spot_id`` passes before its handler runs."""
        gate = self.gates.get(spot_id)
        if gate is None:
            gate = self.gates[spot_id] = Gate()
        return gate

    def check(self) -> None:
        """Raise ``AssertionError`` listing :attr:`violations`, if any."""
        assert not self.violations, "\n".join(self.violations)

    # ------------------------------------------------------------------ observing

    def _trace(self, chart: str, state: str, event: str, target: str) -> None:
        self.transitions.append(Transition(chart, state, event, target, _OPERATION.get()))
        problem = chart_violation(chart, state, event, target)
        if problem is not None:
            self.violations.append(problem)

    def factory_ran(self, node_id: str, spot_id: str, generation: int,
                    stable_type: str) -> None:
        self.factory_runs.append(FactoryRun(node_id, spot_id, generation, stable_type,
                                            trio.current_time(), self._next()))

    async def before_turn(self, node_id: str, spot_id: str, generation: int) -> None:
        gate = self.gates.get(spot_id)
        if gate is not None:
            await gate.wait()

    def turn_began(self, node_id: str, spot_id: str, generation: int, handler: str,
                   message: object) -> None:
        turn = Turn(node_id, spot_id, generation, handler, message, trio.current_time(),
                    self._next())
        self.turns.append(turn)
        self._running[node_id, spot_id, generation] = turn

    def turn_ended(self, node_id: str, spot_id: str, generation: int, handler: str,
                   message: object, result: object, error: BaseException | None) -> None:
        turn = self._running.pop((node_id, spot_id, generation), None)
        if turn is not None:
            turn.ended_at, turn.result, turn.error = trio.current_time(), result, error

    def closed(self, node_id: str, spot_id: str, generation: int,
               reason: CloseReason) -> None:
        self.closes.append(Closed(node_id, spot_id, generation, reason, trio.current_time(),
                                  self._next()))

    def state_loaded(self, node_id: str, spot_id: str, generation: int, durable: object,
                     value: object, version: int) -> None:
        self.state_events.append(StateEvent(node_id, spot_id, generation, durable, "load",
                                            value, version, None, trio.current_time(),
                                            self._next()))

    def state_written(self, node_id: str, spot_id: str, generation: int, durable: object,
                      value: object, version: int | None,
                      error: BaseException | None) -> None:
        self.state_events.append(StateEvent(
            node_id, spot_id, generation, durable, "clear" if value is None else "save",
            value, version, error, trio.current_time(), self._next(),
            bool(getattr(durable, "ended", False))))
