"""Reads over many slots on Redis Cluster: one script per master, not one call per slot.

Theory of operation
-------------------
Query and the statistics read every bucket. One call per bucket is 1024 pipeline items
at the default bucket count, and each costs the client about 0.1 ms of CPU, so a
statistics call took 150 ms of CPU and a Query page 100 ms. A master serves many
buckets, so a sweep sends each master **one read-only script** over the keys of every
bucket the slot map places there, returning each bucket's part in order. Redis refuses
declared keys of several slots (``CROSSSLOT``) whatever the flags, so these scripts
declare none and get the key names as arguments, under ``allow-cross-slot-keys``
(Redis 7; the backend's scripts already need it for ``no-writes``): Redis then checks
each key the script touches against its own node -- a key of a slot this master does
not serve, or of a slot it is migrating away without the key, fails the script. Each
bucket's part is what its own call would return, and it is read atomically (the whole
master's part is).

So a stale slot map or a running migration makes the script fail, with nothing
written (it is ``no-writes``), and that master's group falls back to one call per
bucket with its keys declared, as every other call does; those follow ``MOVED`` /
``ASK`` / ``TRYAGAIN`` (``router``). A bucket whose slot has no master in the map yet
goes the per-bucket way too. Only reads are swept: a write stays one bucket's
transaction, its keys declared.

The same holds for any set of parts that each live in one slot: a take of due reminders
reads the due hints of its reminder partitions (``{rp<p>}``, ``reminders``) one script per
master the same way -- three scripts a take on three masters, not 64.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from zlink_trio.store.redis.client import script_sha
from zlink_trio.store.redis.lua.authority import AUTHORITY_LUA
from zlink_trio.store.redis.resp import NoScriptError, ReplyError, encode_command
from zlink_trio.store.redis_cluster.keys import hash_slot

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from zlink_trio.store.redis_cluster.router import Address, Router

__all__ = ("LISTING", "STATISTICS", "TOTALS", "Sweep", "gather")

_FLAGS: Final = "#!lua flags=no-writes,allow-cross-slot-keys\n"
#: The statistics sweeps name the stored states as the SpotAuthority chart's Lua does.
_STATES: Final = _FLAGS + AUTHORITY_LUA

#: ARGV: per bucket its counts, gen and Relocation stats keys. Per bucket (in order)
#: what ``bucket_statistics`` returns: counts, last generation, Relocation counts.
STATISTICS: Final = _STATES + r"""
local out = {}
for i = 1, #ARGV, 3 do
  out[#out + 1] = {
    redis.call('HMGET', ARGV[i], ST_CREATING, ST_READY, ST_CLOSING, ST_RELOCATING, ST_SEALED,
               ST_RELAY_READY),
    redis.call('GET', ARGV[i + 1]) or false,
    redis.call('HMGET', ARGV[i + 2], 'roots', 'root_bytes', 'inboxes', 'inbox_records')}
end
return out
"""

#: ARGV: as for STATISTICS. The master's part summed: {location counts (6), Relocation
#: counts (4), every bucket's last generation that is set}. Generations stay strings
#: (63-bit; Lua numbers are doubles); counts are far below 2^53.
TOTALS: Final = _STATES + r"""
local loc, rel, gens = {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0}, {}
for i = 1, #ARGV, 3 do
  local c = redis.call('HMGET', ARGV[i], ST_CREATING, ST_READY, ST_CLOSING, ST_RELOCATING,
                       ST_SEALED, ST_RELAY_READY)
  for j = 1, 6 do loc[j] = loc[j] + (tonumber(c[j]) or 0) end
  local g = redis.call('GET', ARGV[i + 1])
  if g then gens[#gens + 1] = g end
  local r = redis.call('HMGET', ARGV[i + 2], 'roots', 'root_bytes', 'inboxes', 'inbox_records')
  for j = 1, 4 do rel[j] = rel[j] + (tonumber(r[j]) or 0) end
end
return {loc, rel, gens}
"""

#: ARGV: low bound, count, then each bucket's ids key. The next IDs of every bucket, in
#: one list (the caller merges them all in order anyway).
LISTING: Final = _FLAGS + r"""
local out = {}
for i = 3, #ARGV do
  for _, id in ipairs(redis.call('ZRANGEBYLEX', ARGV[i], ARGV[1], '+', 'LIMIT', 0,
                                 ARGV[2])) do
    out[#out + 1] = id
  end
end
return out
"""


async def gather(calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
    """Run ``calls`` concurrently (they share the pipelines' round trips); their results."""
    results: list[Any] = [None] * len(calls)

    async def one(i: int) -> None:
        results[i] = await calls[i]()

    async with trio.open_nursery() as nursery:
        for i in range(len(calls)):
            nursery.start_soon(one, i)
    return results


class Sweep:
    """Reads over parts that each live in one slot (the buckets, or the reminder
    partitions), grouped by master (theory above)."""

    def __init__(self, router: Router, tags: Sequence[str]) -> None:
        self._router = router
        self._buckets = len(tags)
        #: The hash slot of each part (fixed: the slot of its hash tag, ``b<k>``, ``rp<p>``).
        self._slots = [hash_slot(tag) for tag in tags]
        #: Per script and variant, each part's key names, built once (``keys`` never
        #: changes for them).
        self._keys: dict[tuple[str, str], list[Sequence[str]]] = {}
        #: The groups of the slot map as it was at ``router.version``, and per script,
        #: variant and group its key names encoded (RESP, no array header), built once.
        self._groups: tuple[int, dict[Address, tuple[int, ...]], list[int]] | None = None
        self._frames: dict[tuple[str, str, tuple[int, ...]], tuple[int, bytes]] = {}
        #: The SHA-1 of each script source, computed at its first use.
        self._sha: dict[str, str] = {}
        #: Groups sent / groups that fell back to one call per part (tests read them).
        self.grouped = self.fell_back = 0

    async def each(self, source: str, keys: Callable[[int], Sequence[str]],
                   args: Sequence[str | int], one: Callable[[int], Awaitable[Any]]
                   ) -> list[Any]:
        """Every bucket's part (see :meth:`parts`)."""
        parts, _ = await self.parts(source, keys, args, one)
        return parts

    async def parts(self, source: str, keys: Callable[[int], Sequence[str]],
                    args: Sequence[str | int], one: Callable[[int], Awaitable[Any]], *,
                    whole: bool = False, only: Sequence[int] | None = None,
                    variant: str = "") -> tuple[list[Any], list[Any]]:
        """Every part's answer, in part order: script ``source`` once per master with
        ``args`` then ``keys(b)`` of each of its parts, or ``one(b)`` per part where
        that cannot run. ``keys`` must be the same function of ``b`` at every call with
        this ``source`` and ``variant`` (its results are kept); a caller whose key names
        depend on a value (a Mesh) passes it as ``variant``.

        ``only``: read just these parts (the others' answers are ``None``).
        With ``whole``, a master's script answers for all of its parts at once (a
        summary): those answers come second, and only the parts that fell back
        (``one(b)``) are in the first list (the others are ``None``).

        Not bounded here: the caller's per-part calls are, and the caller bounds the
        whole (``ClusterRunner.bounded``)."""
        per_bucket = self._keys.get((source, variant))
        if per_bucket is None:
            if len(self._keys) > 64:  # variants no longer read
                self._keys.clear()
            per_bucket = self._keys[source, variant] = [keys(b) for b in range(self._buckets)]
        groups, alone = self._grouping()
        if only is not None:
            wanted = set(only)
            groups = {a: kept for a, m in groups.items()
                      if (kept := tuple(b for b in m if b in wanted))}
            alone = [b for b in alone if b in wanted]
        parts: list[Any] = [None] * self._buckets

        def by_bucket(b: int) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                parts[b] = await one(b)
            return run

        def by_master(address: Address, members: tuple[int, ...]
                      ) -> Callable[[], Awaitable[None]]:
            async def run() -> None:
                named = self._frames.get((source, variant, members))
                if named is None:
                    names = [k for b in members for k in per_bucket[b]]
                    named = (len(names), encode_command(names).split(b"\r\n", 1)[1])
                    if len(self._frames) > 256:  # variants or groups no longer read
                        self._frames.clear()
                    self._frames[source, variant, members] = named
                try:
                    replies = await self._script(address, source, named, args)
                except ReplyError:  # a key not served here (now): nothing written
                    self.fell_back += 1
                    await gather([by_bucket(b) for b in members])
                    return
                self.grouped += 1
                if whole:
                    summaries.append(replies)
                    return
                for b, part in zip(members, replies, strict=True):
                    parts[b] = part
            return run

        summaries: list[Any] = []
        await gather([*(by_master(a, m) for a, m in groups.items()),
                      *(by_bucket(b) for b in alone)])
        return parts, summaries

    def _grouping(self) -> tuple[dict[Address, tuple[int, ...]], list[int]]:
        """The buckets of each master in the slot map (cached per map version); the
        buckets whose slot has no master in it yet."""
        version = self._router.version
        if self._groups is not None and self._groups[0] == version:
            return self._groups[1], self._groups[2]
        groups: dict[Address, list[int]] = {}
        alone: list[int] = []
        master_of = self._router.master_of
        for b, slot in enumerate(self._slots):
            address = master_of(slot)
            if address is None:
                alone.append(b)
            else:
                groups.setdefault(address, []).append(b)
        fixed = {a: tuple(m) for a, m in groups.items()}
        if not alone:  # a map with holes is being read again: do not keep it
            self._groups = (version, fixed, alone)
        self._frames.clear()  # the groups of the old map
        return fixed, alone

    async def _script(self, address: Address, source: str, named: tuple[int, bytes],
                      args: Sequence[str | int]) -> Any:
        count, names = named
        sha = self._sha.get(source)
        if sha is None:
            sha = self._sha[source] = script_sha(source)
        head = encode_command(["EVALSHA", sha, 0, *args])
        frame = b"*%d\r\n" % (3 + len(args) + count) + head.split(b"\r\n", 1)[1] + names
        try:
            return await self._router.call_master(address, frame)
        except NoScriptError:
            await self._router.call_master(address, encode_command(["SCRIPT", "LOAD", source]))
            return await self._router.call_master(address, frame)
