"""Differential model: memory (the oracle), SQLite and Redis stores must agree on everything.

One Hypothesis ``RuleBasedStateMachine`` applies the *same* operation to five
stores (three without Redis) -- ``memory://``, SQLite with ``dispatch=inline`` and with
``dispatch=thread`` (a fresh file in a fresh temporary directory per example),
Redis and Redis Cluster (a fresh key prefix per example, every key deleted
afterwards; the cluster with its default 1024 buckets; only when ``ZLINK_TEST_REDIS``
or ``CI`` is set, see below) -- and asserts after every rule
that each backend returned what the memory store returned: the same value (records and
claims compared through ``to_json()``,
receipts, fences, sequences and statistics as attrs values; query pages by
their records and whether a next cursor exists, each backend walking its own
cursor) or the same typed error class (and the same ``.current`` record for
:class:`AuthorityExists`, the same record and member count for :class:`MembersRemain`).
ObjectGenerations are the oracle's own numbers on every backend with one store-wide
sequence; the cluster's are its own (per bucket), so the
model pairs them with the oracle's as they are issued and holds the cluster to what
spec 06 promises -- strictly increasing per Spot ID, unique store-wide, never reused
-- and to ``last_object_generation`` being the largest it issued (:class:`Generations`).
The rules cover the whole store protocol:

- claims: ``new_claim`` / ``renew`` / ``close_placement`` / ``open_placement`` /
  ``remove`` / ``descriptors`` / ``dead_claims`` for two NodeIds, with fresh or reused
  NodeRids and Entry Spot IDs, so a NodeId gets second lifecycles, expired claims get
  replaced and a drained claim's mark meets renewals, undrains, replacements and removal;
- authority: ``reserve`` (User / Instance, mismatched types, Entry-form IDs,
  another mesh, with and without creation intent and recovery pointer),
  ``commit_ready`` and ``abort_creating`` with current and stale fences from
  a Bundle, ``begin_close`` (with expected owner generation / StoreVersion),
  ``release``, ``remove_recovery_pointer`` (right and wrong versions) and
  begin / seal / accept relay-ready / commit / abort relocation (whole moves
  stopping at each step, an abort after relay-ready included, and single steps
  with current and stale fences and the named or another target), the payload
  receipt of a Sealed move and the release of a RelayReady one (refused while its
  target lives), all with current and stale fences;
- Actor membership (docs/actors.md): ``reserve`` of an Actor into a container -- mostly
  an existing User or Entry Spot by its owner, sometimes another owner's, an Instance
  Spot, a missing Spot or an Actor, under an Actor's own ID or a Spot's --
  ``move_membership`` (Join and Leave, with current and stale generations and owners),
  ``members``, ``begin_close`` of a container that has members (``MembersRemain``), and
  an Actor's close and release (so containers empty and Actor IDs get new incarnations);
- Actor moves between nodes: ``begin_relocation`` of an Actor into a container at its
  target -- mostly one the target owns (its Entry Spot, or a User Spot the Actor joins by
  the move), sometimes none, the source's or any Spot -- and of a Spot naming one or
  having members (all refused), whole Actor moves stopping at each step (seal, accept
  relay-ready, commit, abort early or late), the close of the container an arriving
  Actor names (``MembersRemain``), and single relocation steps on Actors, release past
  relay-ready included;
- ``query`` pages of size 0..5 walked step by step (0 is refused), forged cursors;
- the Relocation Store: ``put_root`` / ``get_root`` / ``delete_root`` (with
  forged receipts) and ``inbox_append`` / ``inbox_read`` / ``inbox_set_cursor``
  / ``inbox_cursor`` / ``inbox_drop``, bad arguments included;
- advancing ``now``, so leases expire.

Invariants after every rule: all backends agree on both ``statistics()`` and
on ``find`` for every Spot and Actor ID used (Entry IDs included), on the ``members``
of each, and on a full query;
each Spot ID and each ObjectGeneration has at most one authority record; an
ObjectGeneration never changes while a User/Instance record exists and
strictly increases when the ID is re-created (an Entry ID may be re-issued
inside one NewClaim, so there it may only grow); the last issued
ObjectGeneration never decreases.

Mechanics: stores are async and rules are sync, so each example runs one
``trio.run`` in a background thread that opens the five stores and serves
calls (``trio.from_thread.run`` with its token, each call under
``trio.fail_after``) until teardown closes them. Everything is deterministic:
NodeRids and Entry Spot IDs come from counters, ``now`` is an argument.
Redis is ``ZLINK_TEST_REDIS``, Redis Cluster ``ZLINK_TEST_REDIS_CLUSTER`` (or one
``redis_helpers`` starts); both join the model when ``ZLINK_TEST_REDIS`` or ``CI`` is
set (``.ci/run`` sets both), and then when either is absent the module fails under
``CI`` and is skipped otherwise (``redis_helpers.unreachable`` /
``cluster_unreachable``). PostgreSQL (``ZLINK_TEST_POSTGRES``, ``postgres_helpers``)
joins when ``ZLINK_TEST_POSTGRES`` or ``CI`` is set, on the same terms. Without them the
model holds SQLite to memory alone.
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)
from postgres_helpers import postgres_test_store
from redis_helpers import cluster_test_store, redis_test_store
from store_helpers import MESH, descriptor, one_sequence

from zlink_trio.core.descriptor import NodeClaim
from zlink_trio.core.errors import ZLinkError
from zlink_trio.core.identity import NodeRid, SpotKind, new_entry_spot_id
from zlink_trio.core.records import (
    AuthorityFence,
    AuthorityRecord,
    AuthorityState,
    CreationIntent,
    RecoveryPointer,
    ReservationFence,
    RootReceipt,
)
from zlink_trio.store import (
    AuthorityExists,
    LocationStatistics,
    MembersRemain,
    Page,
    open_store,
)
from zlink_trio.store.redis_cluster.keys import ClusterKeys
from zlink_trio.store.rules.location import capacity_key
from zlink_trio.store.rules.relocation_store import receipt_of
from zlink_trio.store.values import SavedState

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from zlink_trio.core.records import OwnerFence
    from zlink_trio.store import Store

CALL_TIMEOUT = 10.0
#: Whether Redis and Redis Cluster join the model (memory and SQLite always do).
WITH_REDIS = bool(os.environ.get("ZLINK_TEST_REDIS") or os.environ.get("CI"))
#: Whether PostgreSQL joins the model (``ZLINK_TEST_POSTGRES`` or ``CI`` set).
WITH_POSTGRES = bool(os.environ.get("ZLINK_TEST_POSTGRES") or os.environ.get("CI"))
#: The cluster's URL options: its default bucket count, so generations are its own.
CLUSTER_OPTIONS: dict[str, object] = {}
NODES = ("n1", "n2")
SPOTS = ("a", "b", "c")
SERVED = (("room", SpotKind.USER), ("counter", SpotKind.INSTANCE))
TYPES = (*SERVED, *SERVED, *SERVED,
         ("room", SpotKind.INSTANCE), ("room", SpotKind.ENTRY), ("unserved", SpotKind.USER),
         ("player", SpotKind.ACTOR))  # an Actor without a container: refused
#: Actor IDs; an Actor may also be asked for under a Spot's ID (one namespace).
ACTORS = ("p", "q")
ACTOR_IDS = (*ACTORS, *ACTORS, "a")
MESHES = (MESH, MESH, MESH, "elsewhere")
POINTER = RecoveryPointer(root_ref="sha256:pointer", sha256="ee" * 32, size=7)
INTENT = CreationIntent(content_ref="sha256:intent", sha256="dd" * 32, size=3)
ROOTS = (b"", b"root-1", b"root-2", b"x" * 300)
INBOX_SPOTS = ("a", "b")
INBOX_GENERATIONS = (1, 1, 2, 0)  # 0 is not a generation: refused
#: How a fence is bent before use: unchanged, or one field off.
TWEAKS = ("same", "same", "same", "store_version", "owner_generation", "object_generation")
index = st.integers(0, 7)


def _same(generation: int) -> int:
    return generation


#: A creation root's ref on Redis Cluster: the content ref and the Spot's bucket.
_ROOT_BESIDE = re.compile(r"(sha256:[0-9a-f]{64})@b[0-9]+")


def _content_refs(value: object) -> object:
    """``value`` with every root ref named by its content ref alone (Redis Cluster keeps a
    creation root in its Spot's bucket and names that bucket in the ref: the same root)."""
    if isinstance(value, str):
        return _ROOT_BESIDE.sub(r"\1", value)
    if isinstance(value, dict):
        return {k: _content_refs(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_content_refs(v) for v in value)
    return value


def root_in(store: Store, spot_id: str, receipt: RootReceipt) -> RootReceipt:
    """The receipt ``store`` keeps the creation root ``receipt`` of ``spot_id`` under (the
    oracle's is the content receipt; Redis Cluster's names the Spot's bucket)."""
    keys = getattr(store, "keys", None)
    if isinstance(keys, ClusterKeys):
        return attrs.evolve(receipt, ref=keys.root_ref_beside(receipt.ref, spot_id))
    return receipt


def norm(value: object, oracle: Callable[[int], int] | None = None) -> object:
    """A comparable form of a store result or error, root refs named by content
    (:func:`_content_refs`).

    With ``oracle``, each ObjectGeneration in ``value`` is named the way the oracle
    names it (:class:`Generations`) and ``last_object_generation`` is left out (checked
    on its own, :meth:`StoreAgreement.contents_agree`).
    """
    return _content_refs(_norm(value, oracle))


def _norm(value: object, oracle: Callable[[int], int] | None = None) -> object:
    if isinstance(value, ZLinkError):
        current = (_norm(value.current, oracle) if isinstance(value, AuthorityExists)
                   else (_norm(value.record, oracle), value.members)
                   if isinstance(value, MembersRemain) else None)
        return ("raised", type(value).__module__, type(value).__qualname__, current)
    if oracle is not None and isinstance(value, AuthorityRecord | ReservationFence
                                         | AuthorityFence | SavedState):
        value = attrs.evolve(value, object_generation=oracle(value.object_generation))
    if isinstance(value, AuthorityRecord | NodeClaim):
        return (type(value).__name__, value.to_json())
    if isinstance(value, Page):
        return ("Page", [_norm(r, oracle) for r in value.records], value.next_cursor is None)
    if isinstance(value, list | tuple):
        return [_norm(v, oracle) for v in value]
    if isinstance(value, LocationStatistics) and oracle is not None:
        value = attrs.evolve(value, last_object_generation=0)
    if attrs.has(type(value)):
        return (type(value).__name__, attrs.asdict(value, recurse=True))  # type: ignore[arg-type]
    return value


def generations_in(value: object) -> list[tuple[str, int]]:
    """The ``(spot_id, ObjectGeneration)`` pairs of a store result, in :func:`norm`'s order."""
    if isinstance(value, AuthorityExists):
        return generations_in(value.current)
    if isinstance(value, MembersRemain):
        return generations_in(value.record)
    if isinstance(value, AuthorityRecord | ReservationFence | AuthorityFence | SavedState):
        return [(value.spot_id, value.object_generation)]
    if isinstance(value, Page):
        return generations_in(value.records)
    if isinstance(value, list | tuple):
        return [pair for v in value for pair in generations_in(v)]
    return []


#: What an ObjectGeneration the oracle has not issued stands for on a backend with its own
#: numbers: a value far above any a test reaches, so no record there ever holds it.
UNISSUED = 2**62


class Generations:
    """How one backend's ObjectGenerations stand for the oracle's.

    Spec 06 and docs/decisions.md promise only that ObjectGenerations are strictly
    increasing per Spot ID, unique store-wide and never reused. A backend with one
    store-wide sequence (memory, SQLite, Redis, Redis Cluster with one bucket) promises
    the oracle's very numbers, and is held to them (``exact``). Redis Cluster with many
    buckets issues its own (per bucket), so the model learns a one-to-one map as
    generations appear -- each pair where the oracle's result has a generation and the
    backend's the same place -- and holds the backend to it: a generation stands for one
    oracle generation only (unique, never reused), and a Spot ID's next one is larger
    than its last (strictly increasing per ID). Generations the model sends (fences,
    ``object_generation=``, inbox keys) are mapped the other way.
    """

    def __init__(self, name: str, *, exact: bool) -> None:
        self.name = name
        self.exact = exact
        self.here: dict[int, int] = {}  # oracle -> backend
        self.there: dict[int, int] = {}  # backend -> oracle
        self.latest: dict[str, int] = {}  # Spot ID -> its last backend generation

    def learn(self, label: str, oracle: object, mine: object) -> None:
        """Pair the generations of one result with the oracle's (same shape only)."""
        theirs, ours = generations_in(oracle), generations_in(mine)
        if len(theirs) != len(ours):
            return  # the results disagree anyway (norm)
        for (spot_id, x), (_, y) in zip(theirs, ours, strict=True):
            if self.exact:
                assert y == x, (f"{label}: {self.name} issued ObjectGeneration {y} for "
                                f"{spot_id!r}, memory {x} (one store-wide sequence)")
            elif x in self.here:
                assert self.here[x] == y, (f"{label}: {self.name} has {y} for {spot_id!r} "
                                           f"where it had {self.here[x]}")
            else:
                assert y not in self.there, (
                    f"{label}: {self.name} issued ObjectGeneration {y} twice "
                    f"(memory {self.there[y]} and {x})")
                last = self.latest.get(spot_id, 0)
                assert y > last, (f"{label}: {self.name} issued {y} for {spot_id!r} after "
                                  f"{last} (must strictly increase per Spot ID)")
                self.here[x], self.there[y], self.latest[spot_id] = y, x, y

    def to_oracle(self, generation: int) -> int:
        return generation if self.exact else self.there.get(generation, generation)

    def send(self, value: Any) -> Any:
        """``value`` (a generation, or a fence) in this backend's numbers."""
        if isinstance(value, ReservationFence | AuthorityFence):
            return attrs.evolve(value, object_generation=self.send(value.object_generation))
        if self.exact or value < 1:
            return value
        return self.here.get(value, UNISSUED + value)


def tweak(fence: Any, how: str) -> Any:
    """``fence`` unchanged or with one counter moved (a stale or foreign fence)."""
    if how == "same" or not hasattr(fence, how):
        return fence
    value = getattr(fence, how)
    return attrs.evolve(fence, **{how: value + 1 if value == 1 else value - 1})


class Host:
    """One Trio run in a background thread that owns the stores of one example."""

    def __init__(self, directory: str, *, cluster: bool = True) -> None:
        self.directory = directory
        self.cluster = cluster
        self.stores: dict[str, Store] = {}
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="store-agreement", daemon=True)
        self._thread.start()
        self._ready.wait()
        if self._error is not None:
            self._thread.join()
            raise self._error

    def _main(self) -> None:
        try:
            trio.run(self._serve)
        except BaseException as error:  # handed to the test thread
            self._error = error
        finally:
            self._ready.set()

    async def _serve(self) -> None:
        async with AsyncExitStack() as stack:
            # The stores own tasks, so no cancel scope may span their opening; each bounds it.
            self.stores["memory"] = await stack.enter_async_context(open_store("memory://"))
            for dispatch in ("inline", "thread"):
                url = (f"sqlite://{self.directory}/{dispatch}.db"
                       f"?busy_timeout=1&dispatch={dispatch}")
                self.stores[f"sqlite-{dispatch}"] = await stack.enter_async_context(
                    open_store(url))
            if WITH_REDIS:
                self.stores["redis"] = await stack.enter_async_context(redis_test_store())
            if WITH_REDIS and self.cluster:
                self.stores["redis-cluster"] = await stack.enter_async_context(
                    cluster_test_store(**CLUSTER_OPTIONS))
            if WITH_POSTGRES:
                self.stores["postgresql"] = await stack.enter_async_context(
                    postgres_test_store())
            self._token = trio.lowlevel.current_trio_token()
            self._stop = trio.Event()
            self._ready.set()
            await self._stop.wait()

    async def _each(self, op: Callable[[Store], Awaitable[object]]) -> dict[str, object]:
        outcomes: dict[str, object] = {}
        for name, store in self.stores.items():
            try:
                with trio.fail_after(CALL_TIMEOUT):
                    outcomes[name] = await op(store)
            except ZLinkError as error:
                outcomes[name] = error
            except Exception as error:
                error.add_note(f"raised by the {name} store")
                raise
        return outcomes

    def each(self, op: Callable[[Store], Awaitable[object]]) -> dict[str, object]:
        """Run ``op`` on every store in turn; the value or ZLinkError of each."""
        return trio.from_thread.run(self._each, op, trio_token=self._token)

    def close(self) -> None:
        if self._stop is not None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join()
        if self._error is not None:
            raise self._error


class StoreAgreement(RuleBasedStateMachine):
    fences = Bundle("fences")
    receipts = Bundle("receipts")
    #: Whether Redis Cluster takes part (when ``ZLINK_TEST_REDIS`` names Redis).
    with_cluster = True

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.TemporaryDirectory(prefix="zl-agree-")
        try:
            self.host = Host(self.tmp.name, cluster=self.with_cluster)
        except BaseException:
            self.tmp.cleanup()
            raise
        self.oracle = self.host.stores["memory"]
        self.gens = {id(store): Generations(name, exact=one_sequence(store))
                     for name, store in self.host.stores.items()}
        self.now = 0.0
        self.serial = 0
        self.claims: list[NodeClaim] = []
        self.entries: list[str] = []
        self.cursors: dict[str, str | None] | None = None
        self.last_gen: dict[str, int] = {}
        self.absent: set[str] = set()
        self.last_issued = 0

    def teardown(self) -> None:
        try:
            self.host.close()
        finally:
            self.tmp.cleanup()

    # -- helpers -------------------------------------------------------------------------------

    def agree(self, label: str, op: Callable[[Store], Awaitable[object]]) -> dict[str, object]:
        """Run ``op`` everywhere, assert every backend matches the oracle; all outcomes."""
        outcomes = self.host.each(op)
        exact, renamed = norm(outcomes["memory"]), norm(outcomes["memory"], _same)
        for name, outcome in outcomes.items():
            gens = self.gens[id(self.host.stores[name])]
            gens.learn(label, outcomes["memory"], outcome)
            if gens.exact:
                mine, expected = norm(outcome), exact
            else:
                mine, expected = norm(outcome, gens.to_oracle), renamed
            assert mine == expected, (
                f"{label}: {name} disagrees with memory\n  memory: {outcomes['memory']!r}\n"
                f"  {name}: {outcome!r}"
            )
        oracle = outcomes["memory"]
        event(f"{label}: {type(oracle).__name__ if isinstance(oracle, ZLinkError) else 'ok'}")
        return outcomes

    def run(self, label: str, op: Callable[[Store], Awaitable[object]]) -> Any:
        """Like :meth:`agree`; the oracle's value, or ``None`` when it raised."""
        oracle = self.agree(label, op)["memory"]
        return None if isinstance(oracle, ZLinkError) else oracle

    def at(self, store: Store, value: Any) -> Any:
        """``value`` (an ObjectGeneration or a fence of the oracle's) in ``store``'s numbers."""
        return self.gens[id(store)].send(value)

    def record(self, spot: str) -> AuthorityRecord | None:
        # The oracle's state, which the invariants just proved every backend agrees with.
        return self.oracle.location.state.records.get(spot)  # type: ignore[attr-defined]

    def spot_of(self, i: int) -> str:
        ids = [*SPOTS, *SPOTS, *self.entries[-2:]]
        return ids[i % len(ids)]

    def container_of(self, j: int, owner: OwnerFence | None = None) -> str:
        """A container to name. With ``owner``: a Ready Entry or User Spot it owns, when
        there is one (the Actor joins). Otherwise any Spot, Entry Spot or Actor used --
        another owner's, an Instance Spot, a missing one or an Actor are refused."""
        if owner is not None:
            joinable = sorted(
                r.spot_id for r in map(self.record, {*SPOTS, *self.entries})
                if r is not None and r.owner == owner and r.state is AuthorityState.READY
                and r.kind in (SpotKind.ENTRY, SpotKind.USER))
            if joinable:
                return joinable[j % len(joinable)]
        ids = [*SPOTS, *self.entries[-2:], *ACTORS]
        return ids[j % len(ids)]

    def pick_claim(self, i: int) -> NodeClaim:
        """Mostly a current claim (the oracle still holds it), sometimes any old one."""
        claims = self.oracle.location.state.claims  # type: ignore[attr-defined]
        current = [c for c in self.claims if getattr(claims.get(c.key), "lifecycle_generation",
                                                     None) == c.lifecycle_generation]
        if i < 5 and current:
            return current[i % len(current)]
        return self.claims[i % len(self.claims)]

    def next_serial(self) -> int:
        self.serial += 1
        return self.serial

    # -- claims --------------------------------------------------------------------------------

    def _claim(self, node: str, *, capacity: int, lease: float, node_rid: NodeRid | None = None,
               entry: str | None = None) -> NodeClaim | None:
        rid = node_rid or NodeRid(self.next_serial().to_bytes(16, "big"))
        serial = self.next_serial()
        entry = entry or new_entry_spot_id(node, lambda n: serial.to_bytes(n, "big"))
        desc = descriptor(node, node_rid=rid, entry=entry, capacity=capacity)
        now = self.now
        claim = self.run("new_claim",
                         lambda s: s.location.new_claim(desc, now=now, lease=lease))
        if claim is not None:
            earlier = [c.lifecycle_generation for c in self.claims if c.descriptor.node_id == node]
            assert all(claim.lifecycle_generation > g for g in earlier)
            self.claims.append(claim)
            self.entries.append(entry)
            # The Entry record's ObjectGeneration is issued here: pair it at once.
            self.run("find entry", lambda s: s.location.find(entry))
        return claim

    @initialize(capacity=st.integers(1, 3))
    def two_nodes(self, capacity):
        for node in NODES:
            self._claim(node, capacity=capacity, lease=100.0)

    @rule(node=st.sampled_from(NODES), lease=st.floats(1, 60), capacity=st.integers(0, 3),
          reuse_rid=st.booleans(), reuse_entry=st.booleans())
    def new_claim(self, node, lease, capacity, reuse_rid, reuse_entry):
        """A NodeId's next lifecycle; reusing its NodeRid or Entry ID meets AlreadyExists."""
        mine = [c for c in self.claims if c.descriptor.node_id == node]
        latest = mine[-1] if mine else None
        self._claim(node, capacity=capacity, lease=lease,
                    node_rid=latest.descriptor.node_rid if reuse_rid and latest else None,
                    entry=latest.descriptor.entry_spot_id if reuse_entry and latest else None)

    @precondition(lambda self: self.claims)
    @rule(i=index, lease=st.floats(0.5, 30), bad=st.booleans())
    def renew(self, i, lease, bad):
        c = self.pick_claim(i)
        lease = -1.0 if bad and lease < 1 else lease
        now = self.now
        self.run("renew", lambda s: s.location.renew(
            MESH, c.descriptor.node_rid, c.lifecycle_generation, now=now, lease=lease))

    @precondition(lambda self: self.claims)
    @rule(i=index)
    def remove(self, i):
        c = self.pick_claim(i)
        self.run("remove", lambda s: s.location.remove(MESH, c.descriptor.node_rid,
                                                       c.lifecycle_generation))

    @precondition(lambda self: self.claims)
    @rule(i=index, mesh=st.sampled_from((MESH, MESH, "elsewhere")))
    def close_placement(self, i, mesh):
        c = self.pick_claim(i)
        self.run("close_placement", lambda s: s.location.close_placement(
            mesh, c.descriptor.node_rid, c.lifecycle_generation))

    @precondition(lambda self: self.claims)
    @rule(i=index, mesh=st.sampled_from((MESH, MESH, "elsewhere")))
    def open_placement(self, i, mesh):
        c = self.pick_claim(i)
        self.run("open_placement", lambda s: s.location.open_placement(
            mesh, c.descriptor.node_rid, c.lifecycle_generation))

    @rule(mesh=st.sampled_from((MESH, None, "elsewhere")))
    def descriptors(self, mesh):
        now = self.now
        self.run("descriptors", lambda s: s.location.descriptors(mesh, now=now))

    @rule(mesh=st.sampled_from((MESH, None, "elsewhere")))
    def dead_claims(self, mesh):
        now = self.now
        self.run("dead_claims", lambda s: s.location.dead_claims(mesh, now=now))

    @rule(dt=st.floats(0, 5))
    def advance(self, dt):
        self.now += dt

    # -- creation ------------------------------------------------------------------------------

    @precondition(lambda self: self.claims)
    @rule(target=fences, i=index, spot=index, t=st.sampled_from(TYPES),
          mesh=st.sampled_from(MESHES), intent=st.booleans(), pointer=st.booleans())
    def reserve(self, i, spot, t, mesh, intent, pointer):
        owner = self.pick_claim(i).owner()
        spot_id, now = self.spot_of(spot), self.now
        fence = self.run("reserve", lambda s: s.location.reserve(
            spot_id, kind=t[1], stable_type=t[0], mesh=mesh, owner=owner, now=now,
            creation_intent=INTENT if intent else None,
            recovery_pointer=POINTER if pointer else None))
        return multiple() if fence is None else fence

    @precondition(lambda self: self.claims)
    @rule(target=fences, i=index, spot=st.sampled_from(SPOTS), t=st.sampled_from(SERVED))
    def create_ready(self, i, spot, t):
        """Reserve then CommitReady at once, so Ready (and movable) records are common."""
        owner, now = self.pick_claim(i).owner(), self.now
        fence = self.run("reserve", lambda s: s.location.reserve(
            spot, kind=t[1], stable_type=t[0], mesh=MESH, owner=owner, now=now))
        if fence is None:
            return multiple()
        self.run("commit_ready", lambda s: s.location.commit_ready(self.at(s, fence), now=now))
        return fence

    @rule(fence=fences, how=st.sampled_from(TWEAKS))
    def commit_ready(self, fence: ReservationFence, how):
        bent, now = tweak(fence, how), self.now
        self.run("commit_ready", lambda s: s.location.commit_ready(self.at(s, bent), now=now))

    @rule(fence=fences, how=st.sampled_from(TWEAKS))
    def abort_creating(self, fence: ReservationFence, how):
        bent = tweak(fence, how)
        self.run("abort_creating", lambda s: s.location.abort_creating(self.at(s, bent)))

    # -- combined transactions (store.combined) ------------------------------------------------

    @precondition(lambda self: self.claims)
    @rule(target=fences, i=index, spot=index, t=st.sampled_from(TYPES),
          mesh=st.sampled_from(MESHES), data=st.sampled_from(ROOTS))
    def reserve_with_root(self, i, spot, t, mesh, data):
        owner = self.pick_claim(i).owner()
        spot_id, now = self.spot_of(spot), self.now
        # A creation root embeds its Spot's identity (the protocol asks it of callers):
        # two Spots never share one.
        root = spot_id.encode() + b":" + data
        done = self.run("reserve_with_root", lambda s: s.combined.reserve_with_root(
            spot_id, root, kind=t[1], stable_type=t[0], mesh=mesh, owner=owner, now=now))
        return multiple() if done is None else done[0]

    @rule(fence=fences, how=st.sampled_from(TWEAKS), data=st.sampled_from(ROOTS))
    def commit_ready_with_first_record(self, fence: ReservationFence, how, data):
        bent, now = tweak(fence, how), self.now
        self.run("commit_ready_with_first_record",
                 lambda s: s.combined.commit_ready_with_first_record(
                     self.at(s, bent), data, now=now))

    @rule(spot=index, seq=st.integers(-1, 3), version=st.sampled_from((0, 0, 1, -1)),
          gen=st.sampled_from((0, 0, 1)), receipt=receipts,
          forge=st.sampled_from(("same", "same", "pointer", "size")))
    def finish_first_record(self, spot, seq, version, gen, receipt: RootReceipt, forge):
        spot_id = self.spot_of(spot)
        r = self.record(spot_id)
        generation = (r.object_generation if r else 1) + gen
        expected = max(1, (r.store_version if r else 1) + version)
        pointer = r.recovery_pointer if forge == "pointer" and r is not None else None
        if pointer is not None:
            receipt = pointer.receipt()
        elif forge == "size":
            receipt = attrs.evolve(receipt, size=receipt.size + 1)
        self.run("finish_first_record", lambda s: s.combined.finish_first_record(
            spot_id, self.at(s, generation), seq=seq, expected_version=expected,
            root=root_in(s, spot_id, receipt) if pointer is not None else receipt))

    # -- close, pointer ------------------------------------------------------------------------

    @rule(spot=index, i=index, own=st.booleans(), gen=st.sampled_from((0, 0, 0, -1, 1)),
          expect_og=st.sampled_from((None, 0, 1)), expect_sv=st.sampled_from((None, 0, 1)))
    def begin_close(self, spot, i, own, gen, expect_og, expect_sv):
        spot_id = self.spot_of(spot)
        r = self.record(spot_id)
        if r is None and not self.claims:
            return
        owner = r.owner if own and r is not None else self.pick_claim(i).owner()
        generation = max(1, (r.object_generation if r else 1) + gen)
        og = None if expect_og is None else (r.owner_generation if r else 1) + expect_og
        sv = None if expect_sv is None else (r.store_version if r else 1) + expect_sv
        now = self.now
        self.run("begin_close", lambda s: s.location.begin_close(
            spot_id, object_generation=self.at(s, generation), owner=owner, now=now,
            expected_owner_generation=og, expected_store_version=sv))

    @rule(spot=index, how=st.sampled_from(TWEAKS))
    def release(self, spot, how):
        r = self.record(self.spot_of(spot))
        if r is not None:
            fence = tweak(r.fence(), how)
            self.run("release", lambda s: s.location.release(self.at(s, fence)))

    @rule(spot=index, version=st.sampled_from((0, 0, 1, -1)), gen=st.sampled_from((0, 0, 1)))
    def remove_recovery_pointer(self, spot, version, gen):
        spot_id = self.spot_of(spot)
        r = self.record(spot_id)
        generation = (r.object_generation if r else 1) + gen
        expected = max(1, (r.store_version if r else 1) + version)
        self.run("remove_recovery_pointer", lambda s: s.location.remove_recovery_pointer(
            spot_id, object_generation=self.at(s, generation), expected_version=expected))

    # -- durable state --------------------------------------------------------------------------

    @rule(spot=index, how=st.sampled_from(TWEAKS), clear=st.booleans(),
          data=st.sampled_from((b"", b"a", b"state")))
    def write_state(self, spot, how, clear, data):
        """A save or a clear, mostly with the record's own fence, sometimes a stale one."""
        r = self.record(self.spot_of(spot))
        if r is None:
            return
        fence, now = tweak(r.fence(), how), self.now
        if clear:
            self.run("clear_state", lambda s: s.location.clear_state(self.at(s, fence), now=now))
        else:
            self.run("save_state", lambda s: s.location.save_state(self.at(s, fence), data,
                                                                   now=now))

    @rule(spot=index)
    def load_state(self, spot):
        spot_id = self.spot_of(spot)
        self.run("load_state", lambda s: s.location.load_state(spot_id))

    # -- Actor membership ----------------------------------------------------------------------

    @precondition(lambda self: self.claims)
    @rule(target=fences, i=index, actor=st.sampled_from(ACTOR_IDS), j=index,
          fit=st.sampled_from((True, True, True, False)), commit=st.booleans())
    def reserve_actor(self, i, actor, j, fit, commit):
        """Reserve an Actor into a container, mostly one its owner can join (``fit``);
        CommitReady at once when ``commit``, so Ready members are common."""
        owner = self.pick_claim(i).owner()
        container = self.container_of(j, owner if fit else None)
        now = self.now
        fence = self.run("reserve actor", lambda s: s.location.reserve(
            actor, kind=SpotKind.ACTOR, stable_type="player", mesh=MESH, owner=owner, now=now,
            container=container))
        if fence is None:
            return multiple()
        if commit:
            self.run("commit_ready", lambda s: s.location.commit_ready(self.at(s, fence),
                                                                       now=now))
        return fence

    @precondition(lambda self: self.claims)
    @rule(actor=st.sampled_from(ACTOR_IDS), j=index, i=index,
          own=st.sampled_from((True, True, True, False)),
          fit=st.sampled_from((True, True, True, False)), gen=st.sampled_from((0, 0, 0, 1)))
    def move_membership(self, actor, j, i, own, fit, gen):
        """Join or Leave: mostly the Actor's owner names a container it owns (``fit``)."""
        r = self.record(actor)
        owner = r.owner if own and r is not None else self.pick_claim(i).owner()
        container = self.container_of(j, owner if fit else None)
        generation = (r.object_generation if r else 1) + gen
        now = self.now
        self.run("move_membership", lambda s: s.location.move_membership(
            actor, object_generation=self.at(s, generation), owner=owner, container=container,
            now=now))

    @precondition(lambda self: self.claims)
    @rule(actor=st.sampled_from(ACTORS), spot=st.sampled_from(SPOTS), i=index,
          last=st.sampled_from(("join", "close", "leave", "empty", "empty")))
    def membership_round(self, actor, spot, i, last):
        """One Actor's round in a row, so that whole rounds are common: created Ready on
        its owner's Entry Spot when missing, it joins the User Spot ``spot`` (created Ready
        first when missing), the Spot's close is refused while it is a member
        (MembersRemain), it leaves for its Entry Spot, and the Spot closes once empty.
        Stops at ``last`` or at the first refusal (another owner, a full node, ...)."""
        if self.record(spot) is None:
            self.create_ready(i, spot, SERVED[0])
        room = self.record(spot)
        if room is None or room.kind is not SpotKind.USER:
            return
        if self.record(actor) is None:
            self.reserve_actor(i, actor, 0, fit=True, commit=True)
        a = self.record(actor)
        if a is None or a.state is not AuthorityState.READY:
            return
        entry = self.entry_of(a.owner)
        now = self.now

        def move(container: str) -> Any:
            return self.run("move_membership", lambda s: s.location.move_membership(
                actor, object_generation=self.at(s, a.object_generation), owner=a.owner,
                container=container, now=now))

        def close() -> Any:
            return self.run("begin_close container", lambda s: s.location.begin_close(
                spot, object_generation=self.at(s, room.object_generation), owner=room.owner,
                now=now))

        if move(spot) is None or last == "join":
            return
        close()
        if last == "close" or entry is None:
            return
        if move(entry) is None or last == "leave":
            return
        self.run("members", lambda s: s.location.members(spot))
        close()

    def entry_of(self, owner: OwnerFence) -> str | None:
        """The Entry Spot ID of the lifecycle ``owner`` (None: not one the model claimed)."""
        return next((c.descriptor.entry_spot_id for c in self.claims if c.owner() == owner),
                    None)

    @rule(j=index)
    def members(self, j):
        container = self.container_of(j)
        self.run("members", lambda s: s.location.members(container))

    @rule(j=index)
    def close_container(self, j):
        """BeginClose of a container that has members (MembersRemain), by its owner."""
        held = sorted(self.oracle.location.state.members)  # type: ignore[attr-defined]
        container = held[j % len(held)] if held else self.container_of(j)
        r = self.record(container)
        if r is None:
            return
        now = self.now
        self.run("begin_close container", lambda s: s.location.begin_close(
            container, object_generation=self.at(s, r.object_generation), owner=r.owner,
            now=now))

    @rule(actor=st.sampled_from(ACTORS), release=st.booleans())
    def close_actor(self, actor, release):
        """An Actor's close by its owner, and its release when ``release``."""
        r = self.record(actor)
        if r is None:
            return
        now = self.now
        closing = self.run("begin_close actor", lambda s: s.location.begin_close(
            actor, object_generation=self.at(s, r.object_generation), owner=r.owner, now=now))
        if closing is not None and release:
            fence = closing.fence()
            self.run("release actor", lambda s: s.location.release(self.at(s, fence)))

    # -- relocation ----------------------------------------------------------------------------

    def moving_of(self, spot: int, actor: bool) -> str:
        """The ID a relocation rule acts on: a Spot's, or (``actor``) an Actor's."""
        return ACTORS[spot % len(ACTORS)] if actor else self.spot_of(spot)

    def free_units(self, owner: OwnerFence) -> int:
        """How many more activations ``owner`` takes in ``MESH`` (0: none, or no claim)."""
        state = self.oracle.location.state  # type: ignore[attr-defined]
        claim = state.claims.get((MESH, owner.node_rid))
        if claim is None or claim.lifecycle_generation != owner.lifecycle_generation:
            return 0
        key = capacity_key(MESH, owner)
        return claim.descriptor.capacity - state.active.get(key, 0) - state.pending.get(key, 0)

    def target_for(self, r: AuthorityRecord, i: int, *, roomy: bool = False) -> OwnerFence:
        """A move's target for ``r``: mostly another node's current claim, so that moves
        get through (with ``roomy``, one with a free unit when there is one: capacities
        are small); sometimes any claim (its own node, an old lifecycle)."""
        others = [c for c in map(self.pick_claim, range(8))
                  if c.descriptor.node_rid != r.owner.node_rid]
        if roomy:  # (in MESH, where every Actor lives)
            others = [c for c in others if self.free_units(c.owner()) > 0] or others
        return (others[i % len(others)] if others and i < 6 else self.pick_claim(i)).owner()

    def next_container_of(self, into: str, j: int, target: OwnerFence,
                          source: OwnerFence) -> str | None:
        """The container a BeginRelocation names: ``fit`` one ``target`` can take a member
        into (when it has one), ``source`` one the moving record's owner has, ``any`` any
        Spot, Entry Spot or Actor used, ``none`` none."""
        if into == "none":
            return None
        return self.container_of(j, {"fit": target, "source": source}.get(into))

    @precondition(lambda self: self.claims)
    @rule(spot=index, i=index, how=st.sampled_from(TWEAKS),
          actor=st.sampled_from((False, False, True)), j=index,
          into=st.sampled_from(("none", "none", "fit", "fit", "source", "any")))
    def begin_relocation(self, spot, i, how, actor, j, into):
        """BeginRelocation of a Spot or (``actor``) an Actor toward any claim, naming a
        container (``into``): only an Actor names one, and only one its target owns."""
        r = self.record(self.moving_of(spot, actor))
        if r is not None:
            fence, target, now = tweak(r.fence(), how), self.pick_claim(i).owner(), self.now
            container = self.next_container_of(into, j, target, r.owner)
            self.run("begin_relocation", lambda s: s.location.begin_relocation(
                self.at(s, fence), target=target, now=now, container=container))

    @precondition(lambda self: self.claims)
    @rule(spot=st.sampled_from(SPOTS), i=index,
          last=st.sampled_from(("commit", "begin", "seal", "relay_ready", "commit", "abort",
                                "abort_late")))
    def move(self, spot, i, last):
        """One move in a row: begin, seal, accept relay-ready, commit (or abort early or late).

        Stops at ``last`` or at the first refusal; ``abort_late`` tries an abort after
        relay-ready (refused everywhere). A Missing ``spot`` is created Ready first, so
        that whole moves are common.
        """
        self.whole_move(spot, i, last)

    def whole_move(self, spot: str, i: int, last: str, **options: bool) -> None:
        """:meth:`move`, BeginRelocation taking ``options`` (``carry_members``: then toward
        a node with free units when there is one)."""
        if self.record(spot) is None:
            self.create_ready(i, spot, SERVED[i % 2])
        r = self.record(spot)
        if r is None:
            return
        roomy = options.get("carry_members", False)
        target, fence, now = self.target_for(r, i, roomy=roomy), r.fence(), self.now
        members = self.oracle.location.state.members.get(spot)  # type: ignore[attr-defined]
        label = "begin_relocation" + (" with members" if members else "")
        if self.run(label, lambda s: s.location.begin_relocation(
                self.at(s, fence), target=target, now=now, **options)) is None or (
                    last == "begin"):
            return
        if last == "abort":
            self.run("abort_relocation",
                     lambda s: s.location.abort_relocation(self.at(s, fence)))
            return
        if self.run("seal_relocation", lambda s: s.location.seal_relocation(
                self.at(s, fence), now=now)) is None or last == "seal":
            return
        if self.run("accept_relay_ready", lambda s: s.location.accept_relay_ready(
                self.at(s, fence), target=target, now=now)) is None or last == "relay_ready":
            return
        if last == "abort_late":
            self.run("abort_relocation",
                     lambda s: s.location.abort_relocation(self.at(s, fence)))
        else:
            self.run("commit_relocation",
                     lambda s: s.location.commit_relocation(self.at(s, fence), now=now))

    def ready_actor(self, actor: str, i: int) -> AuthorityRecord | None:
        """``actor``'s record, created Ready first when Missing: on its Entry Spot, by a
        current claim with a free unit when there is one (capacities are small)."""
        if self.record(actor) is None:
            owners = [c.owner() for c in map(self.pick_claim, range(8))]
            roomy = [o for o in owners if self.free_units(o) > 0] or owners
            owner, now = roomy[i % len(roomy)], self.now
            entry = self.entry_of(owner)
            if entry is None:
                return None
            fence = self.run("reserve actor", lambda s: s.location.reserve(
                actor, kind=SpotKind.ACTOR, stable_type="player", mesh=MESH, owner=owner,
                now=now, container=entry))
            if fence is not None:
                self.run("commit_ready", lambda s: s.location.commit_ready(self.at(s, fence),
                                                                           now=now))
        return self.record(actor)

    def room_of(self, owner: OwnerFence, j: int) -> str | None:
        """A Ready User Spot ``owner`` owns, created Ready on it first (under a Missing ID
        of ``SPOTS``) when there is none and it has a unit to spare for the Actor that
        joins it; ``None`` when none is there nor can be."""
        rooms = sorted(r.spot_id for r in map(self.record, SPOTS)
                       if r is not None and r.owner == owner and r.kind is SpotKind.USER
                       and r.state is AuthorityState.READY)
        if rooms:
            return rooms[j % len(rooms)]
        free = [spot for spot in SPOTS if self.record(spot) is None]
        if not free or self.free_units(owner) < 2:
            return None
        spot, now = free[j % len(free)], self.now
        fence = self.run("reserve", lambda s: s.location.reserve(
            spot, kind=SpotKind.USER, stable_type="room", mesh=MESH, owner=owner, now=now))
        if fence is None or self.run("commit_ready", lambda s: s.location.commit_ready(
                self.at(s, fence), now=now)) is None:
            return None
        return spot

    def move_actor_to(self, r: AuthorityRecord, target: OwnerFence, container: str | None,
                      last: str) -> None:
        """Move the Actor of ``r`` toward ``target`` into ``container``, step by step as
        ``move`` (stops at ``last`` or the first refusal); ``close_next`` tries the close
        of ``container`` by its owner once the move is relay-ready (an arriving member
        keeps a User Spot open: MembersRemain, an Entry Spot never closes so), then
        commits."""
        fence, now = r.fence(), self.now
        if self.run("begin_relocation actor", lambda s: s.location.begin_relocation(
                self.at(s, fence), target=target, now=now, container=container)) is None:
            return
        if last == "begin":
            return
        if last == "abort":
            self.run("abort_relocation actor",
                     lambda s: s.location.abort_relocation(self.at(s, fence)))
            return
        if self.run("seal_relocation actor", lambda s: s.location.seal_relocation(
                self.at(s, fence), now=now)) is None or last == "seal":
            return
        if self.run("accept_relay_ready actor", lambda s: s.location.accept_relay_ready(
                self.at(s, fence), target=target, now=now)) is None or last == "relay_ready":
            return
        if last == "close_next" and container is not None:
            arriving = self.record(container)
            if arriving is not None:
                self.run("begin_close next container", lambda s: s.location.begin_close(
                    container, object_generation=self.at(s, arriving.object_generation),
                    owner=arriving.owner, now=now))
        if last == "abort_late":
            self.run("abort_relocation actor",
                     lambda s: s.location.abort_relocation(self.at(s, fence)))
        else:
            self.run("commit_relocation actor",
                     lambda s: s.location.commit_relocation(self.at(s, fence), now=now))

    @precondition(lambda self: self.claims)
    @rule(actor=st.sampled_from(ACTORS), i=index, j=index,
          into=st.sampled_from(("fit", "fit", "fit", "source", "none", "any")),
          last=st.sampled_from(("commit", "commit", "begin", "seal", "relay_ready", "abort",
                                "abort_late", "close_next")))
    def move_actor(self, actor, i, j, into, last):
        """One Actor's move in a row (``move_actor_to``) into the container ``into``
        names at the target: mostly one the target owns (``fit``: its Entry Spot or a
        User Spot there); its container at the source (another owner's: StaleFence),
        none or any Spot are refused. A Missing Actor is created Ready first."""
        r = self.ready_actor(actor, i)
        if r is not None:
            target = self.target_for(r, i, roomy=True)
            self.move_actor_to(r, target, self.next_container_of(into, j, target, r.owner),
                               last)

    @precondition(lambda self: self.claims)
    @rule(actor=st.sampled_from(ACTORS), i=index, j=index,
          last=st.sampled_from(("commit", "close_next", "close_next", "relay_ready",
                                "abort")))
    def move_actor_into_room(self, actor, i, j, last):
        """An Actor joins a User Spot on another node by a move (``move_actor_to``): the
        room is created Ready on the target first when it has none, and its close is
        refused while the Actor arrives (``close_next``)."""
        r = self.ready_actor(actor, i)
        if r is not None:
            target = self.target_for(r, i, roomy=True)
            self.move_actor_to(r, target, self.room_of(target, j), last)

    @precondition(lambda self: self.claims)
    @rule(actor=st.sampled_from(ACTORS), spot=st.sampled_from(SPOTS), i=index, j=index,
          into=st.sampled_from(("none", "none", "fit")))
    def move_occupied_spot(self, actor, spot, i, j, into):
        """A User Spot that an Actor joined (``membership_round`` up to the join) does not
        begin a move, naming no container or one (a Spot names none): InvalidOperation."""
        self.membership_round(actor, spot, i, "join")
        r = self.record(spot)
        if r is None:
            return
        target, fence, now = self.target_for(r, i), r.fence(), self.now
        container = self.next_container_of(into, j, target, r.owner)
        self.run("begin_relocation occupied", lambda s: s.location.begin_relocation(
            self.at(s, fence), target=target, now=now, container=container))

    @rule(spot=index, step=st.sampled_from(("seal", "payload", "relay_ready", "commit",
                                            "abort", "release")),
          how=st.sampled_from(TWEAKS), i=index, named=st.booleans(),
          actor=st.sampled_from((False, False, True)))
    def relocation_step(self, spot, step, how, i, named, actor):
        r = self.record(self.moving_of(spot, actor))
        if r is None:
            return
        fence, now = tweak(r.fence(), how), self.now
        if step == "seal":
            self.run("seal_relocation",
                     lambda s: s.location.seal_relocation(self.at(s, fence), now=now))
        elif step == "relay_ready":
            target = r.relocation_target
            if not named or target is None:
                target = self.pick_claim(i).owner()
            self.run("accept_relay_ready", lambda s: s.location.accept_relay_ready(
                self.at(s, fence), target=target, now=now))
        elif step == "commit":
            self.run("commit_relocation",
                     lambda s: s.location.commit_relocation(self.at(s, fence), now=now))
        elif step == "payload":  # the same receipt again, or another one
            payload = receipt_of(f"payload {i % 2}".encode())
            self.run("record_relocation_payload", lambda s: s.location.record_relocation_payload(
                self.at(s, fence), payload=payload, now=now))
        elif step == "release":  # refused while the target lives (advance ``now`` first)
            target = r.relocation_target
            if not named or target is None:
                target = self.pick_claim(i).owner()
            self.run("release_relay_ready", lambda s: s.location.release_relay_ready(
                self.at(s, fence), target=target, now=now))
        else:
            self.run("abort_relocation",
                     lambda s: s.location.abort_relocation(self.at(s, fence)))

    # -- query ---------------------------------------------------------------------------------

    @rule(page_size=st.integers(0, 5), restart=st.booleans())
    def query_page(self, page_size, restart):
        """One page per rule: walks interleave with writes; each backend keeps its cursor."""
        walking = self.cursors if self.cursors is not None and not restart else {}
        cursors = {id(store): walking.get(name) for name, store in self.host.stores.items()}

        async def page(s: Store) -> Page:
            return await s.location.query(page_size=page_size, cursor=cursors[id(s)])

        outcomes = self.agree("query", page)
        oracle = outcomes["memory"]
        if isinstance(oracle, ZLinkError):
            return
        nexts = {n: p.next_cursor for n, p in outcomes.items()}  # type: ignore[attr-defined]
        self.cursors = None if oracle.next_cursor is None else nexts

    @rule(cursor=st.sampled_from(("", "nope", "a", "\ud800")))
    def query_forged_cursor(self, cursor):
        self.run("query forged", lambda s: s.location.query(page_size=2, cursor=cursor))

    # -- relocation store ----------------------------------------------------------------------

    @rule(target=receipts, data=st.sampled_from(ROOTS))
    def put_root(self, data):
        receipt = self.run("put_root", lambda s: s.relocation.put_root(data))
        return multiple() if receipt is None else receipt

    @rule(receipt=receipts, forge=st.sampled_from(("same", "same", "sha", "size", "ref")))
    def get_root(self, receipt: RootReceipt, forge):
        if forge == "sha":
            receipt = attrs.evolve(receipt, sha256="00" * 32)
        elif forge == "size":
            receipt = attrs.evolve(receipt, size=receipt.size + 1)
        elif forge == "ref":
            receipt = attrs.evolve(receipt, ref="sha256:" + "11" * 32)
        self.run("get_root", lambda s: s.relocation.get_root(receipt))

    @rule(receipt=receipts, forge=st.sampled_from(("same", "same", "sha", "size")))
    def delete_root(self, receipt: RootReceipt, forge):
        if forge == "sha":
            receipt = attrs.evolve(receipt, sha256="00" * 32)
        elif forge == "size":
            receipt = attrs.evolve(receipt, size=receipt.size + 1)
        self.run("delete_root", lambda s: s.relocation.delete_root(receipt))

    @rule(spot=st.sampled_from(INBOX_SPOTS), gen=st.sampled_from(INBOX_GENERATIONS),
          data=st.lists(st.binary(max_size=8), min_size=1, max_size=3))
    def inbox_append(self, spot, gen, data):
        for record in data:
            seq = self.run("inbox_append",
                           lambda s, record=record: s.relocation.inbox_append(
                               spot, self.at(s, gen), record))
            if seq is not None:
                assert seq >= 1

    @rule(spot=st.sampled_from(INBOX_SPOTS), gen=st.sampled_from(INBOX_GENERATIONS),
          after=st.integers(-1, 6), limit=st.integers(0, 4))
    def inbox_read(self, spot, gen, after, limit):
        self.run("inbox_read", lambda s: s.relocation.inbox_read(
            spot, self.at(s, gen), after=after, limit=limit))

    @rule(spot=st.sampled_from(INBOX_SPOTS), gen=st.sampled_from(INBOX_GENERATIONS),
          seq=st.integers(-1, 6))
    def inbox_set_cursor(self, spot, gen, seq):
        self.run("inbox_set_cursor",
                 lambda s: s.relocation.inbox_set_cursor(spot, self.at(s, gen), seq))
        self.run("inbox_cursor", lambda s: s.relocation.inbox_cursor(spot, self.at(s, gen)))

    @rule(spot=st.sampled_from(INBOX_SPOTS), gen=st.sampled_from(INBOX_GENERATIONS))
    def inbox_drop(self, spot, gen):
        self.run("inbox_drop", lambda s: s.relocation.inbox_drop(spot, self.at(s, gen)))

    # -- invariants ----------------------------------------------------------------------------

    @invariant()
    def contents_agree(self):
        """Statistics, ``find`` of every ID used and a full query agree; one authority per ID.

        ``last_object_generation`` is the oracle's on every backend with one sequence;
        on one with its own numbers it is the largest it issued -- every generation
        issued is paired as it is issued (Reserve's fence, NewClaim's Entry read at
        once), so it is the largest paired, and a refusal that used one shows here
        when that one is the largest.
        """
        stats = self.agree("location statistics", lambda s: s.location.statistics())
        last = stats["memory"].last_object_generation  # type: ignore[attr-defined]
        assert last >= self.last_issued
        self.last_issued = last
        for name, store in self.host.stores.items():
            gens = self.gens[id(store)]
            if not gens.exact:
                mine = stats[name].last_object_generation  # type: ignore[attr-defined]
                assert mine == max(gens.there, default=0), (
                    f"{name}: last_object_generation {mine}, largest issued "
                    f"{max(gens.there, default=0)}")
        self.run("relocation statistics", lambda s: s.relocation.statistics())
        for spot_id in sorted({*SPOTS, *ACTORS, *self.entries}):
            self.run("find", lambda s, spot_id=spot_id: s.location.find(spot_id))
            self.run("members", lambda s, spot_id=spot_id: s.location.members(spot_id))
        page = self.run("query all", lambda s: s.location.query(page_size=1000))
        assert page.next_cursor is None
        ids = [r.spot_id for r in page.records]
        gens = [r.object_generation for r in page.records]
        assert ids == sorted(set(ids))
        assert len(gens) == len(set(gens))
        assert all(g <= self.last_issued for g in gens)

    @invariant()
    def generations_increase_per_id(self):
        for spot_id in {*SPOTS, *ACTORS, *self.entries}:
            r = self.record(spot_id)
            if r is None:
                if spot_id in self.last_gen:
                    self.absent.add(spot_id)
                continue
            last = self.last_gen.get(spot_id)
            if spot_id in self.absent:
                assert last is not None
                assert r.object_generation > last
                self.absent.discard(spot_id)
            elif last is not None and spot_id in (*SPOTS, *ACTORS):
                assert r.object_generation == last
            elif last is not None:
                # NewClaim over an expired claim may delete and re-issue the same Entry ID
                # in one transaction: a new incarnation, so a strictly larger generation.
                assert r.object_generation >= last
            self.last_gen[spot_id] = r.object_generation


@pytest.fixture(autouse=True, scope="module")
def _redis_answers():
    """Fail (CI) or skip (locally) the whole module once when Redis is absent."""

    async def probe() -> None:
        async with redis_test_store(), cluster_test_store(**CLUSTER_OPTIONS):
            pass

    async def probe_postgres() -> None:
        async with postgres_test_store():
            pass

    if WITH_REDIS:
        trio.run(probe)
    if WITH_POSTGRES:
        trio.run(probe_postgres)


class CarryingAgreement(StoreAgreement):
    """The model plus SpotWide moves that carry members: whole moves of a Spot with its
    members, stopping at each step, and single steps on the carried members' own fences
    (refused)."""

    @rule(node=st.sampled_from(NODES), lease=st.floats(10, 60))
    def roomy_claim(self, node, lease):
        """A lifecycle with room for a Spot and its members (capacities are small else)."""
        self._claim(node, capacity=8, lease=lease)

    @precondition(lambda self: self.claims)
    @rule(spot=st.sampled_from(SPOTS), i=index,
          last=st.sampled_from(("commit", "begin", "seal", "relay_ready", "commit", "abort",
                                "abort_late")))
    def carrying_move(self, spot, i, last):
        """:meth:`move` with ``carry_members``: the Spot's members move with it."""
        self.whole_move(spot, i, last, carry_members=True)

    @precondition(lambda self: self.claims)
    @rule(spot=st.sampled_from(SPOTS), i=index, n=st.integers(1, len(ACTORS)),
          last=st.sampled_from(("commit", "begin", "seal", "relay_ready", "commit", "abort",
                                "abort_late")))
    def move_a_room_with_members(self, spot, i, n, last):
        """A User Spot gets ``n`` members of its owner first (created in it, or joined
        from that owner's Entry Spot), then moves carrying them: whole moves are common."""
        if self.record(spot) is None:
            self.create_ready(i, spot, SERVED[0])
        room = self.record(spot)
        if room is None or room.kind is not SpotKind.USER:
            return
        owner, now = room.owner, self.now
        for actor in ACTORS[:n]:
            a = self.record(actor)
            if a is None:
                fence = self.run("reserve actor", lambda s, actor=actor: s.location.reserve(
                    actor, kind=SpotKind.ACTOR, stable_type="player", mesh=MESH, owner=owner,
                    now=now, container=spot))
                if fence is not None:
                    self.run("commit_ready", lambda s, fence=fence: s.location.commit_ready(
                        self.at(s, fence), now=now))
            elif a.owner == owner and a.container != spot:
                gen = a.object_generation
                self.run("move_membership", lambda s, actor=actor, gen=gen: (
                    s.location.move_membership(actor, object_generation=self.at(s, gen),
                                               owner=owner, container=spot, now=now)))
        self.whole_move(spot, i, last, carry_members=True)

    @precondition(lambda self: self.claims)
    @rule(actor=st.sampled_from(ACTORS), step=st.sampled_from(("seal", "abort", "commit")))
    def carried_step(self, actor, step):
        """A step fenced by an Actor's own record, carried or not."""
        r = self.record(actor)
        if r is None:
            return
        fence, now = r.fence(), self.now
        calls = {"seal": lambda s: s.location.seal_relocation(self.at(s, fence), now=now),
                 "abort": lambda s: s.location.abort_relocation(self.at(s, fence)),
                 "commit": lambda s: s.location.commit_relocation(self.at(s, fence), now=now)}
        self.run(f"{step}_relocation of an Actor", calls[step])


TestStoreAgreement = StoreAgreement.TestCase
TestStoreAgreement.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCarryingAgreement = CarryingAgreement.TestCase
TestCarryingAgreement.settings = settings(
    max_examples=30, stateful_step_count=30, deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
