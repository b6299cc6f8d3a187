"""A Spot's durable reminders: their writes fenced by the authority record, their take.

Theory of operation
-------------------
A Spot's reminders are one hash (``codec``: ``reminders:{<spot_id>}``), field the
reminder's name, value the reminder as a JSON array of nine texts::

    [mesh, kind, stable type, due, period or '', version, taker NodeRid or '',
     taker lifecycle or '', taken until]

Floats travel as text that reads back as the same float (Python's ``repr``; what a script
computes, ``%.17g``) and are compared only after ``tonumber``; the version is a decimal.
The **due index** of each (Mesh, reminder partition) is a sorted set, score the
reminder's wake (``rules.reminders``: its due, or the end of a take past it), member
``rem_member(spot_id, name)`` -- the ID with NUL escaped, NUL NUL, the name -- so Redis's
order of equal scores (bytes) is the order of ``(spot_id, name)`` and a range of the
index is ``scan_order``.

Each write checks the writer's fence as ``write_state`` does (the prelude's
``state_writer``: the oracle's ``owning_record``), then the oracle's own checks in its
order (``store.rules.reminders``: an Actor or Entry sets none, at most
``MAX_REMINDERS_PER_SPOT``), then writes the reminder and its index entry together
(``rem_index`` / ``rem_unindex``, the layout's). On Redis Cluster the index is not in
the Spot's slot: the layout writes no index there, and ``rem_hint_refusal`` refuses a
write whose due hint was not written first (``store.redis_cluster.reminders`` tells that
protocol; on one Redis it never refuses). ReminderDone compares version, due and taker
exactly and computes a repeating reminder's next due with the oracle's formula
(``rem_next_due``). ``take_reminders`` runs on one Redis only: it checks the taker's claim
(``owner_claim``), reads the first ``limit`` due entries of each partition's index,
merges them by (score, member bytes) -- Lua's ``<`` on strings follows the server's
locale, so the member order is compared byte by byte -- and takes each that is still due;
past the claim check it refuses nothing, so its writes follow its reads one by one.
"""

from __future__ import annotations

from typing import Final

from zlink_trio.store.values import MAX_REMINDERS_PER_SPOT

__all__ = ("REMINDER_BODIES",)

# KEYS: spot key, reminders key (Redis Cluster: then the bucket's watermarks). ARGV: P, R,
# gen, ogen, rid, lc, now, name, due, period ('' once), partition, then the hint's Mesh,
# score and token ('' on one Redis). {'OK', encoded}; state_writer's refusals;
# {'REM_KIND', record}; {'REM_FULL', count}; rem_hint_refusal's.
_SET_REMINDER: Final = f"local MAX_REMINDERS = {MAX_REMINDERS_PER_SPOT}\n" + r"""
local name, due, part = ARGV[8], ARGV[9], ARGV[11]
local r, err = state_writer(ARGV[7])
if err then return err end
if r.kind ~= 'user' and r.kind ~= 'instance' then
  return {'REM_KIND', redis.call('HGETALL', KEYS[1])}
end
local old = redis.call('HGET', KEYS[2], name)
if not old then
  local n = redis.call('HLEN', KEYS[2])
  if n >= MAX_REMINDERS then return {'REM_FULL', n} end
end
local herr = rem_hint_refusal(KEYS[3], part, ARGV[12], ARGV[13], ARGV[14], r.mesh, due)
if herr then return herr end
local version = 1
if old then version = tonumber(cjson.decode(old)[6]) + 1 end
local enc = cjson.encode({r.mesh, r.kind, r.type, due, ARGV[10],
                          string.format('%d', version), '', '', '0'})
redis.call('HSET', KEYS[2], name, enc)
rem_index(r.mesh, part, rem_member(r.id, name), due)
return {'OK', enc}
"""

# KEYS: spot key, reminders key. ARGV: P, R, gen, ogen, rid, lc, now, name, partition.
# {'OK', 1} deleted, {'OK', 0} none; state_writer's refusals.
_CANCEL_REMINDER: Final = r"""
local name = ARGV[8]
local r, err = state_writer(ARGV[7])
if err then return err end
local old = redis.call('HGET', KEYS[2], name)
if not old then return {'OK', 0} end
redis.call('HDEL', KEYS[2], name)
rem_unindex(cjson.decode(old)[1], ARGV[9], rem_member(r.id, name))
return {'OK', 1}
"""

# KEYS: reminders key (Redis Cluster: then the bucket's watermarks). ARGV: P, R, spot id,
# name, version, due, taker rid, taker lc (as taken), now, partition, taken until (as
# taken), then the hint's Mesh, score and token ('' on one Redis). {'OK', 1} acted,
# {'OK', 0} not this take's; rem_hint_refusal's.
_REMINDER_DONE: Final = r"""
local id, name, part = ARGV[3], ARGV[4], ARGV[10]
local raw = redis.call('HGET', KEYS[1], name)
if not raw then return {'OK', 0} end
local t = cjson.decode(raw)
if t[6] ~= ARGV[5] or tonumber(t[4]) ~= tonumber(ARGV[6]) or t[7] ~= ARGV[7]
    or t[8] ~= ARGV[8] or tonumber(t[9]) ~= tonumber(ARGV[11]) then
  return {'OK', 0}
end
local member = rem_member(id, name)
if t[5] == '' then
  redis.call('HDEL', KEYS[1], name)
  rem_unindex(t[1], part, member)
  return {'OK', 1}
end
local nxt = rem_next_due(t[4], t[5], ARGV[9])
local herr = rem_hint_refusal(KEYS[2], part, ARGV[12], ARGV[13], ARGV[14], t[1], nxt)
if herr then return herr end
t[4], t[7], t[8], t[9] = nxt, '', '', '0'
redis.call('HSET', KEYS[1], name, cjson.encode(t))
rem_index(t[1], part, member, nxt)
return {'OK', 1}
"""

# KEYS: spot key, reminders key. ARGV: P, R, spot id, partition. {'OK', n deleted}: all of
# them when the Spot has no record and every one is a User Spot's, else none.
_DROP_REMINDERS: Final = r"""
if redis.call('EXISTS', KEYS[1]) == 1 then return {'OK', 0} end
local vals = redis.call('HVALS', KEYS[2])
if #vals == 0 then return {'OK', 0} end
for _, v in ipairs(vals) do
  if cjson.decode(v)[2] ~= 'user' then return {'OK', 0} end
end
return {'OK', rem_drop_all(KEYS[2], ARGV[3], ARGV[4])}
"""

# One Redis only. KEYS: the due index of each partition scanned. ARGV: P, R, mesh, taker
# rid, taker lc, now, taken until, limit. {'OK', {spot id, name, encoded}...} in scan
# order; owner_claim's refusals.
_TAKE_REMINDERS: Final = r"""
local mesh, rid, lc, now, untl = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7]
local limit, n = tonumber(ARGV[8]), tonumber(ARGV[6])
local _, err = owner_claim(mesh, rid, lc, now)
if err then return err end
local lists, at = {}, {}
for i = 1, #KEYS do
  lists[i] = redis.call('ZRANGE', KEYS[i], '-inf', now, 'BYSCORE', 'LIMIT', 0, limit,
                        'WITHSCORES')
  at[i] = 1
end
local function bytes_before(a, b)
  for k = 1, math.min(#a, #b) do
    local x, y = string.byte(a, k), string.byte(b, k)
    if x ~= y then return x < y end
  end
  return #a < #b
end
-- Is the next entry of list i before the next entry of list j (score, then bytes)?
local function before(i, j)
  local a, b = lists[i], lists[j]
  local sa, sb = tonumber(a[at[i] + 1]), tonumber(b[at[j] + 1])
  if sa ~= sb then return sa < sb end
  return bytes_before(a[at[i]], b[at[j]])
end
local out = {'OK'}
local taken = 0
while taken < limit do
  local best = nil
  for i = 1, #lists do
    if at[i] < #lists[i] and (best == nil or before(i, best)) then best = i end
  end
  if best == nil then break end
  local member = lists[best][at[best]]
  at[best] = at[best] + 2
  local sep = string.find(member, '\0\0', 1, true)
  local id = string.gsub(string.sub(member, 1, sep - 1), '%z\1', '\0')
  local name = string.sub(member, sep + 2)
  local hk = P .. 'reminders:{' .. id .. '}'
  local raw = redis.call('HGET', hk, name)
  if raw then
    local t = cjson.decode(raw)
    if t[1] == mesh and tonumber(rem_wake(t)) <= n then
      t[7], t[8], t[9] = rid, lc, untl
      local enc = cjson.encode(t)
      redis.call('HSET', hk, name, enc)
      redis.call('ZADD', KEYS[best], rem_wake(t), member)
      out[#out + 1] = {id, name, enc}
      taken = taken + 1
    end
  end
end
return out
"""

#: Name -> Lua body of the reminder scripts (``take_reminders`` runs on one Redis only;
#: Redis Cluster takes through its hints: ``store.redis_cluster.reminders``).
REMINDER_BODIES: Final = {
    "set_reminder": _SET_REMINDER,
    "cancel_reminder": _CANCEL_REMINDER,
    "reminder_done": _REMINDER_DONE,
    "drop_reminders": _DROP_REMINDERS,
    "take_reminders": _TAKE_REMINDERS,
}
