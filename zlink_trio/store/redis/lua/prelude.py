"""The Lua prelude every script of both Redis backends is built from (each helper once).

Theory of operation
-------------------
Every store transaction is one script (``location``, ``relocation``, ``recovery``,
``operator``, ``combined``); :func:`script` puts the prelude in front of its body,
so every script sees the same names:

- The SpotAuthority chart (``authority``): the state and event names ``ST_*`` /
  ``EV_*``, the tags ``TAG_*`` and ``step`` -- scripts never spell a state, and take
  every new state from ``step`` among their checks.
- ``ARGV[1]`` is the Location key prefix ``P`` (``<prefix>:loc:``) and ``ARGV[2]``
  the Relocation key prefix ``R`` (``<prefix>:rel:``) -- ``ScriptRunner`` sends both
  first, on every call -- and a script's own arguments start at ``ARGV[3]``.
  ``KEYS`` name the keys the call is about; node and index keys are built from the
  prefixes (see ``codec`` for the layout).
- Record and claim access (``rec``, ``spot_key``, ``claim_key``, ``load_key``);
  counters (``shift`` on a hash field, ``count`` per state for the Location Store's
  statistics, ``rstat`` for the Relocation Store's); a record's state change
  (``transition``: StoreVersion and counts follow) and deletion
  (``release_record``); the owner and fence checks of ``store.rules.location``
  (``owner_claim``, ``load_of``, ``serves``, ``fenced``, ``fenced_in``); the
  ObjectGeneration sequence; Actor membership (``container_refusal``, the check of
  ``store.rules.location.check_container``, and the layout's ``leave`` /
  ``join_check`` / ``join_write`` / ``members_remain``: ``drop_record`` takes a deleted
  Actor out of its container's members and, while it moves, its next container's:
  ``unmember``); and the bodies that more than one script runs:
  Reserve (``reserve_spot``), CommitReady (``commit_ready_spot``), the pointer CAS
  (``pointer_removal`` / ``remove_pointer``), roots (``put_root`` / ``drop_root``)
  and inboxes (``inbox_append``, ``cursor_move`` / ``move_cursor``); a Spot's durable
  writes (``state_writer``: the fence check of ``store.rules.state``) and its reminders
  (``rem_member``, ``rem_wake``, ``rem_next_due``, ``rem_drop_all``: ``reminders``).
  A helper that checks returns an error reply (a table) when it refuses and writes nothing; its
  writes are a separate helper or come after every check, because Redis runs a
  script atomically but has no rollback.

**One prelude, two layouts.** The Redis Cluster backend runs the same script bodies in
one bucket's hash slot (``store.redis_cluster.lua``). The helpers that depend on where
the keys live -- the names ``P`` / ``R`` / ``META`` / ``RSTATS``, ``spot_key`` /
``load_key`` / ``shift``, the owner checks, Actor membership, the ObjectGeneration
sequence, where a reminder's due index lives -- are the six fields of a
:class:`PreludeLayout`; every other helper is written once here, and :func:`prelude`
puts the layout's helpers in their places among them. :data:`ONE_REDIS` is one
server's layout (:data:`PRELUDE`, every single-Redis script's), and the cluster's bucket
layout is ``redis_cluster.lua``'s.

A script body that starts with a shebang (``#!lua flags=no-writes``: read-only
scripts that must run while writes are refused) keeps it as its first line.
"""

from __future__ import annotations

from typing import Final

import attrs

from zlink_trio.store.redis.lua.authority import AUTHORITY_LUA

__all__ = ("ONE_REDIS", "PRELUDE", "PreludeLayout", "prelude", "script")

# -- one Redis server: the layout's own helpers ----------------------------------------

#: The prefixes ``P`` / ``R`` (``ARGV[1]`` / ``ARGV[2]``) and the store-wide keys.
_HEAD: Final = r"""
local P = ARGV[1]
local R = ARGV[2]
local MAXGEN = '9223372036854775807'
local META = P .. 'meta:{m}:'
local RSTATS = R .. 'meta:{m}:stats'
"""

#: Where a Spot's and a node's keys are; ``shift`` writes a counter where it is.
_KEYS: Final = r"""
local function spot_key(id) return P .. 'spot:{' .. id .. '}' end
local function claim_key(mesh, rid) return P .. 'node:{' .. rid .. '}:claim:' .. mesh end
local function load_key(mesh, rid, lc)
  return P .. 'node:{' .. rid .. '}:load:' .. lc .. ':' .. mesh
end
local function shift(key, field, delta)
  if redis.call('HINCRBY', key, field, delta) == 0 then redis.call('HDEL', key, field) end
end
"""

#: The owner checks (``store.rules.location``) read the claim and load keys.
_OWNER: Final = r"""
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
"""

#: Actor membership: the members set of each container, written with the records.
_MEMBERS: Final = r"""
local function members_key(c) return P .. 'members:{' .. c .. '}' end
-- Actor id's record no longer names container in the field whose mark's token is token
-- (Redis Cluster only); stays: its other field still names it (the end of a move into
-- the container it has), so it remains a member.
local function leave(id, container, token, stays)
  if not stays then redis.call('SREM', members_key(container), id) end
end
-- Reserve / MoveMembership / BeginRelocation: may Actor id join container for owner
-- (rid, lc)? nil, or the refusal (check_container). verdict is the split protocol's
-- (Redis Cluster).
local function join_check(id, container, rid, lc, verdict)
  return container_refusal(container, rid, lc)
end
-- The Actor's record at key now names container (written by the caller): as its
-- container, or as its next container when nxt (a move's, field 'nc').
local function join_write(key, id, container, verdict, nxt)
  redis.call('SADD', members_key(container), id)
end
-- BeginClose's members check of record r (after the owner's): nil when no Actor names
-- it, else the MEMBERS reply (codec: MembersRemain). first: unused here (Redis Cluster).
local function members_remain(r, first)
  local n = redis.call('SCARD', members_key(r.id))
  if n > 0 then return {'MEMBERS', redis.call('HGETALL', spot_key(r.id)), n} end
  return nil
end
-- The {key, record} pairs of r's members, by Actor ID, that pass keep(member).
local function members_of(r, keep)
  local out = {}
  local ids = redis.call('SMEMBERS', members_key(r.id))
  table.sort(ids)
  for _, id in ipairs(ids) do
    local k = spot_key(id)
    local m = rec(k)
    if m and keep(m) then out[#out + 1] = {k, m} end
  end
  return out
end
-- relocation_steps.carried_members: the members a SpotWide move of r carries.
local function carried(r)
  if r.kind == 'actor' then return {} end
  return members_of(r, is_carried)
end
-- How many members the move of r carries (group: carried(r) or carry_check's).
local function group_count(r, group) return #group end
-- Where a move keeps its group apart from its members' records (Redis Cluster only):
-- BeginRelocation's write of it on the record at key, and a step's refusal of r while
-- an ended move's group has not followed yet (nil: never here).
local function group_write(key) end
local function group_left(r) return nil end
-- BeginRelocation with carry_members: r's members, each a Ready Actor of r's owner in r
-- and in no move of its own ({key, record} pairs), or nil and {'MEMBER', r, member}
-- (codec: member_refusal). first: unused here (Redis Cluster).
local function carry_check(r, first)
  local bad = nil
  local group = members_of(r, function(m)
    local ok = m.state == ST_READY and m.orid == r.orid and m.olc == r.olc
      and m.container == r.id and not m.nc
    if not ok and bad == nil then bad = m end
    return true
  end)
  if bad then
    return nil, {'MEMBER', redis.call('HGETALL', spot_key(r.id)),
                 redis.call('HGETALL', spot_key(bad.id))}
  end
  return group
end
"""

#: The store-wide ObjectGeneration sequence.
_GENERATION: Final = r"""
local function next_gen()
  local seq = redis.call('GET', META .. 'seq')
  if seq == MAXGEN then return nil end
  return true
end
local function issue_gen()
  redis.call('INCR', META .. 'seq')
  return redis.call('GET', META .. 'seq')
end
"""


@attrs.frozen(kw_only=True)
class PreludeLayout:
    """The prelude's helpers that depend on where a script runs (the module docstring).

    Each field is Lua that defines the names the shared helpers and the script bodies
    call; :data:`ONE_REDIS` is one Redis server's, ``redis_cluster.lua`` has a bucket's.
    """

    #: ``P``, ``R``, ``MAXGEN``, ``META``, ``RSTATS`` and anything the layout adds.
    head: str
    #: ``spot_key``, ``load_key`` and ``shift`` (one Redis also: ``claim_key``).
    keys: str
    #: ``owner_claim``, ``load_of`` and ``serves``.
    owner: str
    #: Actor membership: ``leave``, ``join_check``, ``join_write``, ``members_remain``,
    #: ``carried``, ``carry_check``, ``group_count``, ``group_write`` and ``group_left``
    #: (they may call ``container_refusal`` and ``is_carried``; the shared ``unmember``
    #: calls ``leave``).
    members: str
    #: ``next_gen`` and ``issue_gen``.
    generation: str
    #: Where a reminder's due index lives: ``rem_index``, ``rem_unindex`` and
    #: ``rem_hint_refusal`` (``lua.reminders``).
    reminders: str


#: The due index of reminders: one sorted set per Mesh and partition, written by the
#: scripts that write the reminders (``codec``, ``lua.reminders``).
_REMINDERS: Final = r"""
local function due_key(mesh, part) return META .. 'due:' .. part .. ':' .. mesh end
-- Member is due at wake (a score text) in the index of (mesh, partition part).
local function rem_index(mesh, part, member, wake)
  redis.call('ZADD', due_key(mesh, part), wake, member)
end
local function rem_unindex(mesh, part, member) redis.call('ZREM', due_key(mesh, part), member) end
-- A write that gives a reminder of mesh the wake wake: its index entry is written with it
-- here, so it never waits for a hint (Redis Cluster: redis_cluster.reminders).
local function rem_hint_refusal(wkey, part, hmesh, hscore, token, mesh, wake) return nil end
"""

#: One Redis server: every key under the prefixes, read and written where it is.
ONE_REDIS: Final = PreludeLayout(head=_HEAD, keys=_KEYS, owner=_OWNER, members=_MEMBERS,
                                 generation=_GENERATION, reminders=_REMINDERS)

# -- the helpers every layout shares -----------------------------------------------------

#: Reading a record.
_RECORDS: Final = r"""
local function rec(key)
  local flat = redis.call('HGETALL', key)
  if #flat == 0 then return nil end
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end
"""

#: Counters, a record's state change, the status replies.
_COUNTERS: Final = r"""
local function count(state, delta) shift(META .. 'counts', state, delta) end
-- The record at key goes from state old to new (the target step gave): its StoreVersion
-- + 1, the counts follow.
local function transition(key, old, new)
  redis.call('HSET', key, 'state', new)
  redis.call('HINCRBY', key, 'ver', 1)
  count(old, -1)
  count(new, 1)
end
-- The Relocation Store's running counts (roots, root_bytes, inboxes, inbox_records).
local function rstat(field, delta)
  if delta ~= 0 and redis.call('HINCRBY', RSTATS, field, delta) == 0 then
    redis.call('HDEL', RSTATS, field)
  end
end
local function reply(key) return {'OK', redis.call('HGETALL', key)} end
local function stale(key) return {'STALE', redis.call('HGETALL', key)} end
"""

#: The container check of ``store.rules.location.check_container``.
_CONTAINER: Final = r"""
-- nil when container is the Ready record of an Entry or User Spot that (rid, lc) owns,
-- else {'CONTAINER', container, its record or {}, rid, lc}: codec.raise_status words it
-- with the oracle's container_refusal.
local function container_refusal(container, rid, lc)
  local k = rec(spot_key(container))
  if k and (k.kind == 'entry' or k.kind == 'user') and k.orid == rid and k.olc == lc
      and k.state == ST_READY then
    return nil
  end
  return {'CONTAINER', container, redis.call('HGETALL', spot_key(container)), rid, lc}
end
-- relocation_steps.is_carried: an Actor carried by its container's SpotWide move (it
-- moves, and names no next container).
local function is_carried(r)
  return r.kind == 'actor' and not r.nc
    and (r.state == ST_RELOCATING or r.state == ST_SEALED or r.state == ST_RELAY_READY)
end
"""

#: The fence checks and a record's deletion.
_FENCES: Final = r"""
local function fenced(r, gen, ogen, rid, lc)
  return r ~= nil and r.gen == gen and r.ogen == ogen and r.orid == rid and r.olc == lc
end
-- The record at KEYS[1] when it matches the fence ARGV[3..6] (gen, ogen, rid, lc) and
-- is in one of the given states; else nil and the STALE reply (as the oracle's moves).
local function fenced_in(...)
  local r = rec(KEYS[1])
  if fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) then
    for _, state in ipairs({...}) do
      if r.state == state then
        if is_carried(r) then return nil, {'CARRIED', redis.call('HGETALL', KEYS[1])} end
        return r
      end
    end
  end
  return nil, stale(KEYS[1])
end
-- An Actor's record r names neither of its containers any more (it is deleted): it
-- leaves its container and, while it moves, its next container.
local function unmember(r)
  if r.container then leave(r.id, r.container, r.mt) end
  if r.nc then leave(r.id, r.nc, r.nmt) end
end
local function drop_record(r)
  unmember(r)
  redis.call('DEL', spot_key(r.id))
  redis.call('ZREM', META .. 'ids', r.id)
  count(r.state, -1)
end
-- Delete record r and give back its owner's unit (field: 'pending' or 'active').
local function release_record(r, field)
  drop_record(r)
  shift(load_key(r.mesh, r.orid, r.olc), field, -1)
end
"""

#: The bodies more than one script runs.
_BODIES: Final = r"""
-- Reserve (Missing -> Creating) of KEYS[1]: ARGV[o..o+6] are id, kind, stable type,
-- mesh, rid, lc, now; ARGV[first..] the record's extra field/value pairs; container the
-- Actor's container ('' for a Spot) and verdict the layout's (join_check). Every check
-- before the first write. Returns nil, generation, lease expiry -- or an error reply.
local function reserve_spot(o, first, container, verdict)
  local id, kind, stype, mesh, rid, lc, now =
    ARGV[o], ARGV[o + 1], ARGV[o + 2], ARGV[o + 3], ARGV[o + 4], ARGV[o + 5], ARGV[o + 6]
  local cur = redis.call('HGETALL', KEYS[1])
  if #cur > 0 then return {'EXISTS', cur} end
  local c, err = owner_claim(mesh, rid, lc, now)
  if err then return err end
  if container ~= '' then
    local jerr = join_check(id, container, rid, lc, verdict)
    if jerr then return jerr end
  end
  if not serves(mesh, rid, stype, kind) then return {'NOT_SERVED', rid, stype, kind} end
  local load = load_of(mesh, rid, lc)
  if load >= tonumber(c.cap) then return {'CAPACITY', rid, tostring(load), c.cap} end
  if not next_gen() then return {'GEN_SPENT'} end
  local new, serr = step(ST_MISSING, EV_RESERVE)
  if serr then return serr end
  -- writes
  local gen = issue_gen()
  -- one HSET with the optional fields (ARGV[first..], pairs) after the fixed ones
  redis.call('HSET', KEYS[1], 'id', id, 'kind', kind, 'type', stype, 'mesh', mesh,
             'state', new, 'gen', gen, 'ogen', '1', 'ver', '1', 'orid', rid, 'olc', lc,
             unpack(ARGV, first))
  if container ~= '' then
    redis.call('HSET', KEYS[1], 'container', container)
    join_write(KEYS[1], id, container, verdict)
  end
  redis.call('ZADD', META .. 'ids', 0, id)
  shift(load_key(mesh, rid, lc), 'pending', 1)
  count(new, 1)
  return nil, gen, c.exp
end
-- CommitReady (Creating -> Ready) of KEYS[1]: ARGV[3..9] are gen, ogen, rid, lc, the
-- reservation's StoreVersion, that + 1, now. Returns nil, true after the writes; nil,
-- false when this very commit already happened (nothing written); or an error reply.
local function commit_ready_spot()
  local r = rec(KEYS[1])
  if fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) then
    if r.state == ST_READY and r.ver == ARGV[8] then return nil, false end
    if r.state == ST_CREATING and r.ver == ARGV[7] then
      local _, err = owner_claim(r.mesh, r.orid, r.olc, ARGV[9])
      if err then return err end
      if r.ver == MAXGEN then return {'SPENT'} end
      local new, serr = step(r.state, EV_COMMIT_READY)
      if serr then return serr end
      -- writes
      redis.call('HDEL', KEYS[1], 'ir', 'ish', 'isz')
      transition(KEYS[1], r.state, new)
      local lk = load_key(r.mesh, r.orid, r.olc)
      shift(lk, 'pending', -1)
      shift(lk, 'active', 1)
      return nil, true
    end
  end
  return stale(KEYS[1])
end
-- RemoveRecoveryPointer's checks on spot key sk: nil and whether it removes (false: gone,
-- another generation, no pointer), or an error reply. remove_pointer does the writes.
local function pointer_removal(sk, gen, ver)
  local r = rec(sk)
  if r == nil or r.gen ~= gen then return nil, false end
  if r.state == ST_CREATING then return {'INVALID', ST_CREATING, ''} end
  if r.pr == nil then return nil, false end
  if r.ver ~= ver then return stale(sk) end
  if r.ver == MAXGEN then return {'SPENT'} end
  return nil, true
end
local function remove_pointer(sk)
  redis.call('HDEL', sk, 'pr', 'psh', 'psz', 'pv')
  redis.call('HINCRBY', sk, 'ver', 1)
end
-- A root's bytes at key: stored unless already there (content addressed); 1 or 0.
local function put_root(key, data)
  if redis.call('EXISTS', key) == 1 then return 0 end
  redis.call('SET', key, data)
  rstat('roots', 1)
  rstat('root_bytes', #data)
  return 1
end
-- Delete the root at key whose stored bytes are v.
local function drop_root(key, v)
  redis.call('DEL', key)
  rstat('roots', -1)
  rstat('root_bytes', -#v)
end
-- Append data to the inbox ik (hash last/cursor) with log lk; returns the new sequence.
local function inbox_append(ik, lk, data)
  if redis.call('EXISTS', ik) == 0 then
    redis.call('HSET', ik, 'last', 0, 'cursor', 0)
    rstat('inboxes', 1)
  end
  redis.call('HINCRBY', ik, 'last', 1)
  local seq = redis.call('HGET', ik, 'last')
  redis.call('HSET', lk, seq, data)
  rstat('inbox_records', 1)
  return seq
end
-- InboxSetCursor's checks of inbox ik to sequence seq (text): nil, whether the cursor
-- moves, and the current cursor -- or an error reply. move_cursor does the writes.
local function cursor_move(ik, seq)
  local m = redis.call('HMGET', ik, 'last', 'cursor')
  local last = tonumber(m[1]) or 0
  local cursor = tonumber(m[2]) or 0
  local n = tonumber(seq)
  if n < cursor then return {'BACK', tostring(m[2] or '0')} end
  if n > last then return {'PAST', tostring(m[1] or '0')} end
  return nil, not (n == cursor or not m[1]), cursor
end
local function move_cursor(ik, lk, cursor, seq)
  local n = tonumber(seq)
  local batch = {}
  for s = cursor + 1, n do
    batch[#batch + 1] = string.format('%d', s)
    if #batch == 1000 then
      redis.call('HDEL', lk, unpack(batch))
      batch = {}
    end
  end
  if #batch > 0 then redis.call('HDEL', lk, unpack(batch)) end
  redis.call('HSET', ik, 'cursor', seq)
  rstat('inbox_records', cursor - n)
end
"""


#: A Spot's durable writes: the fence check of ``store.rules.state.owning_record``, and
#: the reminder helpers every layout shares (``lua.reminders`` has the encoding).
_DURABLE: Final = r"""
-- The record at KEYS[1] when the fence ARGV[3..6] (gen, ogen, rid, lc) owns it, it
-- serves (rules.state.WRITING) and its owner's claim is live at now; else nil and the
-- refusal: {'STATE_STALE', record or {}}, {'STATE_IDLE', record} or owner_claim's.
local function state_writer(now)
  local r = rec(KEYS[1])
  if not fenced(r, ARGV[3], ARGV[4], ARGV[5], ARGV[6]) then
    if r == nil then return nil, {'STATE_STALE', {}} end
    return nil, {'STATE_STALE', redis.call('HGETALL', KEYS[1])}
  end
  if not (r.state == ST_READY or r.state == ST_RELOCATING or r.state == ST_SEALED
          or r.state == ST_CLOSING) then
    return nil, {'STATE_IDLE', redis.call('HGETALL', KEYS[1])}
  end
  local _, err = owner_claim(r.mesh, r.orid, r.olc, now)
  if err then return nil, err end
  return r
end
-- The index member of reminder name of Spot id: the ID with NUL escaped (NUL 1), NUL
-- NUL, the name (which holds no NUL), so byte order is (ID, name) order.
local function rem_member(id, name) return (string.gsub(id, '%z', '\0\1')) .. '\0\0' .. name end
-- When reminder t (decoded) may be taken next: its due, or the end of a take past it.
local function rem_wake(t)
  if t[7] ~= '' and tonumber(t[9]) > tonumber(t[4]) then return t[9] end
  return t[4]
end
-- rules.reminders.next_due, the same float operations in the same order, as text that
-- reads back as the same float (%.17g).
local function rem_next_due(due, period, now)
  local d, p, n = tonumber(due), tonumber(period), tonumber(now)
  local nxt
  if n < d then
    nxt = d + p
  else
    nxt = d + (math.floor((n - d) / p) + 1) * p
    while nxt <= n do nxt = nxt + p end
  end
  return string.format('%.17g', nxt)
end
-- Delete every reminder of Spot id (hash key, partition part) and its index entries;
-- how many there were.
local function rem_drop_all(key, id, part)
  local flat = redis.call('HGETALL', key)
  for i = 1, #flat, 2 do
    rem_unindex(cjson.decode(flat[i + 1])[1], part, rem_member(id, flat[i]))
  end
  redis.call('DEL', key)
  return #flat / 2
end
"""


def prelude(layout: PreludeLayout = ONE_REDIS) -> str:
    """The prelude on ``layout``: the shared helpers, each layout helper in its place."""
    parts = (AUTHORITY_LUA, layout.head, _RECORDS, layout.keys, _COUNTERS, layout.owner,
             _CONTAINER, layout.members, _FENCES, layout.generation, _BODIES,
             layout.reminders, _DURABLE)
    # Each part opens on a line of its own in this file; the Lua has no blank lines.
    return "\n" + "".join(part.removeprefix("\n") for part in parts)


#: The prelude of every single-Redis script (see the module docstring).
PRELUDE: Final = prelude()


def script(body: str, layout: PreludeLayout = ONE_REDIS) -> str:
    """The full Lua source of a script: the prelude on ``layout``, then ``body``."""
    head = PRELUDE if layout is ONE_REDIS else prelude(layout)
    # A shebang must stay the first line, so the prelude goes after it.
    if body.startswith("#!"):
        first, _, rest = body.partition("\n")
        return f"{first}\n{head}\n{rest}"
    return f"{head}\n{body}"
