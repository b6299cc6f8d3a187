"""``open_node``: a node's lifecycles -- claim, serve, drain, remove (``NodeLifecycle`` chart).

Theory of operation
-------------------
``async with open_node(node_id, ...) as node`` does, in order:

1. Validate everything locally -- NodeId, MeshName, options, the Spot types (a stable
   type registered twice is a startup error) -- and raise
   :class:`InvalidConfiguration` before the store is touched.
2. Open the store (and the metrics listener, and the ``stop_on`` signal receiver) and
   start the task that runs the node's lifecycles (:func:`_run_lifecycles`). One
   lifecycle (:func:`_lifecycle`) draws a fresh NodeRid and Entry Spot ID
   ``<node_id>-entry-<uuid4>``, listens, and claims the descriptor and the Entry Spot in
   one NewClaim (a conflict is a startup configuration error; no second Entry UUID is
   tried); then it starts the lease renewal (every ``lease / 3``,
   :mod:`.coordinators.lease`), the refresh of the placement claims, the idle sweep and
   the catalog's Spot tasks, runs the startup scan and opens admission
   (:func:`_start`). The first lifecycle's startup errors come out of ``open_node``;
   once it serves, the block gets the :class:`Node`.
3. A lifecycle ends when the block's side asks it to stop (:class:`.stopping.Stopping`)
   or when it lost its lease (:func:`.coordinators.lease.lose_lease` stopped every local
   Spot with OWNERSHIP_LOST, writing nothing). After a lost lease the next lifecycle of
   the same NodeId starts as soon as the store answers, bound into the same ``Node``
   (``on_lease_lost="rejoin"``), or ``NodeLost`` ends ``open_node`` (``"raise"``).
4. On the block's exit -- normal, error or cancellation, shielded -- the lifecycle
   stops: after a normal end (or a ``stop_on`` signal) it first moves its Spots to the
   other nodes (:func:`.stopping.move_spots_away`, bounded by ``stop_drain_timeout``);
   then, bounded by ``default_timeout``, creation attempts are cancelled (they abort
   with their fence), every local Spot closes with NODE_SHUTDOWN and releases its
   authority, the renewal stops, and the descriptor and Entry claim are removed with
   the lifecycle fence (:func:`_drain`). A lifecycle that lost its lease touches no
   store record.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import asynccontextmanager
from functools import partial
from typing import TYPE_CHECKING, Final

import attrs
import trio

from zlink_trio.core.descriptor import NodeDescriptor
from zlink_trio.core.errors import (
    AlreadyExists,
    InvalidConfiguration,
    InvalidOperation,
    NodeLost,
    Unavailable,
    ZLinkError,
    single_error,
)
from zlink_trio.core.identity import (
    NodeRid,
    SpotKind,
    new_entry_spot_id,
    validate_entry_prefix,
    validate_mesh_name,
    validate_node_id,
)
from zlink_trio.core.placement import Role
from zlink_trio.core.records import OwnerFence
from zlink_trio.core.route_cache import RouteCache
from zlink_trio.runtime.actors.manager import ActorManager
from zlink_trio.runtime.calls.client import SpotClient
from zlink_trio.runtime.calls.deadlines import deadline_after
from zlink_trio.runtime.charts import NODE, step
from zlink_trio.runtime.collector import keep_frozen
from zlink_trio.runtime.coordinators.call_router import CallRouter
from zlink_trio.runtime.coordinators.inbound import inbound_handler
from zlink_trio.runtime.coordinators.lease import keep_lease, wait_stopped
from zlink_trio.runtime.coordinators.node_claim import claim_node_id
from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
from zlink_trio.runtime.coordinators.placement import close_placement
from zlink_trio.runtime.coordinators.recovery import recover_orphans
from zlink_trio.runtime.coordinators.reminders import deliver_reminders
from zlink_trio.runtime.coordinators.remote_operation import drain_here
from zlink_trio.runtime.declaration.registry import SpotTypeRegistry
from zlink_trio.runtime.incarnation.catalog import Catalog
from zlink_trio.runtime.mesh.peers import Peers
from zlink_trio.runtime.mesh.setup import NetworkOptions, mesh_settings, open_mesh
from zlink_trio.runtime.observe.logs import LEASE as REJOIN
from zlink_trio.runtime.observe.logs import NODE as LOGGER
from zlink_trio.runtime.observe.setup import (
    MetricsSettings,
    ObservabilityOptions,
    metrics_listeners,
    metrics_settings,
    new_recorder,
    serve_metrics_on,
    start_metrics,
    timed,
)
from zlink_trio.runtime.observe.tracing import tracing_for
from zlink_trio.runtime.options import (
    UNSET,
    CapacityOptions,
    InjectedOptions,
    LifecycleOptions,
    NodeOptions,
    TimingOptions,
    with_shortcuts,
)
from zlink_trio.runtime.sampling import sample_node
from zlink_trio.runtime.stopping import Stopping, move_spots_away, watch_signals
from zlink_trio.store import MemoryStore, open_store, with_combined
from zlink_trio.store.values import NodeIdInUse
from zlink_trio.wire.codec import MessageCodec
from zlink_trio.wire.frames import DEFAULT_MAX_FRAME_BYTES
from zlink_trio.wire.handshake import LocalIdentity

if TYPE_CHECKING:
    import random as random_module
    import signal
    import ssl
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

    from prometheus_client.registry import CollectorRegistry

    from zlink_trio.core.lanes import LaneBounds
    from zlink_trio.runtime.mesh.setup import MeshSettings
    from zlink_trio.runtime.observe.metrics import MetricsRecorder
    from zlink_trio.runtime.observe.tracing import Tracing
    from zlink_trio.store import Store


from zlink_trio.runtime.node_handle import Node as Node

__all__ = ("Node", "open_node")


def _default_store_clock(store: str | MemoryStore) -> Callable[[], float]:
    # A store in this process may follow Trio's (possibly mocked) clock; a store other
    # processes share needs one clock for all of them, and only wall time is shared.
    # The run's clock itself: what ``trio.current_time`` reads, without its three calls
    # (read several times per request; the node lives in this one run).
    if isinstance(store, MemoryStore) or (isinstance(store, str)
                                          and store.lower().startswith("memory://")):
        return trio.lowlevel.current_clock().current_time
    return time.time


def _config(what: str, exc: InvalidOperation) -> InvalidConfiguration:
    if isinstance(exc, InvalidConfiguration):
        return exc
    return InvalidConfiguration(f"{what}: {exc.message}")


def _descriptor(rt_rid: NodeRid, node_id: str, mesh: str, entry: str, options: NodeOptions,
                registry: SpotTypeRegistry, client_only: bool) -> NodeDescriptor:
    if client_only:  # hosts nothing: no served type, no capacity, no weight, no server role
        return NodeDescriptor(
            mesh=mesh, node_rid=rt_rid, node_id=node_id, endpoint=options.endpoint,
            roles={Role.OBJECT_CLIENT}, served_types={}, capacity=0, placement_weight=0.0,
            entry_spot_id=entry)
    return NodeDescriptor(
        mesh=mesh, node_rid=rt_rid, node_id=node_id, endpoint=options.endpoint,
        roles={Role.OBJECT_CLIENT, Role.OBJECT_SERVER},
        served_types={t.stable_type: t.kind for t in registry
                      if t.kind in (SpotKind.USER, SpotKind.INSTANCE, SpotKind.ACTOR)},
        capacity=options.active_object_ceiling, placement_weight=options.placement_weight,
        entry_spot_id=entry)


def _check_client_only(client_only: object, spots: list[object]) -> bool:
    if not isinstance(client_only, bool):
        raise InvalidConfiguration(f"client_only must be a bool, got {client_only!r}")
    if client_only and spots:
        raise InvalidConfiguration(
            f"a client_only node hosts no Spots, but spots= names {len(spots)} type(s); "
            "pass spots=[] or drop client_only=True")
    return client_only


async def _start(rt: NodeRuntime, nursery: trio.Nursery, not_before: float = 0.0
                 ) -> trio.CancelScope:
    """Start the lifecycle's background tasks in ``nursery``, run the startup scan and
    open admission (not before Trio time ``not_before``): the lease renewal's scope.

    ``not_before`` is one lease after this lifecycle's claim, when the claim showed that
    the store lost its data (a Redis restarted without persistence, ``FLUSHALL``: see
    :func:`_lifecycle`). The store then no longer knows which Spots other nodes own, and
    a node that has not yet noticed still runs them under a lease granted before -- for
    at most one lease (every node of a Mesh is assumed to use the same lease). Scanning
    or serving earlier could activate a second copy of such a Spot beside it.

    Raises Unavailable (typed, never an internal lifecycle error) when the scan does not
    finish within ``default_timeout`` or the new lifecycle's lease ran out before
    admission opened: the node did not start, and restarting it resumes what is left.
    """
    options, node_id = rt.options, rt.node_id
    nursery.start_soon(rt.deadlines.run)
    nursery.start_soon(rt.peers.sweep)
    nursery.start_soon(rt.claims_refresh.serve, rt)
    renewal = trio.CancelScope()
    nursery.start_soon(_run_in, renewal, keep_lease, rt)
    if options.instance_idle_timeout > 0:
        nursery.start_soon(rt.catalog.idle_sweep)
    if options.gc_freeze_after > 0:
        hosts = rt.catalog.hosts
        nursery.start_soon(keep_frozen, node_id, rt, options.gc_freeze_after,
                           hosts.__len__)
    if trio.current_time() < not_before:
        REJOIN.warning(
            "node %r: the store lost its data (this NodeId's lifecycle count started over); "
            "it serves again in %.2f s, once every lease the store granted before has run "
            "out", node_id, not_before - trio.current_time())
        await trio.sleep_until(not_before)  # (the renewal keeps this lifecycle's lease)
    # Startup scan: resume or abort what a dead lifecycle of this NodeId left, before
    # admission opens (bounded like any startup store work).
    with trio.move_on_after(options.default_timeout) as scan:
        await recover_orphans(rt)
    if scan.cancelled_caught:
        raise Unavailable(
            f"node {node_id!r}: the startup authority scan did not finish within "
            f"{options.default_timeout} s (store slow or a factory hung); the node did not "
            "start. Restart it: the scan resumes what is left"
        )
    if rt.lease_lost or rt.now() >= rt.lease_expires_at:
        raise Unavailable(
            f"node {node_id!r}: its lease ran out before it opened admission (the store "
            "answered too slowly during startup); the node did not start. Restart it: "
            "the new lifecycle's scan resumes what is left"
        )
    rt.state = step(NODE, rt.state, NODE.ev.open_admission)
    nursery.start_soon(deliver_reminders, rt)
    return renewal


@asynccontextmanager
async def open_node(
    node_id: str,
    *,
    store: str | MemoryStore = "memory://",
    relocation_store: str | None = None,
    mesh: str = "world",
    spots: Iterable[object] = (),
    client_only: bool = False,
    network: NetworkOptions | None = None,
    timing: TimingOptions | None = None,
    capacity: CapacityOptions | None = None,
    observability: ObservabilityOptions | None = None,
    lifecycle: LifecycleOptions | None = None,
    injected: InjectedOptions | None = None,
    # Shortcuts: each is the field of the same name of the group above it.
    listen: str | None = UNSET,
    secret: bytes | str | None = UNSET,
    ssl_context: ssl.SSLContext | None = UNSET,
    client_ssl_context: ssl.SSLContext | None = UNSET,
    endpoint: str | None = UNSET,
    max_links: int = UNSET,
    route_cache_max_age: float = UNSET,
    message_follow_duration: float = UNSET,
    lease: float = UNSET,
    default_timeout: float = UNSET,
    instance_idle_timeout: float = UNSET,
    idle_sweep_interval: float = UNSET,
    active_object_ceiling: int = UNSET,
    application_lane: LaneBounds = UNSET,
    lifecycle_lane: LaneBounds = UNSET,
    placement_weight: float = UNSET,
    gc_freeze_after: int = UNSET,
    metrics: CollectorRegistry | None = UNSET,
    metrics_port: int | None = UNSET,
    metrics_host: str = UNSET,
    tracing: object = UNSET,
    on_stop: str = UNSET,
    stop_drain_timeout: float = UNSET,
    stop_on: tuple[signal.Signals, ...] = UNSET,
    on_lease_lost: str = UNSET,
) -> AsyncIterator[Node]:
    """Run a node serving ``spots`` in ``mesh`` for the duration of the ``async with`` block.

    ``store`` is a URL (``"memory://"``, ``"memory://<name>"``, ``"sqlite:///path.db"``,
    ``"redis://host:port/db"``) or a shared :class:`MemoryStore`. ``relocation_store``
    (a URL) keeps the Relocation Store -- activation envelopes, creation requests,
    relocation payloads, activation inboxes -- in another backend; by default it lives
    in ``store``'s backend under its own key prefix or tables (06: "may share a
    deployment, but not a keyspace").

    ``client_only=True`` makes a node that hosts no Spots -- an API edge, or the
    operator commands' node: it joins the Mesh (claim, links, lease) with only the
    object-client role, no served types, capacity 0 and placement weight 0, so no
    placement, creation or relocation ever chooses it; it calls, creates, closes and
    relocates Spots on the other nodes. ``spots`` must then be empty.

    Every other option belongs to one of six groups, each a frozen class checked when
    it is built (its docstring describes each field and its default):

    * ``network`` -- :class:`NetworkOptions`: ``listen`` (``"127.0.0.1:0"``; ``None``: no
      links), ``secret`` (required off loopback), ``ssl_context``,
      ``client_ssl_context``, ``endpoint`` (what the descriptor publishes), ``max_links``
      (1024);
    * ``timing`` -- :class:`TimingOptions`: ``route_cache_max_age`` (15 s),
      ``message_follow_duration`` (30 s), ``lease`` (10 s, renewed every third),
      ``default_timeout`` (30 s, the deadline of calls without ``.timeout()``);
    * ``capacity`` -- :class:`CapacityOptions`: ``active_object_ceiling`` (10,000),
      ``application_lane`` / ``lifecycle_lane`` (``LaneBounds``),
      ``instance_idle_timeout`` (300 s; 0 disables idle eviction),
      ``idle_sweep_interval`` (1 s), ``placement_weight`` (1.0), ``gc_freeze_after``
      (10,000 Spots between two freezes of the garbage collector's view; 0: never);
    * ``observability`` -- :class:`ObservabilityOptions`: ``metrics`` (a
      ``prometheus_client.CollectorRegistry``; needs the ``metrics`` extra,
      ``docs/observability.md``), ``metrics_port`` (serves ``GET /metrics``;
      :attr:`Node.metrics_url` names it), ``metrics_host`` (``127.0.0.1``),
      ``tracing`` (OpenTelemetry spans: ``None`` the global tracer provider if one is
      set, ``False`` none, or a ``TracerProvider``; the ``otel`` extra);
    * ``lifecycle`` -- :class:`LifecycleOptions`: ``on_stop`` (``"drain"``: leaving the
      block first moves the Spots to the other nodes; ``"close"``), ``stop_drain_timeout``
      (15 s), ``stop_on`` (signals that stop the node, e.g. ``(signal.SIGTERM,
      signal.SIGINT)``), ``on_lease_lost`` (``"rejoin"``: a new lifecycle as soon as the
      store answers; ``"raise"``: :class:`NodeLost`);
    * ``injected`` -- :class:`InjectedOptions`: the store ``clock`` (leases and
      route-cache ages; Trio's clock for an in-process ``memory://`` store, wall time for
      a shared one) and ``random`` (NodeRid, IDs, placement; ``os.urandom`` by default),
      for tests and simulations.

    Each field of the first five groups is also a keyword of the same name, a shortcut:
    ``open_node("a", lease=5, listen=None)`` is ``open_node("a",
    timing=TimingOptions(lease=5), network=NetworkOptions(listen=None))``. A keyword
    fills its field; given together with a group whose field holds another value than
    the keyword's (not the default), the option is given twice and
    :class:`InvalidConfiguration` says so.

    Raises :class:`InvalidConfiguration` for invalid options or Spot declarations
    (including a stable type registered twice) and when the descriptor or Entry claim
    conflicts with a live one, before yielding; nothing is written then. A NodeId held by
    another process's live claim is waited for while that lease runs out (a restart after
    a crash: the predecessor's lease expires, then this lifecycle releases what it left,
    see ``store.dead_lifecycle``) and refused as soon as the holder renews it (two live
    processes may not share a NodeId): ``InvalidConfiguration`` caused by ``NodeIdInUse``.
    Raises :class:`NodeLost` out of the block when the node lost its lease and
    ``on_lease_lost="raise"``, or could not rejoin because another live process holds
    its NodeId.
    """
    state = NODE.initial
    try:
        node_id = validate_node_id(node_id)
        validate_entry_prefix(node_id)
        mesh = validate_mesh_name(mesh)
        network = with_shortcuts(
            NetworkOptions, network, "network", listen=listen, secret=secret,
            ssl_context=ssl_context, client_ssl_context=client_ssl_context,
            endpoint=endpoint, max_links=max_links)
        timing = with_shortcuts(
            TimingOptions, timing, "timing", route_cache_max_age=route_cache_max_age,
            message_follow_duration=message_follow_duration, lease=lease,
            default_timeout=default_timeout)
        capacity = with_shortcuts(
            CapacityOptions, capacity, "capacity", instance_idle_timeout=instance_idle_timeout,
            idle_sweep_interval=idle_sweep_interval, active_object_ceiling=active_object_ceiling,
            application_lane=application_lane, lifecycle_lane=lifecycle_lane,
            placement_weight=placement_weight, gc_freeze_after=gc_freeze_after)
        observability = with_shortcuts(
            ObservabilityOptions, observability, "observability", metrics=metrics,
            metrics_port=metrics_port, metrics_host=metrics_host, tracing=tracing)
        lifecycle = with_shortcuts(
            LifecycleOptions, lifecycle, "lifecycle", on_stop=on_stop,
            stop_drain_timeout=stop_drain_timeout, stop_on=stop_on,
            on_lease_lost=on_lease_lost)
        if lifecycle.stop_on and threading.current_thread() is not threading.main_thread():
            raise InvalidConfiguration(
                f"stop_on={tuple(s.name for s in lifecycle.stop_on)} needs the main thread, "
                "where Python delivers signals; open the node there, or leave stop_on out "
                "and stop it yourself")
        injected = with_shortcuts(InjectedOptions, injected, "injected")
        settings = mesh_settings(network)
        options = NodeOptions.of(timing, capacity, network.endpoint or "local://")
        spots = list(spots)
        client_only = _check_client_only(client_only, spots)
        registry = SpotTypeRegistry.build(spots)
        metrics_setup = metrics_settings(observability)
        tracing = tracing_for(observability.tracing, node_id)
    except InvalidOperation as exc:
        step(NODE, state, NODE.ev.configuration_invalid)
        raise _config("open_node: invalid configuration", exc) from exc
    clock, random = injected.clock, injected.random
    stop = Stopping()
    try:
        async with open_store(store, relocation=relocation_store) as opened, \
                metrics_listeners(metrics_setup) as metrics_at, \
                _signals(lifecycle.stop_on) as received, \
                trio.open_nursery() as nursery:
            recorder = new_recorder(metrics_setup, node_id)
            setup = _Setup(
                node_id=node_id, mesh=mesh, settings=settings, options=options,
                registry=registry, client_only=client_only, lifecycle=lifecycle,
                store=timed(with_combined(opened), metrics_setup, recorder, store,
                            relocation_store),
                clock=_default_store_clock(store) if clock is None else clock,
                random=random, metrics_setup=metrics_setup, recorder=recorder,
                tracing=tracing, metrics_url=serve_metrics_on(nursery, metrics_setup, metrics_at))
            node: Node = await nursery.start(_run_lifecycles, setup, stop)
            if received is not None:
                nursery.start_soon(watch_signals, received, stop, node_id)
            graceful = False
            try:
                with stop.body:
                    yield node
                graceful = True  # the block ended normally, or a stop_on signal ended it
            finally:
                with trio.CancelScope(shield=True):
                    stop.request(graceful=graceful)
                    with trio.move_on_after(_stop_bound(options, lifecycle)):
                        await stop.done.wait()
                if setup.detach_metrics is not None:
                    setup.detach_metrics()  # the node's series leave the registry
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        # The block's own exception comes out as it was raised, not wrapped in the
        # groups of the nurseries it crossed (the node's, the transport's, the store's;
        # single_error unwraps nested ones), so ``except zl.NotFound`` around
        # ``async with`` works.
        single = single_error(group)
        if single is None:
            raise
        raise single from single.__cause__


@asynccontextmanager
async def _signals(signals: tuple[signal.Signals, ...]
                   ) -> AsyncIterator[AsyncIterator[int] | None]:
    """The signal receiver of ``stop_on`` (``None`` without signals); the main thread
    was checked with the options."""
    if not signals:
        yield None
        return
    with trio.open_signal_receiver(*signals) as received:
        yield received


def _stop_bound(options: NodeOptions, lifecycle: LifecycleOptions) -> float:
    """How long the block's exit waits for the lifecycle task to leave the Mesh: the
    drain, then closing the Spots and removing the descriptor (each bounded itself)."""
    return lifecycle.stop_drain_timeout + 3 * options.default_timeout + options.lease


@attrs.define(eq=False, kw_only=True)
class _Setup:
    """What every lifecycle of one ``open_node`` shares: options, store, metrics, handle."""

    node_id: str
    mesh: str
    settings: MeshSettings
    options: NodeOptions
    registry: SpotTypeRegistry
    client_only: bool
    lifecycle: LifecycleOptions
    store: Store
    clock: Callable[[], float]
    random: random_module.Random | None
    metrics_setup: MetricsSettings | None
    recorder: MetricsRecorder | None
    #: The node's spans (``observe.tracing``; :data:`NO_TRACING` unless it traces).
    tracing: Tracing
    metrics_url: str | None
    #: The handle the block holds, bound to each lifecycle in turn.
    node: Node | None = None
    #: The lifecycle generation this process claimed last (``None``: none yet). A new
    #: claim with no greater one shows the store lost its data (:func:`_lifecycle`).
    last_generation: int | None = None
    #: The NodeRids of this process's lifecycles: a claim of one of them that still holds
    #: the NodeId is waited out, never taken for another process.
    own_rids: set[NodeRid] = attrs.Factory(set)
    #: An operator drained the node: the next lifecycle takes no new Spots either.
    drained: bool = False
    #: Detaches the node's metrics from the registry (once, when ``open_node`` ends).
    detach_metrics: Callable[[], None] | None = None


#: The first pause before trying again to rejoin the Mesh, and the longest (seconds).
_REJOIN_FIRST_PAUSE: Final = 0.05
_REJOIN_MAX_PAUSE: Final = 1.0


def _held_by_us(setup: _Setup, exc: InvalidConfiguration) -> bool:
    """Whether ``exc`` refused a claim because a lifecycle of this process still holds
    the NodeId (its lease has not run out in the store yet)."""
    refusal = exc.__cause__
    return (isinstance(refusal, NodeIdInUse)
            and refusal.holder.descriptor.node_rid in setup.own_rids)


async def _run_lifecycles(setup: _Setup, stop: Stopping, *,
                          task_status: trio.TaskStatus[Node] = trio.TASK_STATUS_IGNORED
                          ) -> None:
    """Run lifecycles of this node until the stop: the first one's startup errors
    propagate; after a lost lease a new one joins as soon as the store answers (or,
    with ``on_lease_lost="raise"``, NodeLost ends ``open_node``)."""
    try:
        lost = await _lifecycle(setup, stop, task_status.started)
        pause = _REJOIN_FIRST_PAUSE
        while lost is not None and not stop.requested.is_set():
            if setup.lifecycle.on_lease_lost == "raise":
                if lost.claim_vanished:
                    # The store may have lost its data: a process started again at once
                    # could serve beside a node still under a lease granted before.
                    with trio.move_on_after(setup.options.lease):
                        await stop.requested.wait()
                raise NodeLost(
                    f"node {setup.node_id!r} lost its lease ({lost.lease_loss}); its Spots "
                    "stopped without touching the store. open_node was told not to rejoin "
                    "(on_lease_lost='raise'): start the process again, and the new "
                    "lifecycle releases what this one left")
            try:
                try:
                    with trio.CancelScope() as attempt:
                        stop.starting = attempt  # a stop now cancels the attempt
                        lost = await _lifecycle(setup, stop, None)
                    if attempt.cancelled_caught:
                        return  # stopped while it was starting
                except BaseExceptionGroup as group:  # the lifecycle's nursery wraps it
                    single = single_error(group)
                    if not isinstance(single, ZLinkError):
                        raise
                    raise single from single.__cause__
                finally:
                    stop.starting = None
                pause = _REJOIN_FIRST_PAUSE
            except InvalidConfiguration as exc:
                if not _held_by_us(setup, exc):
                    raise NodeLost(
                        f"node {setup.node_id!r} lost its lease and cannot rejoin the Mesh: "
                        f"{exc.message}") from exc
                REJOIN.info("node %r: its last lifecycle's claim has not run out in the "
                            "store yet; rejoining in %.2f s", setup.node_id, pause)
            except ZLinkError as exc:  # the store does not answer yet, or too slowly
                REJOIN.info("node %r: rejoining the Mesh failed (%s); trying again in "
                            "%.2f s", setup.node_id, exc.message, pause)
            else:
                continue
            with trio.move_on_after(pause):
                await stop.requested.wait()
            pause = min(pause * 2, _REJOIN_MAX_PAUSE, setup.options.lease / 10)
    finally:
        stop.done.set()


async def _lifecycle(setup: _Setup, stop: Stopping, started: Callable[[Node], None] | None
                     ) -> NodeRuntime | None:
    """One lifecycle, from claim to leaving the Mesh: its runtime when it lost its lease,
    ``None`` when it stopped on request. ``started`` gets the handle once it serves (the
    first lifecycle); later ones bind the same handle.

    A claim whose lifecycle generation is not above the one this process claimed before
    shows that the store lost its data (the generation counts this NodeId's lifecycles
    in the store): the lifecycle then waits one lease before it scans and serves (see
    :func:`_start`).
    """
    node_id, mesh, options = setup.node_id, setup.mesh, setup.options
    random_bytes = setup.random.randbytes if setup.random is not None else None
    node_rid = NodeRid.generate(random_bytes) if random_bytes else NodeRid.generate()
    setup.own_rids.add(node_rid)
    state = NODE.initial
    async with open_mesh(setup.settings, node_id, node_rid, mesh,
                         random_bytes or os.urandom) as (links, transport):
        if transport is not None and options.endpoint == "local://":
            options = attrs.evolve(options, endpoint=transport.endpoint)
        entry = (new_entry_spot_id(node_id, random_bytes) if random_bytes
                 else new_entry_spot_id(node_id))
        descriptor = _descriptor(node_rid, node_id, mesh, entry, options, setup.registry,
                                 setup.client_only)
        # A later lifecycle uses the store as the last one did (a test may have wrapped it).
        store = setup.store if setup.node is None else setup.node._rt.store
        try:
            claim = await claim_node_id(store.location, descriptor,
                                        lease=options.lease, clock=setup.clock,
                                        wait_limit=options.default_timeout)
        except AlreadyExists as exc:
            step(NODE, state, NODE.ev.claim_conflict)
            raise InvalidConfiguration(
                f"startup configuration error: {exc.message}"
            ) from exc
        previous, setup.last_generation = setup.last_generation, claim.lifecycle_generation
        not_before = (trio.current_time() + options.lease
                      if previous is not None and claim.lifecycle_generation <= previous
                      else 0.0)
        rt = NodeRuntime(
            node_id=node_id, mesh=mesh, node_rid=node_rid, entry_spot_id=entry,
            options=options, registry=setup.registry, store=store,
            codec=MessageCodec(), route_cache=RouteCache(options.route_cache),
            clock=setup.clock, rng=setup.random,
            owner=OwnerFence(node_rid, claim.lifecycle_generation),
            lease_expires_at=claim.lease_expires_at,
            state=step(NODE, state, NODE.ev.new_claim))
        rt.on_lease_lost = setup.lifecycle.on_lease_lost
        if setup.recorder is not None:
            rt.metrics = setup.recorder
        rt.tracing = setup.tracing
        rt.peers = Peers(rt, inbound_handler(rt))
        # ``ctx.client`` of Spots the startup scan rebuilds; the handle's client (metered,
        # and the one the application holds) replaces it once the lifecycle serves.
        rt.client = SpotClient(CallRouter(rt))
        rt.actors = ActorManager(rt)
        rt.placement_closed = setup.client_only  # never chooses itself for a new Spot
        if setup.node is not None:
            setup.node.pass_test_hooks(rt)
        if transport is not None:
            links.attach(rt.peers, transport, LocalIdentity(
                node_id=node_id, node_rid=node_rid,
                lifecycle_generation=claim.lifecycle_generation, mesh=mesh,
                max_frame_bytes=DEFAULT_MAX_FRAME_BYTES))
        async with trio.open_nursery() as nursery:
            rt.catalog = Catalog(rt, nursery)
            await nursery.start(rt.catalog.serve)
            # From here on the Spots' group (shielded) must be cancelled on every way
            # out, a failed startup included: otherwise the nursery waits on it for
            # ever and ``open_node`` never returns.
            try:
                renewal = await _start(rt, nursery, not_before)
                if setup.drained:  # an operator's drain outlives a lost lease
                    await drain_here(rt, deadline_after(options.default_timeout))
                stop.starting = None  # it serves: a stop is a stop now, not a cancel
                if setup.node is None:
                    setup.node = Node(rt, setup.metrics_url)
                    setup.detach_metrics = start_metrics(
                        partial(sample_node, rt), setup.metrics_setup, setup.recorder)
                else:
                    setup.node.bind(rt)
                    if setup.recorder is not None:
                        setup.recorder.sample = partial(sample_node, rt)
                    REJOIN.warning("node %r rejoined the Mesh as a new lifecycle (%d) and "
                                   "serves again", node_id, claim.lifecycle_generation)
                try:
                    if started is not None:
                        started(setup.node)
                    await _until_stop_or_loss(rt, stop)
                finally:
                    with trio.CancelScope(shield=True):
                        try:
                            if stop.graceful:
                                await move_spots_away(rt, setup.lifecycle, stop)
                        finally:
                            setup.drained = rt.placement_closed and not setup.client_only
                            await _drain(rt, renewal)
            finally:
                rt.catalog.cancel_all()
                nursery.cancel_scope.cancel()
        return rt if rt.lease_lost else None


async def _until_stop_or_loss(rt: NodeRuntime, stop: Stopping) -> None:
    """Serve until the stop is requested or this lifecycle's lease loss is complete."""
    async with trio.open_nursery() as nursery:
        async def until(event: trio.Event) -> None:
            await event.wait()
            nursery.cancel_scope.cancel()

        nursery.start_soon(until, stop.requested)
        nursery.start_soon(until, rt.stopped)


async def _run_in(scope: trio.CancelScope, task: Callable[[NodeRuntime], Awaitable[None]],
                  rt: NodeRuntime) -> None:
    with scope:
        await task(rt)


async def _drain(rt: NodeRuntime, renewal: trio.CancelScope) -> None:
    """Close local Spots (NODE_SHUTDOWN), then remove the descriptor with the fence.

    With a lost lease (also one lost while draining) no store record is touched. When
    the Spots do not all close within ``default_timeout`` the descriptor stays, to
    expire (``abandon``): its records are then recovered as a crashed lifecycle's.
    """
    if NODE.allows(rt.state, NODE.ev.begin_drain):
        rt.state = step(NODE, rt.state, NODE.ev.begin_drain)
    if not rt.lease_lost:
        with trio.move_on_after(rt.options.default_timeout) as scope:
            await rt.catalog.shutdown()
        if scope.cancelled_caught and not rt.lease_lost:
            # Removing the descriptor now would unlink the records these Spots still own
            # from every NodeId-level recovery: leave the claim to expire instead, marked
            # so that no other node places new Spots on it meanwhile (bounded by one
            # renewal interval: the node is leaving).
            await close_placement(rt, deadline_after(rt.options.lease / 3))
            renewal.cancel()
            rt.state = step(NODE, rt.state, NODE.ev.abandon)
            LOGGER.error(
                "node %r: %d local Spots did not close (and %d creations did not end) within "
                "default_timeout (%s s); the node leaves without removing its descriptor, "
                "whose lease (%s s) then expires with the records they own: the next start "
                "of NodeId %r releases them (its startup scan), or an operator runs "
                "`zlink-trio release --store URL --node %s` once the lease is over; give a "
                "node with this many resident Spots a longer default_timeout", rt.node_id,
                len(rt.catalog.hosts), rt.catalog.pending, rt.options.default_timeout,
                rt.options.lease, rt.node_id, rt.node_id)
            return
    if rt.lease_lost:
        await wait_stopped(rt)
        return
    renewal.cancel()  # no renewal may race the removal (same continuation as the check)
    try:
        with trio.move_on_after(rt.options.default_timeout):
            await rt.store.location.remove(rt.mesh, rt.node_rid, rt.owner.lifecycle_generation)
    except ZLinkError as exc:
        LOGGER.error("node %r: descriptor removal failed: %s", rt.node_id, exc)
    rt.state = step(NODE, rt.state, NODE.ev.remove)
