"""Local incarnation: one Spot instance inside one node process.

Theory of operation
-------------------

An incarnation is the node-local object for one (Spot ID, ObjectGeneration): the
application instance, its two execution lanes and its timers, run by one Trio task.  Its
state decides *admission* -- whether a message or timer arriving at this node may be
queued and whether a handler may run -- while the store's ``SpotAuthority`` decides
ownership.  The runtime keeps one state id per incarnation and steps it with
``compile(Incarnation)``.

* ``activating`` -- the shell exists; factory and initialize (create, cold
  activation) or state restore (relocation target) run.  It is not exposed to the
  resolver or to handlers.  ``commit_ready`` (the store committed Ready for this
  attempt, cold activation step 11) or ``commit_relocation`` (the authority moved to
  this node) -> ``barrier_closed``.  ``activation_failed`` (factory/initialize
  error, on_create rejection, deadline, abort of a relocation target, or the target's
  authority aborted with the same fence) -> ``disposed`` directly: the application
  never served.  If the instance was constructed, the runtime calls its
  ``on_close(ACTIVATION_FAILED)`` once so it can release what its constructor
  acquired; the authority cleanup (AbortCreating) belongs to the create/activation
  chart.
* ``barrier_closed`` -- Ready is committed and the route is registered, so messages
  are admitted to the queue, but no handler runs until the first durable record (cold
  activation) or the relocated queue head is restored: ``open_barrier`` -> ``serving``
  (the step 11 barrier of ``ColdActivation``, again after a restart: a Spot is
  published before its first message runs, and nothing overtakes that message).  A
  User Spot create has no first record and opens the barrier immediately after the
  commit.
* ``serving`` -- admission open, one handler turn at a time.  A relocation that
  waits for a permit is not sealed, so the incarnation keeps ``serving``.
  ``seal_for_relocation`` -> ``sealed``; ``begin_close`` (explicit Close) or
  ``begin_idle_eviction`` (IdleEvicted, Instance Spots only) -> ``closing``.
* ``sealed`` -- ingress goes to the relocation hold and no application handler runs.
  ``abort_relocation`` (explicit abort before relay-ready) -> ``serving``
  with the held ingress returned to the queue in arrival order.
  ``commit_relocation`` -> ``disposed``: the authority now names the target and the
  source keeps only the Message Follow route.  Refusing an abort *after* relay-ready
  is the job of ``PlannedRelocation`` and ``SpotAuthority``.
* ``closing`` -- local admission is sealed; turns and timers accepted before the
  seal finish, cleanup runs once (see ``CloseOperation``).  ``dispose`` ->
  ``disposed``.
* ``disposed`` (final) -- the instance and its resources are gone; a message still
  addressed to it ends stale (``StaleRoute``: this node no longer owns the Spot).

An expired owner lease stops admission node-wide (``NodeLifecycle``), not per
incarnation; it is therefore not an event here.

Tags -- the questions the runtime asks of an incarnation's state:

* ``admission_sealed`` (``closing``, ``disposed``) -- a new message is refused as
  stale: the incarnation is closing or gone.
* ``holds_ingress`` (``sealed``) -- a new message goes to the relocation hold, not the
  queue.
* ``closes_when_drained`` (``closing``) -- once no accepted work is left, the task
  runs the close's last steps.
* ``fires_timers`` (``serving``) -- due timer ticks are queued as turns.
* ``runs_turns`` (``serving``, ``closing``) -- the task takes the next queued turn (a
  sealed incarnation keeps its queue for the relocation and runs nothing).
* ``task_running`` (``serving``, ``sealed``, ``closing``) -- the incarnation's task runs
  and may hold accepted work: a lost lease must stop it.
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart, state_tags

__all__ = ("Incarnation",)


class Incarnation(StrictChart):
    """Admission lifecycle of one local Spot instance on one node."""

    activating = State(initial=True)
    barrier_closed = State()
    serving = State()
    sealed = State()
    closing = State()
    disposed = State(final=True)

    commit_ready = activating.to(barrier_closed)
    commit_relocation = activating.to(barrier_closed) | sealed.to(disposed)
    activation_failed = activating.to(disposed)
    open_barrier = barrier_closed.to(serving)

    seal_for_relocation = serving.to(sealed)
    abort_relocation = sealed.to(serving)

    begin_close = serving.to(closing)
    begin_idle_eviction = serving.to(closing)
    dispose = closing.to(disposed)

    tags = state_tags(
        admission_sealed=(closing, disposed),
        holds_ingress=(sealed,),
        closes_when_drained=(closing,),
        fires_timers=(serving,),
        runs_turns=(serving, closing),
        task_running=(serving, sealed, closing),
    )
