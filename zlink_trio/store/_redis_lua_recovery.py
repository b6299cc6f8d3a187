"""Startup recovery on Redis: the ``orphans`` read and the ``adopt_orphan`` script.

Theory of operation
-------------------
Same conventions as ``_redis_lua`` (its prelude, checks before the first write,
a status table back); the oracle is ``_recovery_state``.

- ``recovery_adopt_orphan`` re-implements ``txn_adopt_orphan`` check for check.
  The owner generation plus one travels as a decimal string from Python, so
  the idempotence check never does 63-bit arithmetic in Lua's doubles.
- ``recovery_orphans`` is read-only: it walks the store-wide sorted set of Spot
  IDs (``meta:{m}:ids``) from ``after`` for at most ``budget`` IDs, reads only
  the owner/state/pointer fields of each, and returns the full records of the
  orphans owned by one of the given dead lifecycles. Python finds those
  lifecycles first (the ``descriptors`` script lists every claim, live or not)
  and calls the page script until it has ``limit`` orphans or the IDs are
  exhausted. Cost: O(all Spot IDs in the store) per full listing, in pages of
  :data:`SCAN_BUDGET` IDs, each page one short atomic script (the server is not
  blocked for long); the listing as a whole is not one snapshot, which is fine
  for a startup scan because an orphan of a dead lifecycle only ever changes by
  this node's own adoption or abort. A per-node index would make it O(orphans)
  but would have to be kept by Reserve, CommitReady and every state change --
  left for later (docs/stores.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from zlink_trio.core.errors import InvalidOperation, StaleFence, Unavailable
from zlink_trio.store._redis_codec import decode_claim, decode_record, raise_status, text
from zlink_trio.store._redis_lua import _script
from zlink_trio.store.rules.recovery import check_adopt_args, check_orphans_args

if TYPE_CHECKING:
    from collections.abc import Sequence

    from zlink_trio.core.records import AuthorityRecord, OwnerFence
    from zlink_trio.store._redis_client import ScriptRunner
    from zlink_trio.store._redis_codec import Keys

__all__ = ("RECOVERY_SCRIPTS", "SCAN_BUDGET", "redis_adopt_orphan", "redis_orphans")

#: Spot IDs one ``recovery_orphans`` page script examines at most.
SCAN_BUDGET: Final = 1000

# KEYS: spot key. ARGV: P, gen, ogen, old rid, old lc, new rid, new lc, now, ogen + 1.
_ADOPT_ORPHAN: Final = r"""
local gen, ogen, orid, olc, nrid, nlc, now, next_ogen =
  ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9]
local r = rec(KEYS[1])
if r == nil then return {'GONE', ''} end
if r.gen ~= gen then return {'GONE', r.gen} end
local orphan = r.state == 'creating' or (r.state == 'ready' and r.pr ~= nil)
if r.orid == nrid and r.olc == nlc and r.ogen == next_ogen and orphan then
  return reply(KEYS[1])
end
if r.orid ~= orid or r.olc ~= olc or r.ogen ~= ogen then return stale(KEYS[1]) end
if not orphan then return {'ADOPT', 'not_orphan', r.state} end
if orid == nrid and olc == nlc then return {'ADOPT', 'same_owner', ''} end
local oc = rec(claim_key(r.mesh, orid))
if oc == nil or oc.lc ~= olc then return {'ADOPT', 'old_claim_gone', orid} end
if tonumber(now) < tonumber(oc.exp) then return {'OLD_LIVE', orid, olc, oc.exp} end
local nc, err = owner_claim(r.mesh, nrid, nlc, now)
if err then return err end
if nc.node ~= oc.node then return {'ADOPT', 'other_node', nc.node} end
if not serves(r.mesh, nrid, r.type, r.kind) then return {'NOT_SERVED', nrid, r.type, r.kind} end
if r.ogen == MAXGEN or r.ver == MAXGEN then return {'SPENT'} end
-- writes
redis.call('HSET', KEYS[1], 'orid', nrid, 'olc', nlc)
redis.call('HINCRBY', KEYS[1], 'ogen', 1)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
local field = 'active'
if r.state == 'creating' then field = 'pending' end
shift(load_key(r.mesh, orid, olc), field, -1)
shift(load_key(r.mesh, nrid, nlc), field, 1)
return reply(KEYS[1])
"""

# KEYS: the ids index. ARGV: P, after ('' = from the start), budget, limit, then
# (rid, lc) pairs of the dead lifecycles. Returns {last id examined, done, records...}.
_ORPHANS: Final = r"""#!lua flags=no-writes
local lo = '-'
if ARGV[2] ~= '' then lo = '(' .. ARGV[2] end
local budget, limit = tonumber(ARGV[3]), tonumber(ARGV[4])
local owners = {}
for i = 5, #ARGV, 2 do owners[ARGV[i] .. '/' .. ARGV[i + 1]] = true end
local ids = redis.call('ZRANGEBYLEX', META .. 'ids', lo, '+', 'LIMIT', 0, budget)
local out = {'', 0}
local full = false
for _, id in ipairs(ids) do
  out[1] = id
  local v = redis.call('HMGET', spot_key(id), 'orid', 'olc', 'state', 'pr')
  if owners[(v[1] or '') .. '/' .. (v[2] or '')]
      and (v[3] == 'creating' or (v[3] == 'ready' and v[4])) then
    out[#out + 1] = redis.call('HGETALL', spot_key(id))
    if #out - 2 >= limit then full = true break end
  end
end
if not full and #ids < budget then out[2] = 1 end
return out
"""

#: Name -> full Lua source (registered on the Location Store's runner).
RECOVERY_SCRIPTS: Final = {
    "recovery_adopt_orphan": _script(_ADOPT_ORPHAN),
    "recovery_orphans": _script(_ORPHANS),
}

_ADOPT_REFUSALS: Final = {
    "not_orphan": "it is not an incomplete activation (Creating, or Ready with a recovery "
                  "pointer); a steady Ready owner is released by an operator, never taken over",
    "same_owner": "the new owner is the old owner",
    "old_claim_gone": "the claim of its previous owner is gone, so its NodeId cannot be "
                      "proved; an operator must release the Spot",
    "other_node": "it belongs to another NodeId (no takeover by another node)",
}


def _seq(value: object) -> Sequence[Any]:
    assert isinstance(value, list), value
    return value


async def redis_orphans(runner: ScriptRunner, keys: Keys, node_id: str, *, now: float,
                        after: str | None, limit: int) -> list[AuthorityRecord]:
    """``LocationStore.orphans`` on Redis (see the module docstring for the cost)."""
    check_orphans_args(node_id, now=now, after=after, limit=limit)
    claims = [decode_claim(values) for values in _seq(await runner.script(
        "orphans (claims)", "descriptors", [keys.meta("claims")], [keys.location],
        write=False))]
    owners: list[str | int] = []
    for claim in claims:
        if claim.descriptor.node_id == node_id and not claim.is_live(now):
            owners += [str(claim.descriptor.node_rid), str(claim.lifecycle_generation)]
    if not owners:
        return []
    found: list[AuthorityRecord] = []
    cursor = after or ""
    while len(found) < limit:
        reply = _seq(await runner.script(
            f"orphans of NodeId {node_id!r}", "recovery_orphans", [keys.meta("ids")],
            [keys.location, cursor, SCAN_BUDGET, limit - len(found), *owners], write=False))
        found += [decode_record(flat) for flat in reply[2:]]
        cursor = text(reply[0])
        if int(reply[1]) == 1 or not cursor:
            break
    return found


async def redis_adopt_orphan(runner: ScriptRunner, keys: Keys, spot_id: str, *,
                             object_generation: int, owner_generation: int,
                             old_owner: OwnerFence, new_owner: OwnerFence,
                             now: float) -> AuthorityRecord:
    """``LocationStore.adopt_orphan`` on Redis: one script."""
    check_adopt_args(spot_id, object_generation=object_generation,
                     owner_generation=owner_generation, old_owner=old_owner,
                     new_owner=new_owner, now=now)
    what = f"adopt_orphan of {spot_id!r}"
    reply = _seq(await runner.script(
        what, "recovery_adopt_orphan", [keys.spot(spot_id)],
        [keys.location, object_generation, owner_generation, str(old_owner.node_rid),
         old_owner.lifecycle_generation, str(new_owner.node_rid),
         new_owner.lifecycle_generation, repr(float(now)), str(owner_generation + 1)]))
    code = text(reply[0])
    if code == "GONE":
        raise StaleFence(f"{what}: generation {object_generation} is gone (now "
                         f"{text(reply[1]) or 'Missing'}); nothing to adopt")
    if code == "ADOPT":
        raise InvalidOperation(f"{what}: {_ADOPT_REFUSALS.get(text(reply[1]), text(reply[1]))}")
    if code == "OLD_LIVE":
        raise Unavailable(f"{what}: the previous owner {text(reply[1])} lifecycle "
                          f"{text(reply[2])} still holds a live lease (until "
                          f"{text(reply[3])}); retry after it expires")
    raise_status(reply, what)
    return decode_record(reply[1])
