"""Startup recovery on Redis: the ``adopt_orphan`` script and the ``orphans`` page script.

Theory of operation
-------------------
Same conventions as ``location`` (the prelude, checks before the first write, a
status table back); the oracle is ``store.rules.recovery``, the Python that calls
these scripts is ``redis.recovery``.

- ``recovery_adopt_orphan`` re-implements ``txn_adopt_orphan`` check for check.
  The owner generation plus one travels as a decimal string from Python, so
  the idempotence check never does 63-bit arithmetic in Lua's doubles.
- ``recovery_orphans`` is read-only: it walks the store-wide sorted set of Spot
  IDs (``meta:{m}:ids``) from ``after`` for at most ``budget`` IDs, reads only
  the owner/state/pointer fields of each, and returns the full records of the
  orphans owned by one of the given dead lifecycles.
"""

from __future__ import annotations

from typing import Final

__all__ = ("RECOVERY_BODIES",)

# KEYS: spot key. ARGV: P, R, gen, ogen, old rid, old lc, new rid, new lc, now, ogen + 1.
_ADOPT_ORPHAN: Final = r"""
local gen, ogen, orid, olc, nrid, nlc, now, next_ogen =
  ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local r = rec(KEYS[1])
if r == nil then return {'GONE', ''} end
if r.gen ~= gen then return {'GONE', r.gen} end
local orphan = r.state == ST_CREATING or (r.state == ST_READY and r.pr ~= nil)
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
if r.state == ST_CREATING then field = 'pending' end
shift(load_key(r.mesh, orid, olc), field, -1)
shift(load_key(r.mesh, nrid, nlc), field, 1)
return reply(KEYS[1])
"""

# KEYS: the ids index. ARGV: P, R, after ('' = from the start), budget, limit, mode
# ('orphans': incomplete activations; 'owned': every non-Entry record, and every
# RelayReady record moving toward one of them), then (rid, lc) pairs of the dead
# lifecycles. Returns {last id examined, done, records...}.
_ORPHANS: Final = r"""#!lua flags=no-writes
local lo = '-'
if ARGV[3] ~= '' then lo = '(' .. ARGV[3] end
local budget, limit, every = tonumber(ARGV[4]), tonumber(ARGV[5]), ARGV[6] == 'owned'
local owners = {}
for i = 7, #ARGV, 2 do owners[ARGV[i] .. '/' .. ARGV[i + 1]] = true end
local ids = redis.call('ZRANGEBYLEX', META .. 'ids', lo, '+', 'LIMIT', 0, budget)
local out = {'', 0}
local full = false
for _, id in ipairs(ids) do
  out[1] = id
  local v = redis.call('HMGET', spot_key(id), 'orid', 'olc', 'state', 'pr', 'kind', 'trid',
                      'tlc')
  local toward_dead = every and v[3] == ST_RELAY_READY
    and owners[(v[6] or '') .. '/' .. (v[7] or '')]
  if toward_dead or owners[(v[1] or '') .. '/' .. (v[2] or '')] and (
      (every and v[5] ~= 'entry')
      or (not every and (v[3] == ST_CREATING or (v[3] == ST_READY and v[4])))) then
    out[#out + 1] = redis.call('HGETALL', spot_key(id))
    if #out - 2 >= limit then full = true break end
  end
end
if not full and #ids < budget then out[2] = 1 end
return out
"""

#: Name -> Lua body (``prelude.script`` adds the prelude; registered beside the Location
#: Store's scripts).
RECOVERY_BODIES: Final = {
    "recovery_adopt_orphan": _ADOPT_ORPHAN,
    "recovery_orphans": _ORPHANS,
}
