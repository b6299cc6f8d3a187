"""``open_test_cluster``: n nodes in one process on one store, with a recorder and fault hooks.

Theory of operation
-------------------
``async with open_test_cluster(3, spots=[Counter]) as cluster:`` opens the store, then
three nodes (``node-0`` .. ``node-2``, or ``names=``) that share it and link to each
other over real loopback websocket links, each node in its own task of the cluster's
nursery, and yields a :class:`TestCluster`: ``cluster[0]`` / ``cluster["node-1"]`` is a
running :class:`zlink_trio.Node`, ``cluster.recorder`` a :class:`~.recorder.Recorder`
installed for the cluster's lifetime, ``cluster.faults`` its :class:`~.faults.Faults`,
``cluster.store`` the same store opened once more for the test to *read* (``find``,
``query``, ``statistics``).  Leaving the block stops every node (NODE_SHUTDOWN), closes
the store view and, for ``redis://`` and ``postgresql://``, deletes the cluster's data.

Stores.  ``"memory://"`` (the default) is a fresh named in-process store per cluster;
``"sqlite:///abs/path.db"`` a file (its directory must exist); ``"redis://host:port/db"``
gets a fresh ``?prefix=`` per cluster (unless the URL names one), whose keys are
deleted at exit, and ``"postgresql://user@host/db"`` likewise a fresh prefix -- a schema
of its own -- dropped at exit.  A :class:`~zlink_trio.store.MemoryStore` object is used as it is.

Clocks.  ``clock`` is the nodes' *store clock* (leases, route-cache ages); it defaults to
``trio.current_time``, so leases follow Trio's clock on every backend -- in one process
that is right, and it lets a test on ``trio.testing.MockClock`` move leases with the
clock.  When the run's clock is a ``MockClock`` with autojump and the store is shared
(SQLite, Redis), the cluster counts every store call in flight and suspends autojump
meanwhile (:mod:`.store_io`: a jump in the middle of a store round trip would land on
an arbitrary deadline), with a real-time watchdog that fails a store call hanging for
:data:`~.store_io.STORE_CALL_LIMIT` seconds.  Every wait of the cluster is bounded:
starting a node and stopping one by the nodes' ``default_timeout``.

Links.  ``links=True`` (default, or ``"tcp"``) listens on ``127.0.0.1:0``: real
websocket links over loopback TCP, as separate processes use, so such a cluster runs on
the real clock (or on a ``MockClock(rate=0)`` the test moves itself, settling in between
with :meth:`TestCluster.settle`): on an autojumping clock, a socket read would let mock
time race ahead.  ``links="memory"`` is the in-process link double: the same websocket
links, handshake and peer checks over memory streams (``zlink_trio.transport._memory``),
with no socket at all, so a linked cluster runs on
``MockClock(autojump_threshold=0)`` like a single node.  ``links=False`` opens the nodes
with ``listen=None``: no links, a node reaches only the Spots it owns.

:func:`open_test_node` is the one-node shorthand: ``zl.open_node`` with the store clock on
Trio's clock and no links unless asked.
"""

from __future__ import annotations

import math
import uuid
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import trio
import trio.testing

import zlink_trio as zl
from zlink_trio.runtime.options import DEFAULT_TIMEOUT
from zlink_trio.store import MemoryStore, open_store
from zlink_trio.testing.faults import Faults, SimulatedCrash
from zlink_trio.testing.recorder import Recorder
from zlink_trio.testing.store_io import InFlight, Patcher, settle
from zlink_trio.transport._memory import NETWORK, MemoryNetwork

if TYPE_CHECKING:
    import random as _random
    from collections.abc import AsyncIterator, Callable, Iterator, Sequence

    from zlink_trio.store import Store

__all__ = ("TestCluster", "open_test_cluster", "open_test_node")

#: Real seconds of quiet that count as settled when nodes talk over loopback links.
LINK_CUSHION: Final = 0.004


def open_test_node(node_id: str, *, store: str | MemoryStore = "memory://",
                   clock: Callable[[], float] | None = None,
                   random: _random.Random | None = None, **options: Any) -> Any:
    """``zl.open_node`` for a test: the store clock on Trio's clock (``clock``
    ``trio.current_time`` unless given) and no links (``listen=None`` unless given), so a
    test on ``MockClock(autojump_threshold=0)`` controls leases and never waits on a
    socket. ``clock`` and ``random`` become the node's ``zl.InjectedOptions``; every other
    keyword goes to ``zl.open_node``; ``on_stop`` is ``"close"`` unless given, so leaving
    the block closes the node's Spots instead of moving them to the test's other nodes
    (pass ``on_stop="drain"`` to test a stop that moves them). An ``async with`` context
    manager yielding the :class:`zlink_trio.Node`."""
    options.setdefault("listen", None)
    options.setdefault("on_stop", "close")
    return zl.open_node(node_id, store=store, injected=zl.InjectedOptions(
        clock=trio.current_time if clock is None else clock, random=random), **options)


class TestCluster:
    """Running test nodes on one store; built by :func:`open_test_cluster` only."""

    __test__ = False  # not a pytest test class

    def __init__(self, *, url: str | MemoryStore, view: Store, names: Sequence[str],
                 node_options: dict[str, Any], recorder: Recorder, faults: Faults,
                 in_flight: InFlight, nursery: trio.Nursery,
                 network: MemoryNetwork | None = None) -> None:
        #: The store every node uses (a URL, or the MemoryStore object).
        self.url: Final = url
        #: The same store, opened for the test to read.
        self.store: Final = view
        self.names: Final = tuple(names)
        self.recorder: Final = recorder
        self.faults: Final = faults
        #: Store calls in flight (counted on SQLite and Redis under a MockClock).
        self.in_flight: Final = in_flight
        self.nodes: dict[str, zl.Node] = {}
        self._options = node_options
        self._nursery = nursery
        #: The in-process network of ``links="memory"``, else None.
        self.network: Final = network
        self._scopes: dict[str, trio.CancelScope] = {}
        self._killed: set[str] = set()
        self._ended: dict[str, trio.Event] = {}
        faults.on_kill = self._on_kill

    def __getitem__(self, key: int | str) -> zl.Node:
        name = self.names[key] if isinstance(key, int) else key
        node = self.nodes.get(name)
        if node is None:
            raise KeyError(f"node {name!r} is not running (running: {sorted(self.nodes)})")
        return node

    def __iter__(self) -> Iterator[zl.Node]:
        return iter([self.nodes[n] for n in self.names if n in self.nodes])

    def __len__(self) -> int:
        return len(self.nodes)

    async def settle(self, *, cushion: float | None = None) -> None:
        """Return once nothing runs: no runnable task for ``cushion`` real seconds (default:
        a few ms when the nodes have links, else 0) and no store call in flight."""
        if cushion is None:
            sockets = self._options.get("listen") is not None and self.network is None
            cushion = LINK_CUSHION if sockets else 0.0
        await settle(self.in_flight, cushion=cushion)

    # ------------------------------------------------------------------ lifetimes

    async def start(self, name: str) -> zl.Node:
        """Start node ``name`` (again: a restart under the same NodeId waits for the
        previous lifecycle's lease, then recovers what it left)."""
        if name in self.nodes:
            raise RuntimeError(f"node {name!r} is already running; stop or kill it first")
        node: zl.Node = await self._nursery.start(self._run_node, name)
        return node

    async def stop(self, name: str) -> None:
        """Stop node ``name`` gracefully (its Spots close with NODE_SHUTDOWN)."""
        self[name]
        self._scopes[name].cancel()
        await self.wait_down(name)

    async def kill(self, name: str) -> None:
        """Kill node ``name`` (``faults.kill``) and wait until its task ended."""
        await self.faults.kill(name)
        await self.wait_down(name)

    async def wait_down(self, name: str) -> None:
        """Wait until node ``name``'s task ended (a kill, a crash step, a stop), bounded by
        three times the nodes' ``default_timeout``; ``TimeoutError`` if it did not."""
        ended = self._ended.get(name)
        if ended is None:
            raise KeyError(f"node {name!r} was never started in this cluster")
        # a drain is several steps, each bounded by default_timeout
        with trio.fail_after(3 * self._options.get("default_timeout", DEFAULT_TIMEOUT)):
            await ended.wait()

    async def restart(self, name: str) -> zl.Node:
        """:meth:`kill` the node if it runs, then :meth:`start` it again."""
        if name in self.nodes:
            await self.kill(name)
        return await self.start(name)

    def _on_kill(self, name: str) -> None:
        node = self.nodes.get(name)
        if node is None:
            return
        self._killed.add(name)
        if node.inspection.lose_lease("the test killed this node (zlink_trio.testing)"):
            self._nursery.start_soon(self._finish_kill, name, node)
        else:
            self._scopes[name].cancel()

    async def _finish_kill(self, name: str, node: zl.Node) -> None:
        await node.inspection.wait_lease_lost()
        scope = self._scopes.get(name)
        if scope is not None:
            scope.cancel()

    async def _run_node(self, name: str, *,
                        task_status: trio.TaskStatus[zl.Node] = trio.TASK_STATUS_IGNORED
                        ) -> None:
        ended = self._ended[name] = trio.Event()
        self._killed.discard(name)
        if self.network is not None:
            NETWORK.set(self.network)  # this task's context: its transport listens there
        started = False
        try:
            with trio.CancelScope() as scope:
                self._scopes[name] = scope
                async with zl.open_node(name, store=self.url,
                                        **{"on_stop": "close", **self._options}) as node:
                    self.faults.attach(node)
                    self.nodes[name] = node
                    started = True
                    task_status.started(node)
                    await trio.sleep_forever()
        except (Exception, BaseExceptionGroup) as exc:
            if name not in self._killed or not started:
                raise
            if not _only_crash(exc):
                self.recorder.logs.append(f"killed node {name!r} ended with {exc!r}")
        finally:
            node_now = self.nodes.pop(name, None)
            if node_now is not None:
                self.faults.detach(node_now)
            ended.set()


def _only_crash(exc: BaseException) -> bool:
    if isinstance(exc, BaseExceptionGroup):
        return all(_only_crash(e) for e in exc.exceptions)
    return isinstance(exc, SimulatedCrash | zl.Unavailable)


def _mock_clock() -> trio.testing.MockClock | None:
    clock = trio.lowlevel.current_clock()
    return clock if isinstance(clock, trio.testing.MockClock) else None


def _prefixed_url(url: str, prefix: str) -> tuple[str, str | None]:
    """``url`` with ``?prefix=prefix`` unless it names one; and that prefix (or ``None``)."""
    if "prefix=" in url:
        return url, None
    return url + ("&" if "?" in url else "?") + f"prefix={prefix}", prefix


async def _drop_postgres_prefix(url: str, prefix: str, in_flight: InFlight) -> None:
    import psycopg

    from zlink_trio.store.postgres.schema import parse_url

    conninfo = parse_url(url).conninfo

    def drop() -> None:
        with psycopg.connect(conninfo, autocommit=True, connect_timeout=10) as connection:
            connection.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')

    with in_flight.io(f"dropping the schema {prefix!r}", scoped=False), \
            trio.move_on_after(10), trio.CancelScope(shield=True):
        await trio.to_thread.run_sync(drop)


async def _delete_redis_prefix(url: str, prefix: str, in_flight: InFlight) -> None:
    from zlink_trio.store.redis.admin import delete_matching, open_connection

    with in_flight.io(f"deleting the keys of {prefix!r}", scoped=False), \
            trio.move_on_after(10), trio.CancelScope(shield=True):
        async with open_connection(url) as connection:
            await delete_matching(connection.call, f"{prefix}:*", per_command=500)


@asynccontextmanager
async def open_test_cluster(
    n: int = 3,
    *,
    store: str | MemoryStore = "memory://",
    clock: Callable[[], float] | None = None,
    random: _random.Random | None = None,
    spots: Sequence[object] = (),
    names: Sequence[str] | None = None,
    links: bool | str = True,
    **options: Any,
) -> AsyncIterator[TestCluster]:
    """Run ``n`` nodes serving ``spots`` on one ``store`` for the ``async with`` block.

    ``clock`` is the store clock (default ``trio.current_time``) and ``random`` the
    nodes' random source (``zl.InjectedOptions``; one ``random.Random`` for them all,
    default ``os.urandom``); ``names`` the NodeIds
    (default ``node-0`` ..); ``links`` is ``True`` (``"tcp"``: loopback websocket links),
    ``"memory"`` (the same links over in-process memory streams) or ``False`` (none).
    Every other
    keyword goes to each ``zl.open_node`` (``instance_idle_timeout``,
    ``default_timeout``, ``lease``, ``secret``, ...). See the module doc.

    Raises ``ValueError`` for ``n < 1`` or a ``names`` of another length, and whatever
    ``zl.open_node`` raises when a node cannot start.
    """
    names = [f"node-{i}" for i in range(n)] if names is None else list(names)
    if n < 1 or len(names) != n or len(set(names)) != n:
        raise ValueError(f"open_test_cluster: need n >= 1 distinct names, got n={n}, "
                         f"names={names}")
    if links not in (True, False, "tcp", "memory"):
        raise ValueError(f"open_test_cluster: links must be True, 'tcp', 'memory' or False, "
                         f"got {links!r}")
    node_options = dict(options, spots=list(spots), injected=zl.InjectedOptions(
        clock=trio.current_time if clock is None else clock, random=random))
    node_options.setdefault("listen", "127.0.0.1:0" if links else None)
    network = MemoryNetwork() if links == "memory" else None
    url: str | MemoryStore = store
    prefix: str | None = None
    if isinstance(store, str) and store.rstrip("/") == "memory:":
        url = f"memory://zl-test-{uuid.uuid4().hex}"
    elif isinstance(store, str) and store.startswith("redis://"):
        url, prefix = _prefixed_url(store, f"zltest-{uuid.uuid4().hex[:12]}")
    elif isinstance(store, str) and store.startswith(("postgresql://", "postgres://")):
        url, prefix = _prefixed_url(store, f"zltest_{uuid.uuid4().hex[:12]}")
    mock = _mock_clock()
    shared = isinstance(url, str) and not url.startswith("memory:")
    in_flight = InFlight(mock if mock is not None and mock.autojump_threshold < math.inf
                         else None)
    patcher = Patcher()
    recorder = Recorder()
    faults = Faults()
    async with AsyncExitStack() as stack:
        if shared:
            in_flight.start()
            stack.callback(in_flight.check)
            stack.callback(in_flight.stop)
            stack.callback(patcher.undo)
            in_flight.patch_open_store(patcher)
        if prefix is not None:
            assert isinstance(url, str)
            stack.push_async_callback(
                _delete_redis_prefix if url.startswith("redis://") else _drop_postgres_prefix,
                url, prefix, in_flight)
        opener = in_flight.open_store(open_store) if shared else open_store
        view = await stack.enter_async_context(opener(url))
        if shared:
            in_flight.patch_backend(patcher, view)
        stack.enter_context(recorder)
        stack.callback(faults.close)
        nursery = await stack.enter_async_context(trio.open_nursery())
        cluster = TestCluster(url=url, view=view, names=names, node_options=node_options,
                              recorder=recorder, faults=faults, in_flight=in_flight,
                              nursery=nursery, network=network)
        try:
            for name in names:
                await cluster.start(name)
            yield cluster
        finally:
            for name in list(cluster.nodes):
                cluster._scopes[name].cancel()
