"""The Location Store's transactions as Lua scripts (one script per transaction).

Theory of operation
-------------------
Each script re-implements one ``txn_*`` function of ``store.rules.location`` /
``claims`` / ``relocation_steps`` (the oracle): the same checks in the
same order, **every read and comparison before the first write**, because
Redis runs a script atomically but has no rollback. A refused script returns
``{code, detail...}`` and has written nothing; ``codec.raise_status``
turns the code into the oracle's typed error. A successful one returns
``{"OK", ...}``, usually with the record as ``HGETALL`` gives it.

Conventions shared by every script (see ``codec`` for the key layout):

- Every script starts with the prelude (``prelude``): ``ARGV[1]`` and ``ARGV[2]``
  are the Location and Relocation key prefixes, from which the script builds
  node and index keys; its own arguments start at ``ARGV[3]``, and ``KEYS[1]``
  is the key the call is about.
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

__all__ = ("LOCATION_BODIES",)


# ARGV: P, R, now, expires, node_id, rid, mesh, entry_id, descriptor_json, capacity,
#       then (stable_type, kind) pairs the node serves. KEYS: claim key, entry spot key.
_NEW_CLAIM: Final = r"""
local now, exp, node_id, rid, mesh, entry = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8]
local ck = KEYS[1]
local old = rec(ck)
if old and tonumber(now) < tonumber(old.exp) then return {'ALREADY', old.node, old.lc} end
-- one live process per NodeId, store-wide (O(claims); claims are few)
for _, k in ipairs(redis.call('ZRANGE', META .. 'claims', 0, -1)) do
  local v = redis.call('HMGET', k, 'node', 'exp', 'rid')
  if v[1] == node_id and v[3] ~= rid and tonumber(now) < tonumber(v[2]) then
    return {'NODE_LIVE', redis.call('HMGET', k, 'desc', 'lc', 'exp', 'ver', 'closed')}
  end
end
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
redis.call('HSET', ck, 'desc', ARGV[9], 'node', node_id, 'entry', entry, 'mesh', mesh,
           'rid', rid, 'lc', lc, 'exp', exp, 'ver', '1', 'cap', ARGV[10])
for i = 11, #ARGV, 2 do redis.call('HSET', ck, 'serves:' .. ARGV[i], ARGV[i + 1]) end
redis.call('ZADD', META .. 'claims', 0, ck)
local gen = issue_gen()
redis.call('HSET', KEYS[2], 'id', entry, 'kind', 'entry', 'type', 'zlink.entry', 'mesh', mesh,
           'state', ST_READY, 'gen', gen, 'ogen', '1', 'ver', '1', 'orid', rid, 'olc', lc)
redis.call('ZADD', META .. 'ids', 0, entry)
count(ST_READY, 1)
return {'OK', lc, gen}
"""

# ARGV: P, R, lifecycle, now, expires. KEYS: claim key.
_RENEW: Final = r"""
local c = rec(KEYS[1])
if c == nil or c.lc ~= ARGV[3] then return {'STALE_OWNER', '', ARGV[3], ''} end
if not (tonumber(ARGV[4]) < tonumber(c.exp)) then return {'EXPIRED', c.rid, c.lc, c.exp} end
if c.ver == MAXGEN then return {'SPENT'} end
if tonumber(ARGV[5]) > tonumber(c.exp) then redis.call('HSET', KEYS[1], 'exp', ARGV[5]) end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {'OK', redis.call('HMGET', KEYS[1], 'desc', 'lc', 'exp', 'ver', 'closed')}
"""

# ARGV: P, R, lifecycle, closed ('1': ClosePlacement, '0': OpenPlacement). KEYS: claim key.
# 1: marked (or already was); 0: not this lifecycle.
_MARK_PLACEMENT: Final = r"""
local c = rec(KEYS[1])
if c == nil or c.lc ~= ARGV[3] then return {'OK', 0} end
local closed = ARGV[4] == '1'
if (c.closed ~= nil) == closed then return {'OK', 1} end
if c.ver == MAXGEN then return {'SPENT'} end
if closed then
  redis.call('HSET', KEYS[1], 'closed', '1')
else
  redis.call('HDEL', KEYS[1], 'closed')
end
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return {'OK', 1}
"""

# ARGV: P, R, lifecycle. KEYS: claim key.
_REMOVE: Final = r"""
local c = rec(KEYS[1])
if c == nil or c.lc ~= ARGV[3] then return 0 end
local e = rec(spot_key(c.entry))
if e and e.kind == 'entry' and e.orid == c.rid and e.olc == c.lc then drop_record(e) end
redis.call('DEL', KEYS[1])
redis.call('ZREM', META .. 'claims', KEYS[1])
return 1
"""

# ARGV: P, R, node_id, now. Deletes the expired claims of node_id with no capacity unit.
_REMOVE_DEAD_CLAIMS: Final = r"""
local removed = 0
for _, ck in ipairs(redis.call('ZRANGE', META .. 'claims', 0, -1)) do
  local c = rec(ck)
  if c and c.node == ARGV[3] and not (tonumber(ARGV[4]) < tonumber(c.exp)) then
    local load = redis.call('HMGET', load_key(c.mesh, c.rid, c.lc), 'pending', 'active')
    if (tonumber(load[1]) or 0) == 0 and (tonumber(load[2]) or 0) == 0 then
      local e = rec(spot_key(c.entry))
      if e and e.kind == 'entry' and e.orid == c.rid and e.olc == c.lc then drop_record(e) end
      redis.call('DEL', ck)
      redis.call('ZREM', META .. 'claims', ck)
      removed = removed + 1
    end
  end
end
return {'OK', removed}
"""

# ARGV: P, R. Every claim (live or not) as {desc, lc, exp, ver, closed} (codec.CLAIM_FIELDS).
_DESCRIPTORS: Final = r"""#!lua flags=no-writes
local out = {}
for _, ck in ipairs(redis.call('ZRANGE', META .. 'claims', 0, -1)) do
  out[#out + 1] = redis.call('HMGET', ck, 'desc', 'lc', 'exp', 'ver', 'closed')
end
return out
"""

# ARGV: P, R, id, kind, stable_type, mesh, rid, lc, now, container ('' = a Spot), then
# record fields (intent/pointer).
_RESERVE: Final = r"""
local err, gen, exp = reserve_spot(3, 11, ARGV[10])
if err then return err end
return {'OK', gen, exp}
"""

# ARGV: P, R, gen, ogen, rid, lc, store_version, store_version + 1, now.
_COMMIT_READY: Final = r"""
local err = commit_ready_spot()
if err then return err end
return reply(KEYS[1])
"""

# ARGV: P, R, gen, ogen, rid, lc, store_version.
_ABORT_CREATING: Final = r"""
local r = rec(KEYS[1])
if r == nil or r.gen ~= ARGV[3] then return {'OK', 0} end
if r.state ~= ST_CREATING or not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6])
    or r.ver ~= ARGV[7] then
  return stale(KEYS[1])
end
local serr = step_to_missing(r.state, EV_ABORT_CREATING)
if serr then return serr end
release_record(r, 'pending')
return {'OK', 1}
"""

# ARGV: P, R, gen, rid, lc, now, expected owner generation or '', expected version or ''
# (Redis Cluster: then the member marks to drop, ``members_remain``).
_BEGIN_CLOSE: Final = r"""
local r = rec(KEYS[1])
if r == nil then return {'NONE'} end
if r.gen ~= ARGV[3] then return {'INVALID', 'generation', r.gen} end
if r.kind == 'entry' then return {'INVALID', 'entry', ''} end
if r.state == ST_CREATING then return {'INVALID', ST_CREATING, ''} end
if TAG_MOVING[r.state] then return {'MOVING', r.state} end
local is_stale = r.orid ~= ARGV[4] or r.olc ~= ARGV[5] or (ARGV[7] ~= '' and ARGV[7] ~= r.ogen)
if r.state == ST_CLOSING and not is_stale then return reply(KEYS[1]) end
if is_stale or (ARGV[8] ~= '' and ARGV[8] ~= r.ver) then return stale(KEYS[1]) end
local _, err = owner_claim(r.mesh, ARGV[4], ARGV[5], ARGV[6])
if err then return err end
local merr = members_remain(r, 9)
if merr then return merr end
if r.ver == MAXGEN then return {'SPENT'} end
local new, serr = step(r.state, EV_BEGIN_CLOSE)
if serr then return serr end
transition(KEYS[1], r.state, new)
return reply(KEYS[1])
"""

# ARGV: P, R, gen, rid, lc, container, now (Redis Cluster: then the verdict, join_check).
# The record's checks before the lease refuse with {'MOVE_REFUSED', record}, which
# redis.location words with the oracle's move_refusal.
_MOVE_MEMBERSHIP: Final = r"""
local gen, rid, lc, container, now = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local r = rec(KEYS[1])
if r == nil or r.gen ~= gen or r.kind ~= 'actor' or r.orid ~= rid or r.olc ~= lc
    or r.state ~= ST_READY then
  return {'MOVE_REFUSED', redis.call('HGETALL', KEYS[1])}
end
local _, err = owner_claim(r.mesh, rid, lc, now)
if err then return err end
if r.container == container then return reply(KEYS[1]) end
local jerr = join_check(r.id, container, rid, lc, ARGV[8])
if jerr then return jerr end
if r.ver == MAXGEN then return {'SPENT'} end
-- writes
leave(r.id, r.container, r.mt)
redis.call('HSET', KEYS[1], 'container', container)
join_write(KEYS[1], r.id, container, ARGV[8], false)
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return reply(KEYS[1])
"""

# KEYS: the container's members set. ARGV: P, R. The records of its members.
_MEMBERS: Final = r"""#!lua flags=no-writes
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  out[#out + 1] = redis.call('HGETALL', spot_key(id))
end
return out
"""

# KEYS: spot key, state key, reminders key. ARGV: P, R, gen, ogen, rid, lc, the Spot's
# reminder partition. The close of a User Spot or an Actor ends its durable state and its
# reminders too (store.rules.location.txn_release; on Redis Cluster their due hints are
# left for the takes to sweep: redis_cluster.reminders).
_RELEASE: Final = r"""
local r = rec(KEYS[1])
if r == nil or r.gen ~= ARGV[3] then return {'OK', 0} end
if r.state ~= ST_CLOSING or not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) then
  return stale(KEYS[1])
end
local serr = step_to_missing(r.state, EV_RELEASE)
if serr then return serr end
release_record(r, 'active')
if r.kind == 'user' or r.kind == 'actor' then
  redis.call('DEL', KEYS[2])
  rem_drop_all(KEYS[3], r.id, ARGV[7])
end
return {'OK', 1}
"""

# ARGV: P, R, gen, expected store version.
_REMOVE_POINTER: Final = r"""
local err, remove = pointer_removal(KEYS[1], ARGV[3], ARGV[4])
if err then return err end
if not remove then return {'OK', 0} end
remove_pointer(KEYS[1])
return {'OK', 1}
"""

# ARGV: P, R, gen, ogen, rid, lc, target rid, target lc, now, container at the target
# ('' = a Spot's move), members ('1' they stay, 'c' they are carried, '' neither) (Redis
# Cluster: then the verdict, join_check, and the member marks to drop, members_remain).
# An Actor names its container (MOVE_CONTAINER otherwise, and for a Spot that names one);
# a Spot with members does not move unless they stay or are carried (MEMBERS):
# redis.location words both with the oracle's refusals. Carried members (carry_check)
# step with the Spot here and in every later step of the move (carried). An Actor
# following its PerActor Spot names the container it has: it is a member of it once
# (join_write adds nothing here; on Redis Cluster its record holds a second mark there,
# nmt, and the move's end hands back one of the two).
_BEGIN_RELOCATION: Final = r"""
local trid, tlc, now, container = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
local r = rec(KEYS[1])
local fence_ok = fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6])
if r and r.state == ST_RELOCATING and r.trid == trid and r.tlc == tlc
    and (r.nc or '') == container then
  if fence_ok and is_carried(r) then return {'CARRIED', redis.call('HGETALL', KEYS[1])} end
  if fence_ok then return reply(KEYS[1]) end
  return stale(KEYS[1])
end
if not fence_ok or r.state ~= ST_READY then return stale(KEYS[1]) end
if r.kind == 'entry' then return {'INVALID', 'entry', ''} end
if (r.kind == 'actor') ~= (container ~= '') then return {'MOVE_CONTAINER'} end
local left = group_left(r)
if left then return left end
local group = {}
if ARGV[11] == 'c' then
  local gerr
  group, gerr = carry_check(r, 13)
  if gerr then return gerr end
elseif ARGV[11] ~= '1' then
  local merr = members_remain(r, 13)
  if merr then return merr end
end
if trid == r.orid then return {'INVALID', 'same_node', trid} end
local _, err = owner_claim(r.mesh, r.orid, r.olc, now)
if err then return err end
local tc, terr = owner_claim(r.mesh, trid, tlc, now)
if terr then return terr end
if not serves(r.mesh, trid, r.type, r.kind) then return {'NOT_SERVED', trid, r.type, r.kind} end
for _, g in ipairs(group) do
  local m = g[2]
  if not serves(r.mesh, trid, m.type, m.kind) then
    return {'NOT_SERVED', trid, m.type, m.kind}
  end
end
local load = load_of(r.mesh, trid, tlc)
if load + group_count(r, group) >= tonumber(tc.cap) then
  return {'CAPACITY', trid, tostring(load), tc.cap}
end
if container ~= '' then
  local jerr = join_check(r.id, container, trid, tlc, ARGV[12])
  if jerr then return jerr end
end
if r.ver == MAXGEN then return {'SPENT'} end
for _, g in ipairs(group) do
  if g[2].ver == MAXGEN then return {'SPENT'} end
end
local new, serr = step(r.state, EV_BEGIN_RELOCATION)
if serr then return serr end
-- writes
redis.call('HSET', KEYS[1], 'trid', trid, 'tlc', tlc)
if container ~= '' then  -- a member of both until the move ends: neither closes
  redis.call('HSET', KEYS[1], 'nc', container)
  join_write(KEYS[1], r.id, container, ARGV[12], true)
end
transition(KEYS[1], r.state, new)
group_write(KEYS[1])
for _, g in ipairs(group) do
  redis.call('HSET', g[1], 'trid', trid, 'tlc', tlc)
  transition(g[1], g[2].state, new)
end
shift(load_key(r.mesh, trid, tlc), 'pending', 1 + group_count(r, group))
return reply(KEYS[1])
"""

# ARGV: P, R, gen, ogen, rid, lc, now.
_SEAL_RELOCATION: Final = r"""
local r, refused = fenced_in(ST_RELOCATING, ST_SEALED)
if refused then return refused end
if r.state == ST_SEALED then return reply(KEYS[1]) end
local _, err = owner_claim(r.mesh, r.orid, r.olc, ARGV[7])
if err then return err end
if r.ver == MAXGEN then return {'SPENT'} end
local group = carried(r)
for _, g in ipairs(group) do
  if g[2].ver == MAXGEN then return {'SPENT'} end
end
local new, serr = step(r.state, EV_SEAL)
if serr then return serr end
transition(KEYS[1], r.state, new)
for _, g in ipairs(group) do transition(g[1], g[2].state, new) end
return reply(KEYS[1])
"""

# ARGV: P, R, gen, ogen, rid, lc (the source's fence), target rid, target lc, now.
_ACCEPT_RELAY_READY: Final = r"""
local trid, tlc = ARGV[7], ARGV[8]
local r = rec(KEYS[1])
local fence_ok = fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6])
local toward = fence_ok and r.trid == trid and r.tlc == tlc
if toward and is_carried(r) then return {'CARRIED', redis.call('HGETALL', KEYS[1])} end
if toward and r.state == ST_RELAY_READY then return reply(KEYS[1]) end
if not toward or r.state ~= ST_SEALED then return stale(KEYS[1]) end
local _, err = owner_claim(r.mesh, trid, tlc, ARGV[9])
if err then return err end
if r.ver == MAXGEN then return {'SPENT'} end
local group = carried(r)
for _, g in ipairs(group) do
  if g[2].ver == MAXGEN then return {'SPENT'} end
end
local new, serr = step(r.state, EV_ACCEPT_RELAY_READY)
if serr then return serr end
transition(KEYS[1], r.state, new)
for _, g in ipairs(group) do transition(g[1], g[2].state, new) end
return reply(KEYS[1])
"""

# ARGV: P, R, gen, ogen, rid, lc, now.
_COMMIT_RELOCATION: Final = r"""
local r, refused = fenced_in(ST_RELAY_READY)
if refused then return refused end
local _, err = owner_claim(r.mesh, r.trid, r.tlc, ARGV[7])
if err then return err end
if r.ver == MAXGEN or r.ogen == MAXGEN then return {'SPENT'} end
local group = carried(r)
for _, g in ipairs(group) do
  if g[2].ver == MAXGEN or g[2].ogen == MAXGEN then return {'SPENT'} end
end
local new, serr = step(r.state, EV_COMMIT_RELOCATION)
if serr then return serr end
-- writes: one aggregate commit, each carried member at the target with its own
-- owner generation + 1 (it stays in its container's members set)
for _, g in ipairs(group) do
  redis.call('HSET', g[1], 'orid', r.trid, 'olc', r.tlc)
  redis.call('HDEL', g[1], 'trid', 'tlc')
  redis.call('HINCRBY', g[1], 'ogen', 1)
  transition(g[1], g[2].state, new)
end
local moving = 1 + group_count(r, group)
redis.call('HSET', KEYS[1], 'orid', r.trid, 'olc', r.tlc)
redis.call('HDEL', KEYS[1], 'trid', 'tlc', 'mr', 'msh', 'msz')
if r.nc then  -- a moving Actor: its next container becomes its container
  leave(r.id, r.container, r.mt, r.nc == r.container)  -- (a member still when the same)
  redis.call('HSET', KEYS[1], 'container', r.nc)
  if r.nmt then redis.call('HSET', KEYS[1], 'mt', r.nmt) end  -- its mark (Redis Cluster)
  redis.call('HDEL', KEYS[1], 'nc', 'nmt')
end
redis.call('HINCRBY', KEYS[1], 'ogen', 1)
transition(KEYS[1], r.state, new)
shift(load_key(r.mesh, r.orid, r.olc), 'active', -moving)
local tk = load_key(r.mesh, r.trid, r.tlc)
shift(tk, 'pending', -moving)
shift(tk, 'active', moving)
return reply(KEYS[1])
"""

# ARGV: P, R, gen, ogen, rid, lc. Past relay-ready: {'PAST_RELAY_READY', record}.
_ABORT_RELOCATION: Final = r"""
local r, refused = fenced_in(ST_RELOCATING, ST_SEALED, ST_RELAY_READY)
if refused then return refused end
if r.state == ST_RELAY_READY then
  return {'PAST_RELAY_READY', redis.call('HGETALL', KEYS[1])}
end
if r.ver == MAXGEN then return {'SPENT'} end
local group = carried(r)
for _, g in ipairs(group) do
  if g[2].ver == MAXGEN then return {'SPENT'} end
end
local new, serr = step(r.state, EV_ABORT_RELOCATION)
if serr then return serr end
-- writes
for _, g in ipairs(group) do
  redis.call('HDEL', g[1], 'trid', 'tlc')
  transition(g[1], g[2].state, new)
end
redis.call('HDEL', KEYS[1], 'trid', 'tlc', 'mr', 'msh', 'msz')
if r.nc then  -- a moving Actor stays in its container only (a member still when the same)
  leave(r.id, r.nc, r.nmt, r.nc == r.container)
  redis.call('HDEL', KEYS[1], 'nc', 'nmt')
end
transition(KEYS[1], r.state, new)
shift(load_key(r.mesh, r.trid, r.tlc), 'pending', -1 - group_count(r, group))
return reply(KEYS[1])
"""

# ARGV: P, R, gen, ogen, rid, lc, payload ref, sha256, size, now.
_RECORD_PAYLOAD: Final = r"""
local r, refused = fenced_in(ST_SEALED)
if refused then return refused end
if r.mr == ARGV[7] and r.msh == ARGV[8] and r.msz == ARGV[9] then return reply(KEYS[1]) end
local _, err = owner_claim(r.mesh, r.orid, r.olc, ARGV[10])
if err then return err end
if r.ver == MAXGEN then return {'SPENT'} end
redis.call('HSET', KEYS[1], 'mr', ARGV[7], 'msh', ARGV[8], 'msz', ARGV[9])
redis.call('HINCRBY', KEYS[1], 'ver', 1)
return reply(KEYS[1])
"""

# ARGV: P, R, gen, ogen, rid, lc (the source's fence), target rid, target lc, now.
# {'OK', 0} gone; {'OK', 1, record before}; {'TARGET_ALIVE', record, lease expiry}.
_RELEASE_RELAY_READY: Final = r"""
local r = rec(KEYS[1])
if r == nil or r.gen ~= ARGV[3] then return {'OK', 0} end
if not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) or r.state ~= ST_RELAY_READY then
  return stale(KEYS[1])
end
if is_carried(r) then return {'CARRIED', redis.call('HGETALL', KEYS[1])} end
if r.trid ~= ARGV[7] or r.tlc ~= ARGV[8] then return stale(KEYS[1]) end
local c = rec(claim_key(r.mesh, r.trid))
if c ~= nil and c.lc == r.tlc and tonumber(ARGV[9]) < tonumber(c.exp) then
  return {'TARGET_ALIVE', redis.call('HGETALL', KEYS[1]), c.exp}
end
local serr = step_to_missing(r.state, EV_RELEASE_RELAY_READY)
if serr then return serr end
local before = redis.call('HGETALL', KEYS[1])
local group = carried(r)
local n = group_count(r, group)
-- writes: the carried members end with their Spot (their units are the source's)
release_record(r, 'active')
for _, g in ipairs(group) do drop_record(g[2]) end
if n > 0 then shift(load_key(r.mesh, r.orid, r.olc), 'active', -n) end
shift(load_key(r.mesh, r.trid, r.tlc), 'pending', -1 - n)
return {'OK', 1, before}
"""

# ARGV: P, R, after ('' = from the start), ids to list (page + 1), records to return (page).
_QUERY: Final = r"""#!lua flags=no-writes
local lo = '-'
if ARGV[3] ~= '' then lo = '(' .. ARGV[3] end
local ids = redis.call('ZRANGEBYLEX', META .. 'ids', lo, '+', 'LIMIT', 0, tonumber(ARGV[4]))
local out = {#ids}
for i = 1, math.min(#ids, tonumber(ARGV[5])) do
  out[#out + 1] = redis.call('HGETALL', spot_key(ids[i]))
end
return out
"""

# ARGV: P, R.
_STATISTICS: Final = r"""#!lua flags=no-writes
local counts = redis.call('HMGET', META .. 'counts', ST_CREATING, ST_READY, ST_CLOSING,
                          ST_RELOCATING, ST_SEALED, ST_RELAY_READY)
return {redis.call('ZCARD', META .. 'claims'), counts, redis.call('GET', META .. 'seq')}
"""


#: Name -> Lua body of every Location Store transaction (``prelude.script`` adds the
#: prelude).
LOCATION_BODIES: Final = {
    "new_claim": _NEW_CLAIM,
    "renew": _RENEW,
    "mark_placement": _MARK_PLACEMENT,
    "remove": _REMOVE,
    "descriptors": _DESCRIPTORS,
    "remove_dead_claims": _REMOVE_DEAD_CLAIMS,
    "reserve": _RESERVE,
    "commit_ready": _COMMIT_READY,
    "abort_creating": _ABORT_CREATING,
    "begin_close": _BEGIN_CLOSE,
    "release": _RELEASE,
    "move_membership": _MOVE_MEMBERSHIP,
    "members": _MEMBERS,
    "remove_recovery_pointer": _REMOVE_POINTER,
    "begin_relocation": _BEGIN_RELOCATION,
    "seal_relocation": _SEAL_RELOCATION,
    "accept_relay_ready": _ACCEPT_RELAY_READY,
    "commit_relocation": _COMMIT_RELOCATION,
    "abort_relocation": _ABORT_RELOCATION,
    "record_relocation_payload": _RECORD_PAYLOAD,
    "release_relay_ready": _RELEASE_RELAY_READY,
    "query": _QUERY,
    "statistics": _STATISTICS,
}
