"""A Spot incarnation on the move: the source side of a planned relocation (06 §6.1, §8).

Theory of operation
-------------------
A :class:`Move` is attached to the source's host (``host.move``) for the length of
one relocation, by the relocation coordinator
(:mod:`zlink_trio.runtime.coordinators.relocation`), and follows the ``Incarnation``
chart:

* **Relocating, waiting for the permit** -- the host keeps ``serving``: messages and
  timers are admitted and run as usual (06 §6.1 "a Relocating unit that is waiting for
  a permit hasn't been sealed yet"), but the idle sweep skips it (09 §5).
* :meth:`Move.seal` -- ``seal_for_relocation`` -> ``sealed``: from here no turn runs
  and no timer fires; a message admitted now goes to the **relocation hold**
  (``hold``: arrival order, no bound of its own, 09 §6) instead of the queue.  The
  turn running at the seal finishes; :meth:`Move.wait_no_turn` waits for it, so the
  queue the coordinator then captures is exactly the not-yet-run work.
* :meth:`Move.unseal` -- an explicit abort before relay-ready: ``abort_relocation`` ->
  ``serving``; the held ingress goes to the end of the queue in arrival order (behind
  the work that was queued at the seal) and the host runs again.
* :func:`open_moved` -- the target's side: its host opens with the moved queue at the
  head, before any other message.
* :meth:`Move.strand` -- past relay-ready the target did not commit in time: the
  held requests end with ``Unavailable`` and new ingress is refused with it; the
  host stays ``sealed`` until the commit is seen (``finish``).
* :meth:`Move.finish` -- the relocation committed: ``commit_relocation`` ->
  ``disposed``.  The queued work left with the payload, so it is taken out of the
  lanes without being completed here (the target runs it and its replies come back
  through this node); timers are cancelled, the host leaves the catalog and the route
  cache, and its task ends -- without a Release: the authority now belongs to the
  target.  The hold is returned to the coordinator, which relays it along the Message
  Follow route.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from zlink_trio.core.errors import Unavailable
from zlink_trio.runtime.charts import INCARNATION, step

if TYPE_CHECKING:
    from statecharts.names import IncarnationState
    from zlink_trio.core.lanes import Lanes
    from zlink_trio.runtime.incarnation.timers import HostTimers

__all__ = ("Move", "MovingHost", "open_moved")


class MovingHost(Protocol):
    """What a :class:`Move` reads and steps of its host (``incarnation.host.Host``)."""

    state: IncarnationState

    @property
    def lanes(self) -> Lanes[Any]:
        """The host's two lanes."""
        ...

    @property
    def timers(self) -> HostTimers:
        """The host's timers."""
        ...

    def wake(self) -> None:
        """Wake the host's task to look at its state and queue again."""
        ...

    def pending_and_running(self) -> tuple[int, int]:
        """Queued and running work items over both lanes."""
        ...

    def leave_catalog(self) -> None:
        """Leave the catalog and the route cache (one continuation)."""
        ...


def open_moved(host: MovingHost, queue: list[tuple[Any, int]]) -> None:
    """The target of a committed relocation: the moved queue first, then serving.

    ``commit_relocation`` -> ``barrier_closed``, the moved work queued in order (it was
    accepted at the source: never refused here), ``open_barrier`` -> ``serving``.
    Synchronous, like ``Host.open``: the caller registers the host in the catalog in
    the same continuation.
    """
    host.state = step(INCARNATION, host.state, INCARNATION.ev.commit_relocation)
    lane = host.lanes.application
    for work, size in queue:
        lane.append_unbounded(work, size)
    host.state = step(INCARNATION, host.state, INCARNATION.ev.open_barrier)


class Move:
    """The source side of one relocation of one host (see the module docstring)."""

    __slots__ = ("_host", "_turn_done", "hold", "stranded")

    def __init__(self, host: MovingHost) -> None:
        self._host = host
        #: Ingress admitted after the seal, in arrival order: ``(work, payload size)``.
        self.hold: list[tuple[Any, int]] = []
        #: Set by :meth:`strand`: why the Spot is unavailable here (admission refuses).
        self.stranded: str | None = None
        self._turn_done: trio.Event | None = None

    def seal(self) -> None:
        """Seal admission into the hold; no turn runs and no timer fires from now on."""
        host = self._host
        host.state = step(INCARNATION, host.state, INCARNATION.ev.seal_for_relocation)
        host.wake()

    def turn_finished(self) -> None:
        """Called by the host's task after each turn (wakes :meth:`wait_no_turn`)."""
        done = self._turn_done
        if done is not None:
            self._turn_done = None
            done.set()

    async def wait_no_turn(self) -> None:
        """Wait until the turn that was running at the seal has finished (caller bounds it)."""
        while self._host.pending_and_running()[1]:
            done = self._turn_done = trio.Event()
            await done.wait()

    def unseal(self) -> list[tuple[Any, int]]:
        """Abort before relay-ready: serve again, the hold queued behind the captured work.

        Returns what was held (now queued). Idempotent once unsealed.
        """
        host = self._host
        if host.state == INCARNATION.st.sealed:
            host.state = step(INCARNATION, host.state, INCARNATION.ev.abort_relocation)
        held, self.hold = self.hold, []
        lane = host.lanes.application
        for work, size in held:
            lane.append_unbounded(work, size)  # accepted already: never refused now
        host.wake()
        return held

    def strand(self, why: str) -> None:
        """Past relay-ready, the target did not commit in time: end the hold, refuse ingress.

        The source never serves again and the Spot is unavailable until the target
        commits (a restart of it included), so holding without end would only turn each
        caller's wait into a DeadlineExceeded: each held request gets ``Unavailable(why)``
        now and :meth:`refusal` refuses new ingress the same way. :meth:`finish` still
        runs at the commit.
        """
        self.stranded = why
        held, self.hold = self.hold, []
        for work, _size in held:
            if work.completion is not None:
                work.completion.set_error(Unavailable(why))

    def refusal(self) -> Unavailable | None:
        """The error a new message gets once stranded (``None`` while it may be held)."""
        return None if self.stranded is None else Unavailable(self.stranded)

    def finish(self) -> tuple[list[Any], list[tuple[Any, int]]]:
        """The relocation committed: dispose of the source incarnation, no store write.

        Returns the queued work that left with the payload (oldest first) and the hold
        (arrival order), for the coordinator to account for and relay.
        """
        host = self._host
        host.state = step(INCARNATION, host.state, INCARNATION.ev.commit_relocation)
        moved = host.lanes.application.take_queued()
        host.timers.cancel_all()
        held, self.hold = self.hold, []
        host.leave_catalog()
        host.wake()  # its task sees ``disposed`` and returns
        return moved, held
