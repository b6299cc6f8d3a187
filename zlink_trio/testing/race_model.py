"""Race models: hypothesis state machines whose rules drive real nodes inside one Trio run.

Theory of operation
-------------------
A hypothesis ``RuleBasedStateMachine`` runs its rules synchronously, while nodes live in
Trio.  :func:`run_race_model` bridges the two without hooking hypothesis internals (no
hypothesis-trio, hypothesis#1709): it starts ``trio.run`` on a
``trio.testing.MockClock(rate=0)`` with no autojump -- time moves only when a rule jumps
it -- and runs the machine in a worker thread (``trio.to_thread.run_sync``).  Each rule
reaches into Trio with :meth:`TrioMachine.trio` (``trio.from_thread``); rules only
*start* operations, as tasks that run until they block, and then the system settles
(:func:`~zlink_trio.testing.store_io.settle`: no runnable task for a few real
milliseconds, so link bytes have landed, and no store call in flight), so invariants
read a consistent snapshot between rules.  Trio's scheduler randomness is seeded by
hypothesis (trio registers it), so a failure replays and shrinks (best effort: a link
round trip may still land in another order).

:class:`SpotRaceModel` (:mod:`.spot_race`) is the ready-made machine over *your* Spot
types; :class:`TrioMachine` is the base for writing your own, as zlink_trio's own
runtime and relocation models do (``tests/runtime/test_runtime_model.py``,
``test_relocation_model.py``).  This module needs hypothesis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio
import trio.testing
from hypothesis.stateful import RuleBasedStateMachine, run_state_machine_as_test

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from hypothesis import settings as Settings

__all__ = ("RaceHarness", "TrioMachine", "current_harness", "run_race_model")


@attrs.define(eq=False)
class RaceHarness:
    """The Trio side a machine's thread reaches: the clock, a long-lived nursery, and
    whatever the test put in ``data`` (``run_race_model(..., data=...)``)."""

    clock: trio.testing.MockClock
    nursery: trio.Nursery
    data: dict[str, Any] = attrs.Factory(dict)


_HARNESS: RaceHarness | None = None


def current_harness() -> RaceHarness:
    """The harness of the :func:`run_race_model` running now."""
    if _HARNESS is None:
        raise RuntimeError("a race model runs only inside run_race_model(); call "
                           "run_race_model(YourModel) (or YourModel.run()) from the test")
    return _HARNESS


class TrioMachine(RuleBasedStateMachine):
    """A state machine whose rules reach into the Trio run of :func:`run_race_model`."""

    def __init__(self) -> None:
        super().__init__()
        self.harness = current_harness()
        #: Set once a call into Trio raised: teardown then skips its final checks.
        self.failed = False

    def trio(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run ``await fn(*args)`` in the Trio thread and return its result."""
        try:
            return trio.from_thread.run(fn, *args)
        except BaseException:
            self.failed = True
            raise

    def trio_sync(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in the Trio thread (between two Trio steps)."""
        try:
            return trio.from_thread.run_sync(fn, *args)
        except BaseException:
            self.failed = True
            raise


def run_race_model(machine: type[RuleBasedStateMachine], *, settings: Settings | None = None,
                   prepare: Callable[[RaceHarness], Awaitable[None]] | None = None,
                   data: dict[str, Any] | None = None) -> None:
    """Run ``machine`` (a :class:`TrioMachine`) as a test, inside one ``trio.run`` on
    ``MockClock(rate=0)``. ``prepare`` is awaited in Trio first (e.g. to patch a backend);
    ``data`` lands in the harness. Hypothesis' failure is raised as itself."""

    async def main() -> None:
        global _HARNESS
        clock = trio.lowlevel.current_clock()
        assert isinstance(clock, trio.testing.MockClock)
        try:
            async with trio.open_nursery() as nursery:
                harness = RaceHarness(clock, nursery, dict(data or {}))
                if prepare is not None:
                    await prepare(harness)
                _HARNESS = harness
                try:
                    await trio.to_thread.run_sync(
                        lambda: run_state_machine_as_test(machine, settings=settings))
                finally:
                    _HARNESS = None
                    nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # report hypothesis' failure itself
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise

    trio.run(main, clock=trio.testing.MockClock(rate=0))

