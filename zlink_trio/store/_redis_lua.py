"""The Location Store's transactions as Lua scripts (one script per transaction).

Theory of operation
-------------------
Each script re-implements one ``txn_*`` function of ``_location_state`` /
``_claim_state`` / ``_relocation_steps`` (the oracle): the same checks in the
same order, **every read and comparison before the first write**, because
Redis runs a script atomically but has no rollback. A refused script returns
``{code, detail...}`` and has written nothing; ``_redis_codec.raise_status``
turns the code into the oracle's typed error. A successful one returns
``{"OK", ...}``, usually with the record as ``HGETALL`` gives it.

Conventions shared by every script (see ``_redis_codec`` for the key layout):

- ``ARGV[1]`` is the Location key prefix (``<prefix>:loc:``); the script builds
  node and index keys from it, ``KEYS[1]`` is the key the call is about.
- Counters (ObjectGeneration, lifecycle, owner generation, StoreVersion) are
  written only by ``INCR``/``HINCRBY`` and compared as decimal *strings*, so
  63-bit values never pass through Lua's doubles. Before an increment the
  script checks the counter is below 2**63-1, so ``HINCRBY`` cannot fail
  half-way through the writes.
- Lease expiries are the caller's float ``repr``; only ``<`` compares them.
- Read-only scripts carry ``#!lua flags=no-writes`` so they still run while
  the server refuses writes (``CLIENT PAUSE ... WRITE``, a read-only replica).

The ObjectGeneration sequence is one store-wide counter (``meta:{m}:seq``): see
``docs/decisions.md`` ("ObjectGeneration on Redis") for why, and
``docs/stores.md`` for what it means on Redis Cluster.
"""

from __future__ import annotations

from typing import Final

from zlink_trio.store._redis_lua_operator import RELEASE_EXPIRED

__all__ = ("LOCATION_SCRIPTS", "PRELUDE")

_PRELUDE: Final = r"""
local P = ARGV[1]
local MAXGEN = '9223372036854775807'
local META = P .. 'meta:{m}:'
local function rec(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end
local function spot_key(id) return P .. 'spot:{' .. id .. '}' end
local function claim_key(mesh, rid) return P .. 'node:{' .. rid .. '}:claim:' .. mesh end
local function load_key(mesh, rid, lc)
  return P .. 'node:{' .. rid .. '}:load:' .. lc .. ':' .. mesh
end
local function shift(key, field, delta)
  if redis.call('HINCRBY', key, field, delta) == 0 then redis.call('HDEL', key, field) end
end
local function count(state, delta) shift(META .. 'counts', state, delta) end
local function reply(key) return {'OK', redis.call('HGETALL', key)} end
local function stale(key) return {'STALE', redis.call('HGETALL', key)} end
-- check_owner: the live claim of (mesh, rid) with lifecycle lc, or an error reply.
local function owner_claim(mesh, rid, lc, now)
  local c = rec(claim_key(mesh, rid))
  if c == nil or c.lc ~= lc then return nil, {'STALE_OWNER', rid, lc, mesh} end
  if not (tonumber(now) < tonumber(c.exp)) then return nil, {'EXPIRED', rid, lc, c.exp} end
  return c
end
local function load_of(mesh, rid, lc)
  local v = redis.call('HMGET', load_key(mesh, rid, lc), 'pending', 'active')
  return (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0)
end
local function serves(mesh, rid, stype, kind)
  return redis.call('HGET', claim_key(mesh, rid), 'serves:' .. stype) == kind
end
local function fenced(r, gen, ogen, rid, lc)
  return r ~= nil and r.gen == gen and r.ogen == ogen and r.orid == rid and r.olc == lc
end
local function drop_record(r)
  redis.call('DEL', spot_key(r.id))
  redis.call('ZREM', META .. 'ids', r.id)
  count(r.state, -1)
end
local function next_gen()
  local seq = redis.call('GET', META .. 'seq')
  if seq == MAXGEN then return nil end
  return true
end
local function issue_gen()
  redis.call('INCR', META .. 'seq')
  return redis.call('GET', META .. 'seq')
end
-- Reserve (Missing -> Creating) of KEYS[1]: ARGV[o..o+6] are id, kind, stable type,
-- mesh, rid, lc, now; ARGV[first..] the record's extra field/value pairs. Every check
-- before the first write. Returns nil, generation, lease expiry -- or an error reply.
local function reserve_spot(o, first)
  local id, kind, stype, mesh, rid, lc, now =
    ARGV[o], ARGV[o + 1], ARGV[o + 2], ARGV[o + 3], ARGV[o + 4], ARGV[o + 5], ARGV[o + 6]
  local cur = redis.call('HGETALL', KEYS[1])
  if #cur > 0 then return {'EXISTS', cur} end
  local c, err = owner_claim(mesh, rid, lc, now)
  if err then return err end
  if not serves(mesh, rid, stype, kind) then return {'NOT_SERVED', rid, stype, kind} end
  local load = load_of(mesh, rid, lc)
  if load >= tonumber(c.cap) then return {'CAPACITY', rid, tostring(load), c.cap} end
  if not next_gen() then return {'GEN_SPENT'} end
  -- writes
  local gen = issue_gen()
  redis.call('HSET', KEYS[1], 'id', id, 'kind', kind, 'type', stype, 'mesh', mesh,
             'state', 'creating', 'gen', gen, 'ogen', '1', 'ver', '1', 'orid', rid, 'olc', lc)
  for i = first, #ARGV, 2 do redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1]) end
  redis.call('ZADD', META .. 'ids', 0, id)
  shift(load_key(mesh, rid, lc), 'pending', 1)
  count('creating', 1)
  return nil, gen, c.exp
end
"""

#: The helpers every Location script starts with (the combined scripts reuse them).
PRELUDE: Final = _PRELUDE

# ARGV: P, now, expires, node_id, rid, mesh, entry_id, descriptor_json, capacity,
#       then (stable_type, kind) pairs the node serves. KEYS: claim key, entry spot key.
_NEW_CLAIM: Final = r"""
local now, exp, node_id, rid, mesh, entry = ARGV[2], ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local ck = KEYS[1]
local old = rec(ck)
if old and tonumber(now) < tonumber(old.exp) then return {'ALREADY', old.node, old.lc} end
local old_entry = nil
if old then
  local e = rec(spot_key(old.entry))
  if e and e.kind == 'entry' and e.orid == rid and e.olc == old.lc then old_entry = e end
end
if redis.call('EXISTS', KEYS[2]) == 1 and (old_entry == nil or old_entry.id ~= entry) then
  return {'ENTRY_TAKEN', entry}
end
if not next_gen() then return {'GEN_SPENT'} end
if redis.call('HGET', META .. 'lifecycles', node_id) == MAXGEN then return {'LC_SPENT'} end
-- writes
if old_entry then drop_record(old_entry) end
redis.call('HINCRBY', META .. 'lifecycles', node_id, 1)
local lc = redis.call('HGET', META .. 'lifecycles', node_id)
redis.call('DEL', ck)
redis.call('HSET', ck, 'desc', ARGV[8], 'node', node_id, 'entry', entry, 'mesh', mesh,
           'rid', rid, 'lc', lc, 'exp', exp, 'ver', '1', 'cap', ARGV[9])
for i = 10, #ARGV, 2 do redis.call('HSET', ck, 'serves:' .. ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', META .. 'claims', 0, ck)
local gen = issue_gen()
redis.call('HSET', KEYS[2], 'id', entry, 'kind', 'entry', 'type', 'zlink.entry', 'mesh', mesh,
           'state', 'ready', 'gen', gen, 'ogen', '1', 'ver', '1', 'orid', rid, 'olc', lc)
redis.call('ZADD', META .. 'ids', 0, entry)
count('ready', 1)
return {'OK', lc, gen}
"""

# ARGV: P, lifecycle, now, expires. KEYS: claim key.
_RENEW: Final = r"""
local c = rec(KEYS[1])
if c == nil or c.lc ~= ARGV[2] then return {'STALE_OWNER', '', ARGV[2], ''} end
if not (tonumber(ARGV[3]) < tonumber(c.exp)) then return {'EXPIRED', c.rid, c.lc, c.exp} end
if c.ver == MAXGEN then return {'SPENT'} end
if tonumber(ARGV[4]) > tonumber(c.exp) then redis.call('HSET', KEYS[1], 'exp', ARGV[4]) end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {'OK', redis.call('HMGET', KEYS[1], 'desc', 'lc', 'exp', 'ver')}
"""

# ARGV: P, lifecycle. KEYS: claim key.
_REMOVE: Final = r"""
local c = rec(KEYS[1])
if c == nil or c.lc ~= ARGV[2] then return 0 end
local e = rec(spot_key(c.entry))
if e and e.kind == 'entry' and e.orid == c.rid and e.olc == c.lc then drop_record(e) end
redis.call('DEL', KEYS[1])
redis.call('ZREM', META .. 'claims', KEYS[1])
return 1
"""

# ARGV: P. Every claim (live or not) as {desc, lc, exp, ver}.
_DESCRIPTORS: Final = r"""#!lua flags=no-writes
local out = {}
for _, ck in ipairs(redis.call('ZRANGE', META .. 'claims', 0, -1)) do
  out[#out + 1] = redis.call('HMGET', ck, 'desc', 'lc', 'exp', 'ver')
end
return out
"""

# ARGV: P, id, kind, stable_type, mesh, rid, lc, now, then record fields (intent/pointer).
_RESERVE: Final = r"""
local err, gen, exp = reserve_spot(2, 9)
if err then return err end
return {'OK', gen, exp}
"""

# ARGV: P, gen, ogen, rid, lc, store_version, store_version + 1, now.
_COMMIT_READY: Final = r"""
local r = rec(KEYS[1])
if fenced(r, ARGV[2], ARGV[3], ARGV[4], ARGV[5]) then
  if r.state == 'ready' and r.ver == ARGV[7] then return reply(KEYS[1]) end
  if r.state == 'creating' and r.ver == ARGV[6] then
    local _, err = owner_claim(r.mesh, r.orid, r.olc, ARGV[8])
    if err then return err end
    if r.ver == MAXGEN then return {'SPENT'} end
    redis.call('HSET', KEYS[1], 'state', 'ready')
    redis.call('HDEL', KEYS[1], 'ir', 'ish', 'isz')
    redis.call('HINCRBY', KEYS[1], 'ver', 1)
    local lk = load_key(r.mesh, r.orid, r.olc)
    shift(lk, 'pending', -1)
    shift(lk, 'active', 1)
    count('creating', -1)
    count('ready', 1)
    return reply(KEYS[1])
  end
end
return stale(KEYS[1])
"""

# ARGV: P, gen, ogen, rid, lc, store_version.
_ABORT_CREATING: Final = r"""
local r = rec(KEYS[1])
if r == nil or r.gen ~= ARGV[2] then return {'OK', 0} end
if r.state ~= 'creating' or not fenced(r, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
    or r.ver ~= ARGV[6] then
  return stale(KEYS[1])
end
drop_record(r)
shift(load_key(r.mesh, r.orid, r.olc), 'pending', -1)
return {'OK', 1}
"""

# ARGV: P, gen, rid, lc, now, expected owner generation or '', expected version or ''.
_BEGIN_CLOSE: Final = r"""
local r = rec(KEYS[1])
if r == nil then return {'NONE'} end
if r.gen ~= ARGV[2] then return {'INVALID', 'generation', r.gen} end
if r.kind == 'entry' then return {'INVALID', 'entry', ''} end
if r.state == 'creating' then return {'INVALID', 'creating', ''} end
if r.state == 'relocating' or r.state == 'sealed' then return {'MOVING', r.state} end
local is_stale = r.orid ~= ARGV[3] or r.olc ~= ARGV[4] or (ARGV[6] ~= '' and ARGV[6] ~= r.ogen)
if r.state == 'closing' and not is_stale then return reply(KEYS[1]) end
if is_stale or (ARGV[7] ~= '' and ARGV[7] ~= r.ver) then return stale(KEYS[1]) end
local _, err = owner_claim(r.mesh, ARGV[3], ARGV[4], ARGV[5])
if err then return err end
if r.ver == MAXGEN then return {'SPENT'} end
redis.call('HSET', KEYS[1], 'state', 'closing')
redis.call('HINCRBY', KEYS[1], 'ver', 1)
count('ready', -1)
count('closing', 1)
return reply(KEYS[1])
"""

# ARGV: P, gen, ogen, rid, lc.
_RELEASE: Final = r"""
local r = rec(KEYS[1])
if r == nil or r.gen ~= ARGV[2] then return {'OK', 0} end
if r.state ~= 'closing' or not fenced(r, ARGV[2], ARGV[3], ARGV[4], ARGV[5]) then
  return stale(KEYS[1])
end
drop_record(r)
shift(load_key(r.mesh, r.orid, r.olc), 'active', -1)
return {'OK', 1}
"""

# ARGV: P, gen, expected store version.
_REMOVE_POINTER: Final = r"""
local r = rec(KEYS[1])
if r == nil or r.gen ~= ARGV[2] then return {'OK', 0} end
if r.state == 'creating' then return {'INVALID', 'creating', ''} end
if r.pr == nil then return {'OK', 0} end
if r.ver ~= ARGV[3] then return stale(KEYS[1]) end
if r.ver == MAXGEN then return {'SPENT'} end
redis.call('HDEL', KEYS[1], 'pr', 'psh', 'psz', 'pv')
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {'OK', 1}
"""

# ARGV: P, gen, ogen, rid, lc, target rid, target lc, now.
_BEGIN_RELOCATION: Final = r"""
local trid, tlc, now = ARGV[6], ARGV[7], ARGV[8]
local r = rec(KEYS[1])
local fence_ok = fenced(r, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
if r and r.state == 'relocating' and r.trid == trid and r.tlc == tlc then
  if fence_ok then return reply(KEYS[1]) end
  return stale(KEYS[1])
end
if not fence_ok or r.state ~= 'ready' then return stale(KEYS[1]) end
if r.kind == 'entry' then return {'INVALID', 'entry', ''} end
if trid == r.orid then return {'INVALID', 'same_node', trid} end
local _, err = owner_claim(r.mesh, r.orid, r.olc, now)
if err then return err end
local tc, terr = owner_claim(r.mesh, trid, tlc, now)
if terr then return terr end
if not serves(r.mesh, trid, r.type, r.kind) then return {'NOT_SERVED', trid, r.type, r.kind} end
local load = load_of(r.mesh, trid, tlc)
if load >= tonumber(tc.cap) then return {'CAPACITY', trid, tostring(load), tc.cap} end
if r.ver == MAXGEN then return {'SPENT'} end
redis.call('HSET', KEYS[1], 'state', 'relocating', 'trid', trid, 'tlc', tlc)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
shift(load_key(r.mesh, trid, tlc), 'pending', 1)
count('ready', -1)
count('relocating', 1)
return reply(KEYS[1])
"""

# ARGV: P, gen, ogen, rid, lc, now.
_SEAL_RELOCATION: Final = r"""
local r = rec(KEYS[1])
if not fenced(r, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
    or (r.state ~= 'relocating' and r.state ~= 'sealed') then
  return stale(KEYS[1])
end
if r.state == 'sealed' then return reply(KEYS[1]) end
local _, err = owner_claim(r.mesh, r.orid, r.olc, ARGV[6])
if err then return err end
if r.ver == MAXGEN then return {'SPENT'} end
redis.call('HSET', KEYS[1], 'state', 'sealed')
redis.call('HINCRBY', KEYS[1], 'ver', 1)
count('relocating', -1)
count('sealed', 1)
return reply(KEYS[1])
"""

# ARGV: P, gen, ogen, rid, lc, now.
_COMMIT_RELOCATION: Final = r"""
local r = rec(KEYS[1])
if not fenced(r, ARGV[2], ARGV[3], ARGV[4], ARGV[5]) or r.state ~= 'sealed' then
  return stale(KEYS[1])
end
local _, err = owner_claim(r.mesh, r.trid, r.tlc, ARGV[6])
if err then return err end
if r.ver == MAXGEN or r.ogen == MAXGEN then return {'SPENT'} end
redis.call('HSET', KEYS[1], 'state', 'ready', 'orid', r.trid, 'olc', r.tlc)
redis.call('HDEL', KEYS[1], 'trid', 'tlc')
redis.call('HINCRBY', KEYS[1], 'ogen', 1)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
shift(load_key(r.mesh, r.orid, r.olc), 'active', -1)
local tk = load_key(r.mesh, r.trid, r.tlc)
shift(tk, 'pending', -1)
shift(tk, 'active', 1)
count('sealed', -1)
count('ready', 1)
return reply(KEYS[1])
"""

# ARGV: P, gen, ogen, rid, lc.
_ABORT_RELOCATION: Final = r"""
local r = rec(KEYS[1])
if not fenced(r, ARGV[2], ARGV[3], ARGV[4], ARGV[5])
    or (r.state ~= 'relocating' and r.state ~= 'sealed') then
  return stale(KEYS[1])
end
if r.ver == MAXGEN then return {'SPENT'} end
redis.call('HSET', KEYS[1], 'state', 'ready')
redis.call('HDEL', KEYS[1], 'trid', 'tlc')
redis.call('HINCRBY', KEYS[1], 'ver', 1)
shift(load_key(r.mesh, r.trid, r.tlc), 'pending', -1)
count(r.state, -1)
count('ready', 1)
return reply(KEYS[1])
"""

# ARGV: P, after ('' = from the start), ids to list (page + 1), records to return (page).
_QUERY: Final = r"""#!lua flags=no-writes
local lo = '-'
if ARGV[2] ~= '' then lo = '(' .. ARGV[2] end
local ids = redis.call('ZRANGEBYLEX', META .. 'ids', lo, '+', 'LIMIT', 0, tonumber(ARGV[3]))
local out = {#ids}
for i = 1, math.min(#ids, tonumber(ARGV[4])) do
  out[#out + 1] = redis.call('HGETALL', spot_key(ids[i]))
end
return out
"""

# ARGV: P.
_STATISTICS: Final = r"""#!lua flags=no-writes
local counts = redis.call('HMGET', META .. 'counts', 'creating', 'ready', 'closing',
                          'relocating', 'sealed')
return {redis.call('ZCARD', META .. 'claims'), counts, redis.call('GET', META .. 'seq')}
"""


def _script(body: str) -> str:
    # A shebang must stay the first line, so the prelude goes after it.
    if body.startswith("#!"):
        first, _, rest = body.partition("\n")
        return f"{first}\n{_PRELUDE}\n{rest}"
    return f"{_PRELUDE}\n{body}"


#: Name -> full Lua source of every Location Store transaction.
LOCATION_SCRIPTS: Final = {
    "new_claim": _script(_NEW_CLAIM),
    "renew": _script(_RENEW),
    "remove": _script(_REMOVE),
    "descriptors": _script(_DESCRIPTORS),
    "reserve": _script(_RESERVE),
    "commit_ready": _script(_COMMIT_READY),
    "abort_creating": _script(_ABORT_CREATING),
    "begin_close": _script(_BEGIN_CLOSE),
    "release": _script(_RELEASE),
    "release_expired": _script(RELEASE_EXPIRED),
    "remove_recovery_pointer": _script(_REMOVE_POINTER),
    "begin_relocation": _script(_BEGIN_RELOCATION),
    "seal_relocation": _script(_SEAL_RELOCATION),
    "commit_relocation": _script(_COMMIT_RELOCATION),
    "abort_relocation": _script(_ABORT_RELOCATION),
    "query": _script(_QUERY),
    "statistics": _script(_STATISTICS),
}
