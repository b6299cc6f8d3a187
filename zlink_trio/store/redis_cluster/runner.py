"""The cluster's script runner: facts from the nodes slot, one bucket script, load shifts.

Theory of operation
-------------------
:class:`ClusterRunner` offers what the single-Redis ``ScriptRunner`` offers
(``script``, ``command``, ``bounded``, the same deadline and typed-error rules), so the
single-Redis store classes run on it unchanged where a transaction is one bucket's.
As on one Redis, ``script`` and ``command`` enter no cancel scope: the caller's deadline
and the store timeout (one point in time for every command of the call) go with each
command to the pipelines and the router, which enforce them (``Limits``); ``bounded``
serves the rarer calls.
A bucket script (``lua``) may need facts of the nodes slot; the runner

1. **takes a capacity unit** first for a script of :data:`_TAKES` (Reserve,
   ``reserve_with_root``) -- from its **hand** (below) when it holds one, else with the
   ``n_take`` node script, which checks the owner's claim of that lifecycle is there and
   below capacity and adds a pending unit (and :data:`AHEAD` more for the hand of a
   lifecycle of this runner's while twice that many would still be free), returning
   every claim as facts;
2. sends the bucket script with the facts; when it answers ``FACTS`` (the claims of a
   NodeRid it was not given) or ``TAKE`` (a unit for a lifecycle), the runner reads or
   takes them in the nodes slot and sends the script again (it wrote nothing);
3. applies the load shifts the script returned in the nodes slot (``n_shift``; a taken
   unit's own ``pending + 1`` is netted), and gives back a unit the script did not use;
   then drops the member marks it handed back (those a deleted Actor, a MoveMembership
   or the end of a move to another node leaves: ``membership``), each in its
   container's bucket.

Step 3 runs shielded from the caller's cancellation, bounded by the store timeout. Facts
are sound to act on because of how claims change (``store.rules.claims``): a claim's
expiry only grows while it lives, and a lifecycle that expired or was removed never
comes back, so "lifecycle L of NodeRid N is live until E" and "L is gone" read before
stay true when the bucket script runs (the script compares E with the caller's ``now``).
The changes that do not keep a fact true are removals: a node's own, at its stop, made
only once its activations stopped; and RemoveDeadClaims', which first marks the
lifecycle dead in every bucket, where a script refuses it whatever its facts say
(``lua``, ``dead_here``).

Three things spare a cold activation round trips (docs/stores.md, "Round trips on Redis
Cluster"):

- **Units taken ahead.** For the lifecycles claimed through this runner
  (:meth:`ClusterRunner.own`), the units an ``n_take`` takes beyond the one its call
  uses go into the runner's hand; a Reserve of that lifecycle uses one with no round
  trip of its own, on recent claims (below), and puts it back when it is refused. Once
  the hand is down to :data:`_REFILL_AT` units a take for :data:`AHEAD` more goes out
  beside the script (one round trip for both; all of them or none, so near capacity
  the hand drains; whatever becomes of it, the caller gets the script's outcome).
  Removing the claim (:meth:`ClusterRunner.disown`) or closing the store
  (:meth:`ClusterRunner.close`) gives back what is left. Units in hand count against
  the node's capacity like units in use, which is why they are taken only far from it.
  They are taken only where the buckets count each lifecycle's units beside its
  records (:attr:`ClusterRunner.counted`): RemoveDeadClaims reads those counts, so the
  units a killed process held keep no dead claim (``location``).
- **Recent claims.** A script of :data:`_RECENT_FACTS` or a Reserve on a unit from the
  hand -- each checks only the claim of the NodeRids it is given -- runs on the claims
  this runner read at most :data:`FACTS_MAX_AGE` seconds ago (an ``HGETALL`` or an
  ``n_take``), instead of reading them again; past half that age a read goes out beside
  the script, so a steady stream of scripts never waits for one. A claim added or
  removed through this runner drops them (a renewal does not: it only makes an expiry
  later). Should such a script refuse for a reason the claims decide
  (:data:`_FACT_REFUSALS`: a lifecycle missing, expired or not serving -- a claim newer
  than the read), it wrote nothing and runs again on claims read then, so a recent read
  never refuses what a fresh one accepts.
- **Shifts within one lifecycle wait.** A shift that moves units between the
  ``pending`` and ``active`` of one lifecycle and changes no lifecycle's total (CommitReady's
  ``pending -> active``) changes nothing capacity reads (``n_take`` and RemoveDeadClaims
  read the total), so it waits in the runner and goes out with the next shift that does
  change a total, before RemoveDeadClaims, or at :meth:`ClusterRunner.flush` (the store's
  close). Waiting shifts of one key are summed, so they take room per lifecycle, not per
  activation.

The window a split opens -- a unit taken and the caller cancelled before step 3, or a
shift lost when the nodes slot fails -- leaves a lifecycle counting one unit too many
(never too few), as do the units in hand of a killed process; a waiting shift lost with
the process leaves the right total split wrongly between ``pending`` and ``active``.
None of it keeps a dead claim where the buckets count units (RemoveDeadClaims reads
theirs); docs/stores.md ("Redis Cluster") says what bounds it in a deployment created
before they did.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from zlink_trio.core.errors import DeadlineExceeded, StoreUnavailable
from zlink_trio.store.redis.client import script_sha
from zlink_trio.store.redis.codec import text
from zlink_trio.store.redis.pipeline import Expired
from zlink_trio.store.redis.resp import NoScriptError, ReplyError, encode_command
from zlink_trio.store.redis_cluster.keys import claim_field, hash_slot, tag_of
from zlink_trio.store.redis_cluster.lua import BUCKET_SCRIPTS, HINT_SCRIPTS, NODE_SCRIPTS

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Sequence

    from zlink_trio.store.redis.pipeline import Pipeline, QueuedCall
    from zlink_trio.store.redis_cluster.keys import ClusterKeys
    from zlink_trio.store.redis_cluster.router import Limits, Router

__all__ = ("FACTS_MAX_AGE", "ClusterRunner")

T = TypeVar("T")

#: Rounds of facts / units a bucket script may ask for before the call gives up.
_FACT_ROUNDS: Final = 6
#: Scripts that always check the claim of a NodeRid among their arguments (the index of
#: each in ``args``): the claims are read before the first send, saving the round trip
#: of a ``FACTS`` answer.
_PREFETCH: Final = {
    "commit_ready": (2,), "commit_ready_with_first_record": (2,), "begin_close": (1,),
    "seal_relocation": (2,), "accept_relay_ready": (4,), "begin_relocation": (2, 4),
    "recovery_adopt_orphan": (2, 4), "record_relocation_payload": (2,),
    "move_membership": (1,), "write_state": (2,), "set_reminder": (2,),
    "cancel_reminder": (2,),
}
#: Scripts that take their owner's capacity unit first (step 1), saving the round trip of
#: a ``TAKE`` answer: the index in ``args`` of its Mesh, NodeRid and lifecycle generation.
_TAKES: Final = {"reserve": (3, 4, 5), "reserve_with_root": (3, 4, 5)}
#: Units one ``n_take`` takes ahead for the scripts of :data:`_TAKES` (none near capacity:
#: ``lua``), and the units left in hand at which a take for more goes out beside a script
#: (with 100 activations in flight a hand of 64 ran dry: one in five waited for a take).
AHEAD: Final = 256
_REFILL_AT: Final = 128
#: Lifecycles whose load key the runner remembers, and keys whose bucket it remembers
#: (each cleared when full).
_LIFECYCLES_KNOWN: Final = 1024
_KEYS_KNOWN: Final = 4096
#: Seconds the claims a runner read serve the scripts of :data:`_RECENT_FACTS`.
FACTS_MAX_AGE: Final = 0.25
#: The owner-only scripts of a Spot's steady work, which run on recent claims.
_RECENT_FACTS: Final = frozenset({
    "commit_ready", "commit_ready_with_first_record", "begin_close", "write_state",
    "set_reminder", "cancel_reminder"})
#: Refusals the claims decide: a script run on recent claims runs again on fresh ones.
_FACT_REFUSALS: Final = frozenset({"STALE_OWNER", "EXPIRED", "NOT_SERVED"})
#: Node scripts that add or remove claims: the recent claims are dropped when one runs.
#: (Renew only makes a lifecycle's expiry later, and placement's mark is not a fact the
#: scripts read: claims read before either still tell the truth the scripts act on.)
_CLAIM_CHANGES: Final = frozenset({"n_new_claim", "n_remove", "n_remove_dead"})


_COMPACT: Final = (",", ":")
#: A command queued beside a script (its pipeline and item), and the time and claims
#: epoch it was sent at.
_Beside = tuple[tuple["Pipeline", "QueuedCall"], tuple[float, int]]
_NO_FACTS: Final = '{"f":{},"c":{},"t":{}}'


class _Read:
    """Every claim as one read of the nodes slot returned them (a flat ``HGETALL``),
    decoded once and encoded once for the scripts: a recent read serves many calls."""

    __slots__ = ("claims", "encoded", "encoded_fetched", "fetched", "flat")

    def __init__(self, flat: Sequence[Any]) -> None:
        self.flat = flat
        self.fetched: dict[str, int] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        for i in range(0, len(flat), 2):
            c = json.loads(flat[i + 1])
            self.fetched[c["rid"]] = 1
            self.claims[text(flat[i])] = {k: c[k] for k in ("lc", "exp", "node", "cap")} | {
                "serves": c.get("serves") or {}}
        self.encoded = json.dumps(self.claims, separators=_COMPACT)
        self.encoded_fetched = json.dumps(self.fetched, separators=_COMPACT)


class _Facts:
    """What the runner read from the nodes slot for one call."""

    __slots__ = ("_read", "claims", "fetched", "from_hand", "loads", "loads_json", "taken")

    def __init__(self) -> None:
        self.fetched: dict[str, int] = {}
        self.claims: dict[str, dict[str, Any]] = {}
        #: The read ``claims`` are exactly (its encoding serves), if one.
        self._read: _Read | None = None
        #: ``mesh|rid|lc`` -> load before the unit taken (text), and the units taken.
        self.loads: dict[str, str] = {}
        self.taken: dict[tuple[str, str, str], int] = {}
        #: The lifecycle whose unit came from the runner's hand (back there if unused).
        self.from_hand: tuple[str, str, str] | None = None
        #: ``loads`` encoded, when the runner has it already (a unit from the hand).
        self.loads_json: str | None = None

    def add_claims(self, read: _Read) -> None:
        self.fetched.update(read.fetched)
        if not self.claims or self._read is read:
            self.claims, self._read = dict(read.claims), read
        else:
            self.claims.update(read.claims)
            self._read = None

    def encode(self) -> str:
        read = self._read
        if read is None:
            if not (self.fetched or self.claims or self.loads):
                return _NO_FACTS
            fetched = json.dumps(self.fetched, separators=_COMPACT)
            claims = json.dumps(self.claims, separators=_COMPACT)
        else:
            fetched = (read.encoded_fetched if self.fetched.keys() == read.fetched.keys()
                       else json.dumps(self.fetched, separators=_COMPACT))
            claims = read.encoded
        loads = self.loads_json or (json.dumps(self.loads, separators=_COMPACT)
                                    if self.loads else "{}")
        return f'{{"f":{fetched},"c":{claims},"t":{loads}}}'


class _Bucket:
    """What every bucket script of one bucket sends unchanged, made once: its slot, the
    keys it declares besides its own (``ClusterKeys.bucket_meta``) and the start of its
    first argument (the layout; the facts follow)."""

    __slots__ = ("head", "meta", "slot")

    def __init__(self, keys: ClusterKeys, tag: str) -> None:
        self.meta = keys.bucket_meta(int(tag[1:]))
        self.slot = hash_slot(self.meta[0])
        self.head = "\n".join((keys.location, tag, str(keys.buckets), tag[1:], ""))


class ClusterRunner:
    """Scripts and commands on a Redis Cluster, with the single-Redis runner's rules."""

    def __init__(self, router: Router, keys: ClusterKeys, *, timeout: float,
                 where: str) -> None:
        self.router = router
        self.keys = keys
        self.timeout = timeout
        self.where = where
        self.prefixes: Final = (keys.location, keys.relocation)
        self._source = {**BUCKET_SCRIPTS, **NODE_SCRIPTS, **HINT_SCRIPTS}
        self._sha = {name: script_sha(source) for name, source in self._source.items()}
        self._claims_key = keys.nodes("claims")
        #: Load shifts not applied yet, summed per (load key, field): those that changed
        #: no lifecycle's total, and those whose ``n_shift`` failed (sent with the next).
        self._backlog: dict[tuple[str, str], int] = {}
        #: The claims last read and when (``trio.current_time()``).
        self._recent: tuple[float, _Read] | None = None
        #: Tag -> what every bucket script of that bucket sends unchanged; a recent
        #: script's first key -> its bucket's.
        self._buckets: dict[str, _Bucket] = {}
        self._bucket_by_key: dict[str, _Bucket] = {}
        #: Whether this deployment's buckets count each lifecycle's units (set at open by
        #: ``store``): only then are units taken ahead (RemoveDeadClaims reads the buckets'
        #: counts, ``location``, so units left in a dead process's hand keep nothing).
        self.counted = False
        #: (mesh, rid, lc) -> units taken ahead and not used yet; the lifecycles with a
        #: take in flight; whether a read of the claims is in flight beside a script.
        self._hand: dict[tuple[str, str, str], int] = {}
        self._taking: set[tuple[str, str, str]] = set()
        self._reading = False
        #: Grows each time a claim is added or removed through this runner: a read sent
        #: before is not remembered as the recent one.
        self._claims_epoch = 0
        #: The lifecycles claimed through this runner (the node's own): only theirs are
        #: taken ahead (``own``).
        self._owned: set[tuple[str, str, str]] = set()
        #: ``mesh|rid|lc`` of an owned lifecycle -> the facts' loads of a unit from its
        #: hand, encoded once.
        self._hand_loads: dict[str, str] = {}
        #: The lifecycles scripts' shifts named, as sent -> as text, and their load key.
        self._lifecycles: dict[tuple[Any, Any, Any], tuple[tuple[str, str, str], str]] = {}

    async def bounded(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` under the deadline rule; map every Redis failure to a typed error."""
        caller = trio.current_effective_deadline()
        limit = trio.current_time() + self.timeout
        with trio.move_on_at(min(caller, limit)):
            try:
                return await call()
            except ReplyError as error:
                raise self._failed(what, error) from error
        if caller <= limit:
            raise self._late(what)
        raise self._unanswered(what, sent=True)

    def _late(self, what: str) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"{what}: the caller's deadline passed before Redis Cluster at {self.where} "
            "answered; a write in flight was abandoned, re-read before retrying")

    def _limits(self, what: str) -> Limits:
        """The caller's deadline and the store timeout's point in time for one call (the
        pipelines enforce them: no cancel scope on the way, as on one Redis)."""
        caller = trio.current_effective_deadline()
        now = trio.current_time()
        if caller <= now:  # the caller's time is up already: nothing is sent
            raise self._late(what)
        return caller, now + self.timeout

    def _failed(self, what: str, error: ReplyError) -> StoreUnavailable:
        return StoreUnavailable(
            f"{what}: Redis Cluster at {self.where} failed ({type(error).__name__}: {error}); "
            "the transaction did not complete, retry once the store is reachable")

    def _unanswered(self, what: str, *, sent: bool = False) -> StoreUnavailable:
        """A call given up at the store timeout: by the pipelines (``Expired``: nothing of
        it sent), or by :meth:`bounded` (``sent``: what it sent may have run)."""
        written = "" if sent else "nothing was written, "
        return StoreUnavailable(
            f"{what}: Redis Cluster at {self.where} did not answer within {self.timeout} s "
            f"(paused, overloaded, failing over or unreachable); {written}retry later")

    def _frame(self, name: str, keys: Sequence[str], argv: Sequence[str | int | bytes]) -> bytes:
        """``EVALSHA`` of script ``name`` on ``keys`` and ``argv``, encoded."""
        return encode_command(("EVALSHA", self._sha[name], len(keys), *keys, *argv))

    def _bucket_frame(self, name: str, bucket: _Bucket, keys: Sequence[str], facts: str,
                      args: Sequence[str | int | bytes]) -> bytes:
        """``EVALSHA`` of bucket script ``name``: :meth:`_frame` of ``keys`` and the
        bucket's own, then the head with ``facts``, the Relocation prefix and ``args``."""
        meta = bucket.meta
        return encode_command(("EVALSHA", self._sha[name], len(keys) + len(meta), *keys, *meta,
                               bucket.head + facts, self.prefixes[1], *args))

    async def _eval(self, name: str, keys: Sequence[str], argv: Sequence[str | int | bytes],
                    write: bool, limits: Limits | None = None) -> Any:
        return await self._send(name, hash_slot(keys[0]), self._frame(name, keys, argv),
                                write, limits)

    async def _send(self, name: str, slot: int, call: bytes, write: bool,
                    limits: Limits | None = None) -> Any:
        """Send script ``name``'s encoded ``call`` to ``slot``; load the script and send it
        again where the master does not hold it (``NOSCRIPT``: nothing ran)."""
        try:
            return await self.router.call(slot, call, write=write, limits=limits)
        except NoScriptError:
            await self.router.call(slot, encode_command(["SCRIPT", "LOAD", self._source[name]]),
                                   write=write, limits=limits)
            return await self.router.call(slot, call, write=write, limits=limits)

    async def _eval_read(self, args: Sequence[str], limits: Limits | None = None) -> Any:
        return await self.router.call(hash_slot(args[1]), encode_command(args), write=False,
                                      limits=limits)

    async def node(self, name: str, keys: Sequence[str], args: Sequence[str | int | bytes],
                   *, write: bool = True) -> Any:
        """Run node or hint script ``name`` (keys of one slot: the nodes slot, a reminder
        partition's) without the deadline wrapper."""
        if name in _CLAIM_CHANGES:
            self._recent = None
            self._claims_epoch += 1
            if name == "n_remove_dead":
                await self.flush()  # it reads the units this runner's shifts change
        return await self._eval(name, keys, args, write)

    async def _claims(self, recent: bool, limits: Limits) -> _Read:
        """Every claim: read at most :data:`FACTS_MAX_AGE` ago when ``recent``, else read
        now (one ``HGETALL``)."""
        now = trio.current_time()
        if recent and self._recent is not None and now - self._recent[0] < FACTS_MAX_AGE:
            return self._recent[1]
        read_at = (now, self._claims_epoch)
        return self._remember(read_at, await self._eval_read(["HGETALL", self._claims_key],
                                                             limits) or [])

    def script(self, what: str, name: str, keys: Sequence[str],
               args: Sequence[str | int | bytes], *, write: bool = True
               ) -> Coroutine[Any, Any, Any]:
        """Run bucket script ``name`` as one transaction (facts and shifts around it);
        await it for the script's reply.

        A script of :data:`_TAKES` takes its owner's capacity unit first (named in ``args``).
        The deadline rule is :meth:`bounded`'s, enforced by the pipelines: every command
        of the call shares the one store timeout. A plain function: when what the script
        needs is at hand (a unit in the hand, claims read recently), it returns the
        coroutine that sends it (one coroutine frame less on every suspension and
        resumption), else one that first fetches what it needs.
        """
        limits = self._limits(what)
        facts = _Facts()
        recent = name in _RECENT_FACTS
        if name in _TAKES:
            mesh, rid, lc = _TAKES[name]
            key = (text(args[mesh]), text(args[rid]), str(int(args[lc])))
            read, stale = self._recent_claims()  # (only an owned lifecycle has a hand)
            if read is None or not self._from_hand(facts, key, read):
                return self._fetched(what, name, keys, args, write, facts, recent, limits, key)
            beside = self._beside(key, stale)
            if beside is not None:
                return self._rounds_beside(what, name, keys, args, write, facts, True, limits,
                                           beside)
            return self._rounds(what, name, keys, args, write, facts, True, limits)
        if name in _PREFETCH:
            read, stale = self._recent_claims() if recent else (None, False)
            if read is None:
                return self._fetched(what, name, keys, args, write, facts, recent, limits)
            self._prefetched(facts, name, args, read)
            if stale:
                return self._rounds_beside(what, name, keys, args, write, facts, recent,
                                           limits, ("read", None))
        return self._rounds(what, name, keys, args, write, facts, recent, limits)

    async def _fetched(self, what: str, name: str, keys: Sequence[str],
                       args: Sequence[str | int | bytes], write: bool, facts: _Facts,
                       recent: bool, limits: Limits,
                       take: tuple[str, str, str] | None = None) -> Any:
        """:meth:`script` when what the script needs must be fetched first: a unit taken
        (or claims read) for a script of :data:`_TAKES`, the claims read for one of
        :data:`_PREFETCH`."""
        try:
            if take is not None:
                mesh, rid, lc = take
                if not self.counted or take not in self._owned:  # one unit, none ahead
                    await self._take(facts, mesh, rid, int(lc), limits)
                else:
                    recent, beside = await self._own_unit(facts, take, limits)
                    if beside is not None:
                        return await self._rounds_beside(what, name, keys, args, write, facts,
                                                         recent, limits, beside)
            else:
                self._prefetched(facts, name, args, await self._claims(False, limits))
        except Expired:
            raise self._unanswered(what) from None
        except ReplyError as error:
            raise self._failed(what, error) from error
        return await self._rounds(what, name, keys, args, write, facts, recent, limits)

    @staticmethod
    def _prefetched(facts: _Facts, name: str, args: Sequence[str | int | bytes],
                    read: _Read) -> None:
        facts.add_claims(read)
        for i in _PREFETCH[name]:
            facts.fetched[text(args[i])] = 1

    async def _rounds_beside(self, what: str, name: str, keys: Sequence[str],
                             args: Sequence[str | int | bytes], write: bool, facts: _Facts,
                             recent: bool, limits: Limits,
                             beside: tuple[str, tuple[str, str, str] | None]) -> Any:
        """:meth:`_rounds` with a take or a read of the claims sent beside the script."""
        sent = self._send_beside(*beside, limits[1])
        try:
            return await self._rounds(what, name, keys, args, write, facts, recent, limits)
        finally:
            if sent is not None:
                await self._answer_beside(sent, *beside)

    def _bucket_of(self, key: str) -> _Bucket:
        """The bucket of one of a bucket script's keys (built once per bucket; remembered
        per recent key)."""
        bucket = self._bucket_by_key.get(key)
        if bucket is None:
            tag = tag_of(key)
            bucket = self._buckets.get(tag)
            if bucket is None:
                bucket = self._buckets[tag] = _Bucket(self.keys, tag)
            if len(self._bucket_by_key) >= _KEYS_KNOWN:
                self._bucket_by_key.clear()
            self._bucket_by_key[key] = bucket
        return bucket

    async def _rounds(self, what: str, name: str, keys: Sequence[str],
                      args: Sequence[str | int | bytes], write: bool, facts: _Facts,
                      recent: bool, limits: Limits) -> Any:
        """Send the bucket script, answering its requests for facts and units, until it
        answers; settle its shifts. Should it fail or be cancelled, a unit taken for it
        stays taken (the script may have run: a lifecycle never counts too few units;
        docs/stores.md says what bounds the excess). Failures are mapped as
        :meth:`bounded` maps them."""
        try:
            bucket = self._bucket_of(keys[0])
            for _ in range(_FACT_ROUNDS):
                frame = self._bucket_frame(name, bucket, keys, facts.encode(), args)
                try:
                    reply = await self.router.call(bucket.slot, frame, write=write,
                                                   limits=limits)
                except NoScriptError:  # not loaded on that master: nothing ran
                    reply = await self._send(name, bucket.slot, frame, write, limits)
                status, shifts, unmarks = reply
                code = text(status[0]) if isinstance(status, list) and status else ""
                if recent and code in _FACT_REFUSALS:
                    recent = False  # decided on claims read earlier: read them again
                    fresh = _Facts()
                    fresh.add_claims(await self._claims(False, limits))
                    fresh.fetched.update(facts.fetched)  # absent now means gone
                    fresh.loads, fresh.taken = facts.loads, facts.taken
                    fresh.from_hand, fresh.loads_json = facts.from_hand, facts.loads_json
                    facts = fresh
                    continue
                if code == "FACTS":
                    facts.add_claims(await self._claims(False, limits))
                    facts.fetched[text(status[1])] = 1
                    continue
                if code == "TAKE":
                    mesh, rid, lc = (text(v) for v in status[1:4])
                    await self._take(facts, mesh, rid, int(lc), limits)
                    continue
                await self._settle(facts, shifts)
                if unmarks:
                    await self.drop_marks([(text(c), text(m)) for c, m in unmarks])
                return status
            await self._settle(facts, [])
            raise StoreUnavailable(f"the claims in Redis Cluster at {self.where} kept "
                                   "changing under the transaction; nothing was written, retry")
        except Expired:
            raise self._unanswered(what) from None
        except ReplyError as error:
            raise self._failed(what, error) from error

    def _recent_claims(self) -> tuple[_Read | None, bool]:
        """The claims read at most :data:`FACTS_MAX_AGE` ago (``None``: none), and whether
        to read them again beside the script that uses them (past half that age, no read
        in flight), so a steady stream of scripts never waits for a read of its own."""
        recent = self._recent
        if recent is None:
            return None, False
        age = trio.current_time() - recent[0]
        if age >= FACTS_MAX_AGE:
            return None, False
        return recent[1], age >= FACTS_MAX_AGE / 2 and not self._reading

    async def _own_unit(self, facts: _Facts, key: tuple[str, str, str], limits: Limits
                        ) -> tuple[bool, tuple[str, tuple[str, str, str] | None] | None]:
        """A unit of a lifecycle of this runner's when :meth:`script` found none at hand:
        from the hand once the claims were read again (one ``HGETALL``), else taken now
        with :data:`AHEAD` more (one ``n_take``; its claims are fresh). Returns whether
        the claims are a recent read, and what to send beside the script
        (:meth:`_beside`)."""
        read, stale = self._recent_claims()
        if read is None and self._hand.get(key, 0):
            read, stale = await self._claims(False, limits), False
        if read is not None and self._from_hand(facts, key, read):
            return False, self._beside(key, stale)
        ahead = key not in self._taking  # one take ahead at a time
        self._taking.add(key)
        try:
            # At capacity it takes none: the script refuses with the load it read.
            await self._take(facts, key[0], key[1], int(key[2]), limits,
                             AHEAD if ahead else 0)
        finally:
            if ahead:
                self._taking.discard(key)
        return False, None

    def _from_hand(self, facts: _Facts, key: tuple[str, str, str], read: _Read) -> bool:
        """Give the script a unit from the hand of lifecycle ``key`` with the claims
        ``read``, if the hand holds one (no round trip: capacity was checked when it was
        taken)."""
        hand = self._hand.get(key, 0)
        if not hand:
            return False
        self._hand[key] = hand - 1
        facts.from_hand = key
        facts.taken[key] = 1
        loads = "|".join(key)
        facts.loads[loads] = "0"
        facts.loads_json = self._hand_loads.get(loads) or self._hand_loads.setdefault(
            loads, json.dumps(facts.loads, separators=_COMPACT))
        facts.add_claims(read)
        facts.fetched[key[1]] = 1
        return True

    def _beside(self, key: tuple[str, str, str], stale: bool
                ) -> tuple[str, tuple[str, str, str] | None] | None:
        """What goes beside a script on a unit from ``key``'s hand: a take for more once
        the hand is low, a read of the claims as they age, or nothing."""
        if self._hand.get(key, 0) <= _REFILL_AT and key not in self._taking:
            return "take", key
        return ("read", None) if stale and not self._reading else None

    def _send_beside(self, kind: str, key: tuple[str, str, str] | None, expires: float
                     ) -> _Beside | None:
        """Queue a take for :data:`AHEAD` units of ``key`` (``"take"``: all of them or
        none) or a read of the claims (``"read"``) now, to go out with the script (one
        round trip for both); ``None`` when it could not be queued."""
        read_at = (trio.current_time(), self._claims_epoch)
        if kind == "take":
            assert key is not None
            mesh, rid, lc = key
            frame = self._frame("n_take", [self._claims_key, self.keys.load(
                mesh, rid, int(lc))], [claim_field(mesh, rid), lc, str(AHEAD), "0"])  # type: ignore[arg-type]
        else:
            frame = encode_command(["HGETALL", self._claims_key])
        try:
            sent = self.router.submit(hash_slot(self._claims_key), frame, expires=expires)
        except StoreUnavailable:  # the store is closing: nothing was queued
            return None
        if sent is None:
            return None
        if kind == "take":
            self._taking.add(key)  # type: ignore[arg-type]
        else:
            self._reading = True
        return sent, read_at

    async def _answer_beside(self, sent: _Beside, kind: str,
                             key: tuple[str, str, str] | None) -> None:
        """Read the answer of what went beside the script (shielded; the pipeline answers
        it by the store timeout): its units go into the hand, its claims are the recent
        read. It never raises: one that fails changes nothing here (a take that ran
        unanswered leaves its lifecycle counting units too many, never too few), and the
        script's own outcome is the caller's."""
        (pipeline, item), read_at = sent
        try:
            # The pipeline's watchdog answers it at the store timeout (its ``expires``);
            # this scope is only the backstop, late enough never to race the watchdog.
            with trio.CancelScope(shield=True), trio.move_on_after(2 * self.timeout):
                reply = await pipeline.answer(item)
                if kind == "take":
                    assert key is not None
                    took, _, flat = reply
                    self._hand[key] = self._hand.get(key, 0) + int(took)
                else:
                    flat = reply
                self._remember(read_at, flat or [])
        except Exception:  # whatever failed, the script's outcome stands
            pass
        finally:
            if kind == "take":
                self._taking.discard(key)
            else:
                self._reading = False

    def _remember(self, read_at: tuple[float, int], flat: Sequence[Any]) -> _Read:
        """Make ``flat`` (every claim, as read from ``read_at``: the time and claims epoch
        its command was sent at) the recent read -- unless a newer one is there already,
        or a claim was added or removed through this runner since it was sent."""
        when, epoch = read_at
        recent = self._recent
        read = recent[1] if recent is not None and recent[1].flat == flat else _Read(flat)
        if epoch == self._claims_epoch and (recent is None or recent[0] <= when):
            self._recent = (when, read)
        return read

    async def _take(self, facts: _Facts, mesh: str, rid: str, lc: int,
                    limits: Limits, ahead: int = 0) -> None:
        """Take a unit of a lifecycle for this call (``n_take``), with ``ahead`` more for
        the hand where there is room for them (``lua``)."""
        key = self.keys.load(mesh, rid, lc)  # type: ignore[arg-type]
        read_at = (trio.current_time(), self._claims_epoch)
        took, load, flat = await self._eval("n_take", [self._claims_key, key],
                                            [claim_field(mesh, rid), str(lc), str(ahead), "1"],
                                            True, limits)
        facts.add_claims(self._remember(read_at, flat))
        facts.fetched[rid] = 1
        facts.loads[f"{mesh}|{rid}|{lc}"] = text(load)
        facts.loads_json = None
        if int(took):
            facts.taken[mesh, rid, str(lc)] = 1
            if int(took) > 1:
                own = (mesh, rid, str(lc))
                self._hand[own] = self._hand.get(own, 0) + int(took) - 1

    async def _settle(self, facts: _Facts, shifts: Sequence[Any]) -> None:
        """Apply the script's load shifts and give back unused units (shielded); shifts
        that change no lifecycle's total wait (see the module docstring)."""
        if not shifts and not facts.taken:
            return
        taken = dict(facts.taken)
        totals: dict[str, int] = {}
        for shift in shifts or ():
            lifecycle, key = self._lifecycle(shift)
            field, delta = text(shift[3]), int(shift[4])
            if delta == 1 and field == "pending" and taken.pop(lifecycle, 0):
                continue  # the unit taken before the script
            self._backlog[key, field] = self._backlog.get((key, field), 0) + delta
            totals[key] = totals.get(key, 0) + delta
        own = facts.from_hand
        if own is not None and taken.pop(own, 0):
            self._hand[own] = self._hand.get(own, 0) + 1  # not used: back in the hand
        for mesh, rid, lc in taken:
            key = self.keys.load(mesh, rid, int(lc))  # type: ignore[arg-type]
            self._backlog[key, "pending"] = self._backlog.get((key, "pending"), 0) - 1
            totals[key] = totals.get(key, 0) - 1
        if any(totals.values()):
            await self.flush()

    def _lifecycle(self, shift: Sequence[Any]) -> tuple[tuple[str, str, str], str]:
        """The lifecycle a script's shift names (its first three values) and its load key
        (remembered per lifecycle: a node's shifts name few)."""
        raw = (shift[0], shift[1], shift[2])
        known = self._lifecycles.get(raw)
        if known is None:
            if len(self._lifecycles) >= _LIFECYCLES_KNOWN:
                self._lifecycles.clear()
            mesh, rid, lc = (text(v) for v in raw)
            known = self._lifecycles[raw] = (
                (mesh, rid, lc), self.keys.load(mesh, rid, int(lc)))  # type: ignore[arg-type]
        return known

    def own(self, mesh: str, node_rid: object, lifecycle_generation: int) -> None:
        """Record a lifecycle claimed through this runner (``location.new_claim``): its
        Reserves take units ahead (when the deployment counts them, :attr:`counted`)."""
        self._owned.add((mesh, str(node_rid), str(lifecycle_generation)))

    async def disown(self, mesh: str, node_rid: object, lifecycle_generation: int) -> None:
        """A lifecycle of this runner's ended (its claim removed): give back its units in
        hand now (shielded, bounded), take none for it any more."""
        key = (mesh, str(node_rid), str(lifecycle_generation))
        self._owned.discard(key)
        self._hand_loads.pop("|".join(key), None)
        self._give_back(key)
        await self.flush()

    def _give_back(self, key: tuple[str, str, str]) -> None:
        units = self._hand.pop(key, 0)
        if units:
            load = self.keys.load(key[0], key[1], int(key[2]))  # type: ignore[arg-type]
            self._backlog[load, "pending"] = self._backlog.get((load, "pending"), 0) - units

    def in_hand(self, mesh: str, node_rid: object, lifecycle_generation: int) -> int:
        """The units of a lifecycle this runner took ahead and has not used yet (they
        count as ``pending`` in the nodes slot)."""
        return self._hand.get((mesh, str(node_rid), str(lifecycle_generation)), 0)

    async def close(self) -> None:
        """Give back every unit in hand and apply the shifts still waiting (:meth:`flush`):
        the store's close."""
        for key in list(self._hand):
            self._give_back(key)
        await self.flush()

    async def flush(self) -> None:
        """Apply every load shift not applied yet in one ``n_shift`` (shielded from the
        caller's cancellation, bounded by the store timeout). One that fails stays for the
        next (never lost silently here)."""
        moves = [(key, field, delta) for (key, field), delta in self._backlog.items() if delta]
        self._backlog = {}
        if not moves:
            return
        args: list[str | int] = []
        for _, field, change in moves:
            args += [field, change]
        with trio.CancelScope(shield=True), trio.move_on_after(self.timeout):
            try:
                await self._eval("n_shift", [k for k, _, _ in moves], args, True)
                return
            except (StoreUnavailable, ReplyError):
                pass
        for key, field, change in moves:
            self._backlog[key, field] = self._backlog.get((key, field), 0) + change

    async def drop_marks(self, marks: Sequence[tuple[str, str]]) -> None:
        """Drop member ``marks`` (container, mark), each in its container's bucket
        (shielded, bounded): those a script handed back, or a refused join's. One that
        fails stays: a stale mark, which BeginClose drops once it finds no member behind
        it (``membership``)."""
        by_key: dict[str, list[str]] = {}
        for container, mark in marks:
            by_key.setdefault(self.keys.members(container), []).append(mark)
        with trio.CancelScope(shield=True), trio.move_on_after(self.timeout):
            for key, members in by_key.items():
                with contextlib.suppress(StoreUnavailable, ReplyError):
                    await self.router.call(hash_slot(key),
                                           encode_command(["SREM", key, *members]), write=True)

    async def command(self, what: str, args: Sequence[str | int | bytes]) -> Any:
        """Run one read command on the key ``args[1]`` and return its raw RESP2 reply."""
        frame = encode_command(args)
        key = args[1]
        slot = hash_slot(key if isinstance(key, str | bytes) else str(key))
        limits = self._limits(what)
        try:
            return await self.router.call(slot, frame, write=False, limits=limits)
        except Expired:
            raise self._unanswered(what) from None
        except ReplyError as error:
            raise self._failed(what, error) from error
