"""The node's catalog: local incarnations, in-flight creations, the idle sweep, shutdown.

Theory of operation
-------------------
The catalog owns the nurseries every Spot task (each Spot is one Trio task) and every
cold-activation task runs in -- one for Spot tasks (shielded, ended by
:meth:`Catalog.cancel_all` after the drain) and one for activation jobs, both held by
:meth:`Catalog.serve` -- and the node-local views the coordinators consult:

* ``hosts`` -- Spot ID -> :class:`~.incarnation.Incarnation` for incarnations that are
  Ready here (what Instance intent finds locally).  :meth:`Catalog.register`
  adds an incarnation and its positive route in one synchronous step, right after
  CommitReady; the incarnation's own task removes both in one step right after Release.
* ``attempts`` -- Spot ID -> :class:`Attempt` while *this node* competes for creation
  authority of that ID.  A second local caller for the same ID waits on the attempt's
  event instead of competing (so one node never runs two reservations for one ID) and
  then re-reads the store; nothing about Creating is ever cached.
* ``pending`` -- local reservations in flight, for the active-object ceiling check
  that every local activation makes before it reserves.

The idle sweep runs every ``idle_sweep_interval`` seconds when
``instance_idle_timeout`` is positive; :class:`~zlink_trio.core.idle.IdleRing` hands it
at most 64 candidates per sweep, resuming where it stopped.  The ring keeps the
Instance Spot IDs in registration order itself (added at ``register``, discarded at
``remove``), so a sweep costs the same with 10,000 or 1,000,000 resident Spots.  An
idle Instance Spot gets BeginClose in the store, then its incarnation seals admission
and runs ``on_close(IDLE_EVICTED)`` before the location is released.

When the node loses its lease, :meth:`Catalog.lose_ownership` cancels the cold
activations and tells every incarnation (also one registered later by a commit already
in flight) to stop without store writes; :meth:`Catalog.wait_stopped` waits for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.errors import Unavailable, ZLinkError
from zlink_trio.core.identity import SpotKind
from zlink_trio.core.idle import IdleRing, is_idle
from zlink_trio.core.placement import check_local_activation
from zlink_trio.runtime.charts import INCARNATION
from zlink_trio.runtime.declaration.policies import CloseReason
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.runtime.incarnation.incarnation import Incarnation
    from zlink_trio.runtime.state import NodeState

__all__ = ("SHUTDOWN_CLOSES_IN_FLIGHT", "Attempt", "Catalog")

#: BeginClose calls a node's shutdown keeps in flight at once.
SHUTDOWN_CLOSES_IN_FLIGHT: Final = 64


@attrs.define(eq=False)
class Attempt:
    """This node competing for creation authority of one Spot ID."""

    spot_id: str
    done: trio.Event = attrs.Factory(trio.Event)


class Catalog:
    """Local incarnations and creation attempts of one node; owns their nursery."""

    def __init__(self, rt: NodeState, nursery: trio.Nursery) -> None:
        self.rt = rt
        self._nursery = nursery
        self.hosts: dict[str, Incarnation] = {}
        #: :meth:`remove`, bound once: every registered incarnation holds it.
        self._remove: Final = self.remove
        self.attempts: dict[str, Attempt] = {}
        self.pending = 0
        #: The idle sweep's candidates: the Instance Spots registered here.
        self.idle_ring: IdleRing[str] = IdleRing(interval=rt.options.idle_sweep_interval)
        # Spot tasks and activation jobs each run in a nursery of their own, held by
        # :meth:`serve`: cancelling a group is one scope, not one scope per task (a
        # cancel scope costs ~10 µs, a sizeable part of a cold activation).
        self._hosts: _Group | None = None
        self._jobs: _Group | None = None
        self._job_count = 0
        self._jobs_done = trio.Event()
        self._jobs_done.set()

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Hold the Spot-task and job nurseries until :meth:`cancel_all` (start it first).

        The Spots' nursery is shielded: cancelling ``async with open_node`` must not
        kill the Spots before the drain closes them in order; :meth:`cancel_all` ends
        them after it. Jobs are not shielded: they end with the node's nursery.
        """
        async with trio.open_nursery() as groups:
            self._hosts = await groups.start(_Group.hold, True)
            self._jobs = await groups.start(_Group.hold, False)
            task_status.started()

    # ------------------------------------------------------------------ views

    def register(self, host: Incarnation) -> None:
        """Add a Ready incarnation and its route, synchronously. Idempotent."""
        rt = self.rt
        if self.hosts.get(host.spot_id) is not host and host.spot_type.kind is SpotKind.INSTANCE:
            self.idle_ring.add(host.spot_id)
        self.hosts[host.spot_id] = host
        host.unregister = self._remove
        host.route_expires_at = rt.route_cache.local_expiry(rt.now(), rt.lease_expires_at)
        _start(self._hosts, self._nursery, host.run, _task_name(type(host)))
        if rt.lease_lost:  # committed while the lease was being lost: stop it at once
            host.lose_ownership(rt.lease_lost_error())

    def remove(self, host: Incarnation) -> None:
        """Drop ``host`` if it is still the registered incarnation of its ID."""
        if self.hosts.get(host.spot_id) is host:
            del self.hosts[host.spot_id]
            kind = host.spot_type.kind
            if kind is SpotKind.INSTANCE:
                self.idle_ring.discard(self.hosts.__contains__)
            elif kind is SpotKind.ACTOR:  # its membership ends with it on this node
                self.rt.end_membership(host.spot_id, "lost" if host.ownership_lost
                                       else "released" if host.close_reason is not None
                                       else "moved")

    def check_ceiling(self) -> None:
        """CapacityExceeded when one more local activation would pass the ceiling."""
        check_local_activation(len(self.hosts), self.pending,
                               self.rt.options.active_object_ceiling)

    def begin_attempt(self, spot_id: str) -> Attempt | None:
        """Start competing for ``spot_id``; ``None`` if this node already does."""
        if spot_id in self.attempts:
            return None
        attempt = self.attempts[spot_id] = Attempt(spot_id)
        return attempt

    def end_attempt(self, attempt: Attempt) -> None:
        """Stop competing; waiters re-read the store. Idempotent."""
        if self.attempts.get(attempt.spot_id) is attempt:
            del self.attempts[attempt.spot_id]
        attempt.done.set()

    def start_job(self, job: Callable[[], Awaitable[None]]) -> None:
        """Run a cold-activation attempt as a task of the catalog (cancelled at shutdown)."""
        self._job_count += 1
        if self._jobs_done.is_set():  # never replace an unset event someone waits on
            self._jobs_done = trio.Event()

        async def run() -> None:
            try:
                await job()
            finally:
                self._job_count -= 1
                if not self._job_count:
                    self._jobs_done.set()

        _start(self._jobs, self._nursery, run)

    # ------------------------------------------------------------------ idle sweep

    async def idle_sweep(self) -> None:
        """Evict idle Instance Spots, at most 64 examined per sweep. Runs forever."""
        ring = self.idle_ring
        while True:
            await self._evict_idle()  # (its own frame: no evicted host kept over the sleep)
            deadline = ring.next_deadline()
            assert deadline is not None
            await trio.sleep_until(deadline)

    async def _evict_idle(self) -> None:
        for host in self.idle_candidates():
            if self._idle(host):  # again: an earlier eviction awaited the store
                await self._evict(host)

    def idle_candidates(self) -> list[Incarnation]:
        """One sweep's examination, synchronous: the idle ones of the next 64 Instance Spots.

        What a sweep tick costs apart from its store calls (the growth benchmark times
        it: ``zlink_trio.bench.growth``).
        """
        hosts = self.hosts
        found = []
        for spot_id in self.idle_ring.sweep(trio.current_time(), hosts.__contains__):
            host = hosts.get(spot_id)
            if host is not None and self._idle(host):
                found.append(host)
        return found

    def _idle(self, host: Incarnation) -> bool:
        if not (INCARNATION.allows(host.state, INCARNATION.ev.begin_idle_eviction)
                and self.rt.serving):
            return False
        pending, running = host.lanes.counts()
        return is_idle(host.spot_type.kind, pending=pending, running=running,
                       relocating=host.move is not None,
                       last_work_finished_at=host.last_work_finished_at,
                       now=trio.current_time(), timeout=self.rt.options.instance_idle_timeout)

    async def _evict(self, host: Incarnation) -> None:
        record = None
        with trio.move_on_after(self.rt.options.default_timeout):  # a hung store: next sweep
            try:
                record = await self.rt.store.location.begin_close(
                    host.spot_id, object_generation=host.generation, owner=self.rt.owner,
                    now=self.rt.now())
            except ZLinkError as exc:
                LOGGER.warning("idle eviction of Spot %r could not begin: %s", host.spot_id,
                               exc)
        if record is not None:
            host.request_close(CloseReason.IDLE_EVICTED, record.fence())

    # ------------------------------------------------------------------ shutdown

    def lose_ownership(self, error: Unavailable) -> None:
        """The lease is lost: cancel cold activations, stop every incarnation (no store writes)."""
        self._cancel_jobs()
        for host in list(self.hosts.values()):
            host.lose_ownership(error)

    def _cancel_jobs(self) -> None:
        if self._jobs is not None:
            self._jobs.cancel()

    async def wait_stopped(self) -> None:
        """After :meth:`lose_ownership`: wait until no activation and no incarnation is left.

        The caller bounds this with a deadline.
        """
        await self._jobs_done.wait()
        while self.hosts:
            await next(iter(self.hosts.values())).finished.wait()

    def cancel_all(self) -> None:
        """Cancel every Spot task (after the drain, or when it ran out of time)."""
        self._cancel_jobs()
        if self._hosts is not None:
            self._hosts.cancel()

    async def shutdown(self) -> None:
        """Cancel creation attempts, close every local Spot with NODE_SHUTDOWN, wait for them.

        The caller bounds this with a deadline; attempts clean up with their own fence.
        """
        self._cancel_jobs()
        await self._jobs_done.wait()
        while self.attempts:  # user creates still cleaning up in their callers' tasks
            await next(iter(self.attempts.values())).done.wait()
        # Actors first, to their release: a User Spot with a member does not close
        # (``MembersRemain``), and a node that stops closes its Actors with it.
        hosts = list(self.hosts.values())
        actors = [host for host in hosts if host.spot_type.kind is SpotKind.ACTOR]
        if actors:
            await self._close_for_shutdown(actors)
            hosts = [host for host in hosts if host.spot_type.kind is not SpotKind.ACTOR]
        await self._close_for_shutdown(hosts)

    async def _close_for_shutdown(self, hosts: list[Incarnation]) -> None:
        """Close ``hosts`` with NODE_SHUTDOWN and wait for those whose close began."""
        # BeginClose for SHUTDOWN_CLOSES_IN_FLIGHT hosts at a time, so a store that
        # batches concurrent calls (SQLite's group commit, the Redis write pipeline)
        # batches these too: one at a time, a node with 50,000 resident Spots on SQLite or
        # Redis spent its whole shutdown deadline here (≈ 0.6 ms each).
        queue = iter(hosts)  # shared: each closer takes the next host

        async def closer() -> None:
            for host in queue:
                if self.rt.lease_lost:
                    return  # an owner without a lease may not begin a close
                await self._begin_shutdown_close(host)

        async with trio.open_nursery() as nursery:
            for _ in range(min(SHUTDOWN_CLOSES_IN_FLIGHT, len(hosts))):
                nursery.start_soon(closer)
        for host in hosts:
            if host.close_reason is not None:
                await host.finished.wait()

    async def _begin_shutdown_close(self, host: Incarnation) -> None:
        """BeginClose for ``host`` and, when the store gave it, its NODE_SHUTDOWN close."""
        if not INCARNATION.allows(host.state, INCARNATION.ev.begin_close):
            return
        try:
            record = await self.rt.store.location.begin_close(
                host.spot_id, object_generation=host.generation, owner=self.rt.owner,
                now=self.rt.now())
        except ZLinkError as exc:
            LOGGER.warning("shutdown close of Spot %r could not begin: %s",
                           host.spot_id, exc)
            return
        if record is not None:  # merges with a close that began meanwhile
            host.request_close(CloseReason.NODE_SHUTDOWN, record.fence())


class _Group:
    """A nursery held open by a task of its own, cancelled as a whole."""

    __slots__ = ("cancelled", "nursery", "scope")

    def __init__(self, scope: trio.CancelScope, nursery: trio.Nursery) -> None:
        self.scope = scope
        self.nursery = nursery
        #: :meth:`cancel` ran -- the only way the scope is cancelled (it has no deadline),
        #: and cheaper to ask than ``scope.cancel_called``, which reads the clock.
        self.cancelled = False

    @classmethod
    async def hold(cls, shield: bool, *,
                   task_status: trio.TaskStatus[_Group] = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope(shield=shield) as scope:
            async with trio.open_nursery() as nursery:
                task_status.started(cls(scope, nursery))
                await trio.sleep_forever()

    def cancel(self) -> None:
        self.cancelled = True
        self.scope.cancel()


#: An incarnation class's task name (what Trio would derive from ``run`` for every spawn).
_TASK_NAMES: dict[type, str] = {}


def _task_name(cls: type) -> str:
    name = _TASK_NAMES.get(cls)
    if name is None:
        name = _TASK_NAMES[cls] = f"{cls.run.__module__}.{cls.run.__qualname__}"  # type: ignore[attr-defined]
    return name


def _start(group: _Group | None, fallback: trio.Nursery,
           task: Callable[[], Awaitable[None]], name: str | None = None) -> None:
    """Run ``task`` in ``group``; once the group is cancelled, already cancelled.

    A task that arrives after its group was cancelled (a commit finishing during the
    drain, a job accepted as the node stops) must still run its own cleanup, so it
    runs in the node's nursery under a cancelled scope, as if cancelled at once. Raises
    Unavailable when that nursery has closed too: the lifecycle is over.
    """
    if group is not None and not group.cancelled:
        try:
            group.nursery.start_soon(task, name=name)
        except RuntimeError:  # the group's nursery closed: fall through
            pass
        else:
            return

    async def cancelled() -> None:
        with trio.CancelScope() as scope:
            scope.cancel()
            await task()

    try:
        fallback.start_soon(cancelled)
    except RuntimeError:  # the lifecycle itself has ended (an application task outlived it)
        raise Unavailable(
            "the node lifecycle this operation ran on has ended (it stopped, or lost its "
            "lease and rejoined as a new one); the operation did not run: call again"
        ) from None
