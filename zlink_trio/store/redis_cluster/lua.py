"""The Redis Cluster backend's Lua: bucket scripts (the single-Redis bodies) and node scripts.

Theory of operation
-------------------
**Bucket scripts** run in one bucket's slot. They are the single-Redis backend's own
script bodies (``store.redis.lua``), run after the one prelude on its *bucket layout*
(:data:`BUCKET`, a ``PreludeLayout``): the helpers that would reach outside the Spot's
slot are the bucket's own, every other helper is the prelude's:

- ``ARGV[1]`` carries, besides the Location prefix ``P``, the bucket's tag, the
  bucket count ``B``, the bucket's index and the **facts** (JSON) the runner read from
  the nodes slot just before: the claims of the NodeRids involved and the capacity
  units it took. ``owner_claim``, ``serves`` and ``load_of`` answer from the facts;
  when a script needs a fact it was not given (the claim of a NodeRid read from the
  record, a capacity unit) it stops before its first write and asks for it
  (``{'FACTS', rid}`` / ``{'TAKE', mesh, rid, lc}``); the runner fetches it and sends
  the script again (``runner``).
- Changes to a lifecycle's load (``shift`` on ``load_key``) are counted in the bucket
  (``owners``: lifecycle -> the units its records here hold, written with them) and
  returned beside the reply (``{reply, shifts}``) for the runner to apply in the nodes
  slot right after (a taken unit nets its own ``pending + 1``; a shift that changes no
  lifecycle's total waits for the next that does, ``runner``). The nodes slot's units
  are the capacity a node took (some ahead); the buckets' are the records' own, which
  RemoveDeadClaims reads (``dead_mark``, ``location``). It first marks the lifecycles
  it may remove dead in each bucket (``dead``: NodeId and Mesh -> the newest such
  lifecycle),
  and ``owner_claim`` refuses a lifecycle marked there whatever the facts say: so no
  unit is counted for it after the mark.
- ``META`` / ``spot_key`` / ``RSTATS`` name the bucket's keys (``keys``); the
  ObjectGeneration is the bucket's: ``gen`` starts at the bucket's index and grows by
  ``B`` (``INCRBY``), so generations are strictly increasing per Spot ID (an ID never
  changes bucket) and unique store-wide, with no store-wide counter.

- Actor membership is the layout's too: an Actor's record carries the token of its
  mark in the container's bucket (``mt``; ``nmt`` for the next container of a move to
  another node), a deletion, a MoveMembership or the end of such a move hands the
  marks it leaves back beside the reply (``{reply, shifts, unmarks}``) for the runner
  to drop there, and BeginClose and a Spot's BeginRelocation answer the marks they find
  (``MARKS``) instead of counting members. ``member_mark`` and ``member_verify`` are the
  protocol's parts in the container's and the Actor's bucket, and Reserve has its own
  body (the container's verdict among its arguments; MoveMembership and BeginRelocation
  take it after theirs): ``membership`` tells the whole protocol.
- Reminders are the layout's too: a Spot's reminders are in its bucket, but their due
  index is not, so the bucket writes no index entry (``rem_index`` / ``rem_unindex`` do
  nothing) and a write that sets a wake asks for a due hint written first
  (``rem_hint_refusal``: ``REM_HINT``, ``REM_BANNED``; ``reminders``).

**Node scripts** run in the nodes slot (``{nodes}``): claims as JSON in one hash,
lifecycles, capacity units, and the checks that read them. NewClaim, Remove and
RemoveDeadClaims are a node script plus bucket scripts for the Entry record
(``location``).

**Hint scripts** run in one reminder partition's slot (``{rp<p>}``): the due hints of
its reminders, written before the reminder's own bucket script, read by a take and fixed
after it (``reminders`` has the protocol and why a hint is never late). ``reminder_take``
is the bucket half of that take.

All kinds declare every key they touch (the runner appends the bucket's counter keys),
so while ``redis-cli --cluster reshard`` migrates a slot a script either sees all of
its keys or is answered ``TRYAGAIN`` / ``ASK`` -- never half a bucket.
"""

from __future__ import annotations

from typing import Final

from zlink_trio.store.redis.lua import BODIES
from zlink_trio.store.redis.lua.prelude import PreludeLayout, script

__all__ = ("BUCKET", "BUCKET_SCRIPTS", "HINT_SCRIPTS", "NODE_SCRIPTS", "bucket_script")

# -- the prelude's bucket layout -----------------------------------------------------------

#: ``ARGV[1]`` split into ``P``, the bucket's tag, ``B``, its index and the facts.
_HEAD: Final = r"""
local P, TAG, NB, BIDX, FJ = string.match(ARGV[1], '^(.-)\n(.-)\n(.-)\n(.-)\n(.*)$')
local R = ARGV[2]
local MAXGEN = '9223372036854775807'
local META = P .. '{' .. TAG .. '}:'
local RSTATS = R .. '{' .. TAG .. '}:stats'
local F = cjson.decode(FJ)
local DEFER = {}
local function need(t) error({zl_need = t}) end
-- a < b, both decimal texts without leading zeros (generations and tokens never pass
-- through doubles).
local function dec_lt(a, b)
  if #a ~= #b then return #a < #b end
  for k = 1, #a do
    local x, y = string.byte(a, k), string.byte(b, k)
    if x ~= y then return x < y end
  end
  return false
end
local function claimf(mesh, rid)
  if F.f[rid] == nil then need({'FACTS', rid}) end
  return F.c[rid .. '|' .. mesh]
end
"""

#: The bucket's keys; a load shift is deferred to the runner (``DEFER``), and counted in
#: the bucket's ``owners`` per lifecycle (``OWNED``: the net of the script's shifts,
#: written when its body returns -- CommitReady's ``pending -> active`` writes nothing).
_KEYS: Final = r"""
local function spot_key(id) return P .. '{' .. TAG .. '}:spot:' .. id end
local function load_key(mesh, rid, lc) return {mesh, rid, lc} end
local OWNED = {}
local function shift(key, field, delta)
  if type(key) == 'table' then
    DEFER[#DEFER + 1] = {key[1], key[2], key[3], field, tostring(delta)}
    local f = key[1] .. '|' .. key[2] .. '|' .. key[3]
    OWNED[f] = (OWNED[f] or 0) + delta  -- written once the body returns (bucket_script)
    return
  end
  if redis.call('HINCRBY', key, field, delta) == 0 then redis.call('HDEL', key, field) end
end
"""

#: The owner checks answer from the facts (``need`` when one is missing), and a lifecycle
#: RemoveDeadClaims marked dead in this bucket (``dead_mark``) owns nothing new here.
_OWNER: Final = r"""
-- Whether RemoveDeadClaims marked lifecycle lc of NodeId node in mesh dead in this
-- bucket: it marks every lifecycle of the NodeId in the Mesh up to the newest dead one.
local function dead_here(node, mesh, lc)
  local w = redis.call('HGET', META .. 'dead', node .. '|' .. mesh)
  if not w then return false end
  return not dec_lt(w, lc)
end
local function owner_claim(mesh, rid, lc, now)
  local c = claimf(mesh, rid)
  if c == nil or c.lc ~= lc or dead_here(c.node, mesh, lc) then
    return nil, {'STALE_OWNER', rid, lc, mesh}
  end
  if not (tonumber(now) < tonumber(c.exp)) then return nil, {'EXPIRED', rid, lc, c.exp} end
  return c
end
-- The load before the unit the runner took for this lifecycle (asked for when absent).
local function load_of(mesh, rid, lc)
  local t = F.t[mesh .. '|' .. rid .. '|' .. lc]
  if t == nil then need({'TAKE', mesh, rid, lc}) end
  return tonumber(t)
end
local function serves(mesh, rid, stype, kind)
  local c = claimf(mesh, rid)
  return c ~= nil and c.serves[stype] == kind
end
"""

#: Actor membership as the split protocol's parts in the Actor's bucket
#: (``membership``): a join carries the mark token its container's bucket issued, a
#: mark whose token was banned is refused, and a record's removal from its container is
#: handed back (``UNMARK``) for the runner to drop the mark there.
_MEMBERS: Final = r"""
local UNMARK = {}
local function members_key(c) return META .. 'members:' .. c end
local function bans_key(id) return META .. 'bans:' .. id end
-- Actor id's record no longer names container in the field whose mark's token is token:
-- that mark goes back to the runner -- also when its other field still names container
-- (stays: the end of a move into the container it has), which has a mark of its own.
local function leave(id, container, token, stays)
  UNMARK[#UNMARK + 1] = {container, (token or '') .. ':' .. id}
end
-- verdict: the token of the mark the container's bucket added ('' = it refused the join:
-- JOIN_REFUSED, the caller raises that refusal). A banned token is refused, and its ban
-- (needed by no one else) dropped: the one write of a refused join.
local function join_check(id, container, rid, lc, verdict)
  if verdict == nil or verdict == '' then return {'JOIN_REFUSED'} end
  if redis.call('SREM', bans_key(id), verdict) == 1 then return {'JOIN_REVOKED', container} end
  return nil
end
-- The record keeps its mark's token: 'mt' for its container, 'nmt' for its next one.
local function join_write(key, id, container, verdict, nxt)
  redis.call('HSET', key, nxt and 'nmt' or 'mt', verdict)
end
-- BeginClose: drop the marks ARGV[first..] (checked gone in their Actors' buckets);
-- nil when none is left, else {'MARKS', record, marks}: the caller checks them.
local function members_remain(r, first)
  local mk = members_key(r.id)
  for i = first, #ARGV do redis.call('SREM', mk, ARGV[i]) end
  if redis.call('SCARD', mk) == 0 then return nil end
  return {'MARKS', redis.call('HGETALL', spot_key(r.id)), redis.call('SMEMBERS', mk)}
end
-- A SpotWide move's carried members live in other buckets (redis_cluster.carry): the
-- Spot's record keeps their Actor IDs ('grp', JSON) from BeginRelocation until every
-- one has followed the move's end; the Spot's steps count them from there, and the
-- members' own steps are carry_follow's, in their buckets. carried finds none here.
local CARRY = nil
local function carried(r) return {} end
local function group_ids(r)
  if CARRY then return CARRY end
  if r.grp then return cjson.decode(r.grp) end
  return {}
end
local function group_count(r, group) return #group_ids(r) end
local function group_write(key)
  if CARRY and #CARRY > 0 then redis.call('HSET', key, 'grp', cjson.encode(CARRY)) end
end
local function group_left(r)
  if r.grp then return {'GROUP', redis.call('HGETALL', spot_key(r.id))} end
  return nil
end
-- BeginRelocation with carry_members: the marks ARGV[first..] were checked -- dropped,
-- or accepted as members when '+'-prefixed. When every mark left is accepted, their
-- Actors are the group (CARRY); else {'MARKS', record, marks}: the caller checks them.
local function carry_check(r, first)
  local mk = members_key(r.id)
  local accepted = {}
  for i = first, #ARGV do
    local a = ARGV[i]
    if string.sub(a, 1, 1) == '+' then accepted[string.sub(a, 2)] = true
    else redis.call('SREM', mk, a) end
  end
  local marks = redis.call('SMEMBERS', mk)
  local ids, seen = {}, {}
  for _, m in ipairs(marks) do
    if not accepted[m] then
      return nil, {'MARKS', redis.call('HGETALL', spot_key(r.id)), marks}
    end
    local id = string.match(m, '^[^:]*:(.*)$')
    if not seen[id] then
      seen[id] = true
      ids[#ids + 1] = id
    end
  end
  table.sort(ids)
  CARRY = ids
  return {}
end
"""

#: The bucket's ObjectGeneration: its index, then + ``B`` per issue.
_GEN: Final = r"""
local function next_gen()
  local g = redis.call('GET', META .. 'gen')
  if g and tonumber(g) >= 9.2e18 then return nil end
  return true
end
local function issue_gen()
  if redis.call('EXISTS', META .. 'gen') == 0 then redis.call('SET', META .. 'gen', BIDX) end
  redis.call('INCRBY', META .. 'gen', NB)
  return redis.call('GET', META .. 'gen')
end
"""


#: Reminders (``reminders``): the due index is a hint in its partition's slot, written
#: by the caller before the bucket script, so the bucket writes none; a write that sets a
#: wake stands only on such a hint whose token no take has swept since.
_REMINDERS: Final = r"""
local function rem_index(mesh, part, member, wake) end
local function rem_unindex(mesh, part, member) end
-- nil when the caller wrote a hint for this write -- in mesh's index, at most wake, with
-- token -- and no take swept the partition's hints past that token since (the
-- watermark, wkey's field part); else {'REM_HINT', wake, mesh}: write that hint, or
-- {'REM_BANNED'}: write a new one, then send the script again.
local function rem_hint_refusal(wkey, part, hmesh, hscore, token, mesh, wake)
  if hmesh ~= mesh or hscore == '' or tonumber(wake) < tonumber(hscore) then
    return {'REM_HINT', wake, mesh}
  end
  local w = redis.call('HGET', wkey, part)
  if w and not dec_lt(w, token) then return {'REM_BANNED'} end
  return nil
end
"""

#: The prelude's bucket layout (``store.redis.lua.prelude``): every other helper is the
#: single-Redis prelude's own.
BUCKET: Final = PreludeLayout(head=_HEAD, keys=_KEYS, owner=_OWNER, members=_MEMBERS,
                              generation=_GEN, reminders=_REMINDERS)


def bucket_script(body: str) -> str:
    """A bucket script: the prelude on :data:`BUCKET`, then ``body`` run so that a request
    for a fact (``need``) stops it before any write; once it returned, its load shifts
    are counted in the bucket (``owners``, net per lifecycle), and they and the member
    marks to drop go back with the reply (``{reply, shifts, unmarks}``)."""
    shebang = ""
    if body.startswith("#!"):
        shebang, _, body = body.partition("\n")
        shebang += "\n"
    return script(f"{shebang}local zl_ok, zl_r = pcall(function()\n{body}\nend)\n"
                  "if not zl_ok then\n"
                  "  if type(zl_r) == 'table' and zl_r.zl_need then\n"
                  "    return {zl_r.zl_need, {}, {}}\n"
                  "  end\n"
                  "  error(zl_r)\nend\n"
                  "for f, d in pairs(OWNED) do\n"
                  "  if d ~= 0 and redis.call('HINCRBY', META .. 'owners', f, d) == 0 then\n"
                  "    redis.call('HDEL', META .. 'owners', f)\n"
                  "  end\nend\n"
                  "if zl_r == nil then zl_r = false end\n"
                  "return {zl_r, DEFER, UNMARK}\n", BUCKET)


def _swap(text: str, old: str, new: str) -> str:
    if old not in text:
        raise AssertionError(f"a single-Redis script body changed; cannot find:\n{old}")
    return text.replace(old, new)


#: Single-Redis bodies that run unchanged in one bucket.
_AS_IS: Final = (
    "commit_ready", "abort_creating", "begin_close", "release",
    "remove_recovery_pointer", "begin_relocation", "seal_relocation", "accept_relay_ready",
    "commit_relocation", "abort_relocation", "recovery_orphans", "rel_put_root",
    "rel_delete_root", "rel_inbox_append", "rel_inbox_read", "rel_inbox_set_cursor",
    "rel_inbox_drop", "rel_statistics", "commit_ready_with_first_record",
    "record_relocation_payload", "move_membership", "write_state", "set_reminder",
    "cancel_reminder", "reminder_done", "drop_reminders", "reserve_with_root",
    "finish_first_record",
)

# Claims are read from the facts instead of the node's claim key.
_CLAIM_READERS: Final = ("release_expired", "recovery_adopt_orphan", "release_relay_ready")

# KEYS: spot key, the Actor's bans. ARGV: P, R, id, kind, stable_type, mesh, rid, lc, now,
# container ('' = a Spot), the join's verdict (``join_check``), then record fields.
_RESERVE: Final = r"""
local err, gen, exp = reserve_spot(3, 12, ARGV[10], ARGV[11])
if err then return err end
return {'OK', gen, exp}
"""

# Part (a) of a join, in the container's bucket (``membership``). KEYS: the container's
# spot key, its members, the bucket's token counter. ARGV: P, R, container, actor id,
# rid, lc. The container check; when it passes, a new mark. {'OK', token} or CONTAINER.
_MEMBER_MARK: Final = r"""
local err = container_refusal(ARGV[3], ARGV[5], ARGV[6])
if err then return err end
local t = TAG .. '.' .. redis.call('INCR', KEYS[3])
redis.call('SADD', KEYS[2], t .. ':' .. ARGV[4])
return {'OK', t}
"""

# A mark's check, in the Actor's bucket (``membership``). KEYS: the Actor's spot key, its
# bans. ARGV: P, R, container, token. {'OK', 1, record} when the Actor's record names
# the container (as its container, or as its next one while it moves); else the token
# is banned (no join may use it any more) and {'OK', 0}.
_MEMBER_VERIFY: Final = r"""
local r = rec(KEYS[1])
if r and (r.container == ARGV[3] or r.nc == ARGV[3]) then
  return {'OK', 1, redis.call('HGETALL', KEYS[1])}
end
redis.call('SADD', KEYS[2], ARGV[4])
return {'OK', 0}
"""

# A carried member follows its Spot's step, in its own bucket (``carry``). KEYS: the
# Actor's spot key. ARGV: P, R, step (begin, sealing, relay, commit, abort, releasing), the
# Spot's ID, generation and owner generation when the move began, then for 'begin' the
# source's rid and lc and the target's. The member is the move's while it is carried in
# that Spot with those generations ('cgen', 'cog'). {'OK', 1} when it wrote, {'OK', 0}
# when it had nothing to do; refusals: 'begin' {'MEMBER', record} (not a Ready member of
# the Spot at the source, in no move of its own), NOT_SERVED, SPENT; 'sealing' {'MEMBER'}
# when the member is not the move's. Every later step walks the chart from where the
# member stands (a step that failed halfway is made up here).
_CARRY_FOLLOW: Final = r"""
local m = rec(KEYS[1])
local what, spot, cgen, cog = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local ours = m ~= nil and is_carried(m) and m.container == spot and m.cgen == cgen
  and m.cog == cog
local function refused()
  if m == nil then return {'MEMBER', {}} end
  return {'MEMBER', redis.call('HGETALL', KEYS[1])}
end
local function walk(events)
  local state = m.state
  for _, ev in ipairs(events) do
    local new, serr = step(state, ev)
    if serr then return nil, serr end
    state = new
  end
  return state
end
if what == 'begin' then
  local srid, slc, trid, tlc = ARGV[7], ARGV[8], ARGV[9], ARGV[10]
  if ours then return {'OK', 0} end
  if not (m and m.kind == 'actor' and m.state == ST_READY and m.orid == srid
          and m.olc == slc and m.container == spot and not m.nc) then
    return refused()
  end
  if not serves(m.mesh, trid, m.type, m.kind) then
    return {'NOT_SERVED', trid, m.type, m.kind}
  end
  if m.ver == MAXGEN then return {'SPENT'} end
  local new, serr = step(m.state, EV_BEGIN_RELOCATION)
  if serr then return serr end
  redis.call('HSET', KEYS[1], 'trid', trid, 'tlc', tlc, 'cgen', cgen, 'cog', cog)
  transition(KEYS[1], m.state, new)
  return {'OK', 1}
end
if not ours then
  if what == 'sealing' then return refused() end
  return {'OK', 0}
end
if what == 'releasing' then
  drop_record(m)  -- its unit went back with the Spot's (ReleaseRelayReady)
  return {'OK', 1}
end
if m.ver == MAXGEN then return {'SPENT'} end
local events
if what == 'sealing' or what == 'relay' then
  local want = what == 'sealing' and ST_SEALED or ST_RELAY_READY
  if m.state == want or m.state == ST_RELAY_READY then return {'OK', 0} end
  events = {EV_SEAL, EV_ACCEPT_RELAY_READY}
  if m.state == ST_SEALED then events = {EV_ACCEPT_RELAY_READY} end
  if what == 'sealing' then events = {EV_SEAL} end
elseif what == 'commit' then
  if m.ogen == MAXGEN then return {'SPENT'} end
  events = {EV_COMMIT_RELOCATION}
  if m.state == ST_SEALED then events = {EV_ACCEPT_RELAY_READY, EV_COMMIT_RELOCATION} end
  if m.state == ST_RELOCATING then
    events = {EV_SEAL, EV_ACCEPT_RELAY_READY, EV_COMMIT_RELOCATION}
  end
elseif what == 'abort' then
  if m.state == ST_RELAY_READY then return {'OK', 0} end  -- (its Spot cannot abort then)
  events = {EV_ABORT_RELOCATION}
else
  return {'INVALID', 'carry_step', what}
end
local new, serr = walk(events)
if serr then return serr end
if what == 'commit' then
  redis.call('HSET', KEYS[1], 'orid', m.trid, 'olc', m.tlc)
  redis.call('HINCRBY', KEYS[1], 'ogen', 1)
end
if new == ST_READY then redis.call('HDEL', KEYS[1], 'trid', 'tlc', 'cgen', 'cog') end
transition(KEYS[1], m.state, new)
return {'OK', 1}
"""

# The end of a move's group, in its Spot's bucket (``carry``): every carried member
# followed. KEYS: the Spot's spot key. ARGV: P, R, gen, ogen. Drops the group of the
# Ready record of those generations. {'OK', 1} when it did.
_GROUP_DONE: Final = r"""
local r = rec(KEYS[1])
if r and r.grp and r.gen == ARGV[3] and r.ogen == ARGV[4] and r.state == ST_READY then
  redis.call('HDEL', KEYS[1], 'grp')
  return {'OK', 1}
end
return {'OK', 0}
"""

# KEYS: inbox key, log key, spot key. ARGV: P, R, gen, seq, expected version.
# finish_first_record of a root kept in another bucket (one ``put_root`` stored), without
# the root (``relocation``).
_FINISH_FIRST_RECORD_APART: Final = r"""
local err, move, cursor = cursor_move(KEYS[1], ARGV[4])
if err then return err end
local perr, remove = pointer_removal(KEYS[3], ARGV[3], ARGV[5])
if perr then return perr end
if move then move_cursor(KEYS[1], KEYS[2], cursor, ARGV[4]) end
if remove then remove_pointer(KEYS[3]) end
return {'OK', move and 1 or 0, remove and 1 or 0}
"""

# The Entry record of a NewClaim. KEYS: entry spot key. ARGV: P, R, entry, rid, old lc
# ('' = no old claim), then (write) new lc, mesh. ENTRY_TAKEN unless the record is the
# old claim's own Entry; GEN_SPENT. The check alone with 'check'.
_ENTRY: Final = r"""
local entry, rid, old_lc, mode = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local e = rec(KEYS[1])
local own = e and old_lc ~= '' and e.kind == 'entry' and e.orid == rid and e.olc == old_lc
if e and not own then return {'ENTRY_TAKEN', entry} end
if not next_gen() then return {'GEN_SPENT'} end
if mode == 'check' then return {'OK'} end
if own then drop_record(e) end
local gen = issue_gen()
redis.call('HSET', KEYS[1], 'id', entry, 'kind', 'entry', 'type', 'zlink.entry',
           'mesh', ARGV[8], 'state', ST_READY, 'gen', gen, 'ogen', '1', 'ver', '1',
           'orid', rid, 'olc', ARGV[7])
redis.call('ZADD', META .. 'ids', 0, entry)
count(ST_READY, 1)
return {'OK', gen}
"""

# KEYS: spot key. ARGV: P, R, rid, lc. Drops the Entry record owned by (rid, lc).
_ENTRY_DROP: Final = r"""
local e = rec(KEYS[1])
if e and e.kind == 'entry' and e.orid == ARGV[3] and e.olc == ARGV[4] then
  drop_record(e)
  return {'OK', 1}
end
return {'OK', 0}
"""

# A take of one reminder by its due hint (``reminders``). KEYS: the Spot's reminders, the
# bucket's watermarks. ARGV: P, R, name, mesh, now, taker rid, taker lc, taken until,
# partition, the hint's token ('' none). First the watermark of the partition rises to the
# token (a write whose hint is that old is refused from now on); then {'GONE'} (no such
# reminder of mesh), {'WAKE', wake} (not due), or {'TOOK', encoded, wake before, wake}.
_REMINDER_TAKE: Final = r"""
local name, mesh, now, part, token = ARGV[3], ARGV[4], ARGV[5], ARGV[9], ARGV[10]
local w = redis.call('HGET', KEYS[2], part)
if token ~= '' and (not w or dec_lt(w, token)) then redis.call('HSET', KEYS[2], part, token) end
local raw = redis.call('HGET', KEYS[1], name)
if not raw then return {'GONE'} end
local t = cjson.decode(raw)
if t[1] ~= mesh then return {'GONE'} end
local wake = rem_wake(t)
if tonumber(wake) > tonumber(now) then return {'WAKE', wake} end
t[7], t[8], t[9] = ARGV[6], ARGV[7], ARGV[8]
local enc = cjson.encode(t)
redis.call('HSET', KEYS[1], name, enc)
return {'TOOK', enc, wake, rem_wake(t)}
"""

# RemoveDeadClaims' part in one bucket (``location``). KEYS: the bucket's dead marks.
# ARGV: P, R, NodeId, the count n of marks, n (mesh, lc) pairs, then candidates
# (``mesh|rid|lc``). First every lifecycle of NodeId in each mesh up to its lc is marked
# dead here (``dead_here``: from now on no script of this bucket gives such a lifecycle
# anything); then the units each candidate holds here.
_DEAD_MARK: Final = r"""
local node, n = ARGV[3], tonumber(ARGV[4])
for i = 5, 4 + 2 * n, 2 do
  if not dead_here(node, ARGV[i], ARGV[i + 1]) then
    redis.call('HSET', KEYS[1], node .. '|' .. ARGV[i], ARGV[i + 1])
  end
end
local out = {}
for i = 5 + 2 * n, #ARGV do
  out[#out + 1] = redis.call('HGET', META .. 'owners', ARGV[i]) or '0'
end
return out
"""

# ARGV: P, R. The bucket's counts, last generation and Relocation counts.
_BUCKET_STATISTICS: Final = r"""#!lua flags=no-writes
return {redis.call('HMGET', META .. 'counts', ST_CREATING, ST_READY, ST_CLOSING,
                   ST_RELOCATING, ST_SEALED, ST_RELAY_READY),
        redis.call('GET', META .. 'gen') or false,
        redis.call('HMGET', RSTATS, 'roots', 'root_bytes', 'inboxes', 'inbox_records')}
"""

#: Name -> full source of every bucket script.
BUCKET_SCRIPTS: Final = {
    **{name: bucket_script(BODIES[name]) for name in _AS_IS},
    **{name: bucket_script(_swap(BODIES[name], "rec(claim_key(", "claimf(").replace(
        "claimf(r.mesh, r.orid))", "claimf(r.mesh, r.orid)").replace(
        "claimf(r.mesh, orid))", "claimf(r.mesh, orid)").replace(
        "claimf(r.mesh, r.trid))", "claimf(r.mesh, r.trid)")) for name in _CLAIM_READERS},
    "reserve": bucket_script(_RESERVE),
    "member_mark": bucket_script(_MEMBER_MARK),
    "member_verify": bucket_script(_MEMBER_VERIFY),
    "carry_follow": bucket_script(_CARRY_FOLLOW),
    "group_done": bucket_script(_GROUP_DONE),
    "finish_first_record_apart": bucket_script(_FINISH_FIRST_RECORD_APART),
    "entry": bucket_script(_ENTRY),
    "entry_drop": bucket_script(_ENTRY_DROP),
    "dead_mark": bucket_script(_DEAD_MARK),
    "bucket_statistics": bucket_script(_BUCKET_STATISTICS),
    "reminder_take": bucket_script(_REMINDER_TAKE),
}

# -- node scripts (the nodes slot) ------------------------------------------------------

_NODE_PRELUDE: Final = r"""
local MAXGEN = '9223372036854775807'
local function claim_of(field)
  local j = redis.call('HGET', KEYS[1], field)
  if not j then return nil end
  return cjson.decode(j)
end
local function fields(c) return {c.desc, c.lc, c.exp, c.ver, c.closed or false} end
local function live(c, now) return tonumber(now) < tonumber(c.exp) end
"""

# KEYS: claims, load key. ARGV: field, lc, ahead, one. Takes pending units when the claim
# of this lifecycle is there: with one '1', a unit for the caller's script whenever one is
# free, and ahead more with it while twice that many would still be free; with one '0',
# ahead units while twice that many are free, else none. {taken, load before, every
# claim}.
_TAKE: Final = r"""
local c = claim_of(ARGV[1])
local took, load = 0, 0
if c and c.lc == ARGV[2] then
  local v = redis.call('HMGET', KEYS[2], 'pending', 'active')
  load = (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0)
  local free, ahead, one = tonumber(c.cap) - load, tonumber(ARGV[3]), tonumber(ARGV[4])
  if one <= free then took = one end
  if ahead > 0 and free - took >= 2 * ahead then took = took + ahead end
  if took > 0 then redis.call('HINCRBY', KEYS[2], 'pending', took) end
end
return {took, tostring(load), redis.call('HGETALL', KEYS[1])}
"""

# KEYS: load keys. ARGV: (field, delta) per key.
_SHIFT: Final = r"""
for i = 1, #KEYS do
  if redis.call('HINCRBY', KEYS[i], ARGV[2 * i - 1], ARGV[2 * i]) == 0 then
    redis.call('HDEL', KEYS[i], ARGV[2 * i - 1])
  end
end
return #KEYS
"""

# NewClaim's node checks. KEYS: claims, lifecycles. ARGV: now, node_id, rid, field,
# then (write) expected old lc ('' none), exp, entry, mesh, descriptor, capacity, then
# (stable type, kind) pairs. Check: {'OK', old lc or '', old entry or '', lc spent}.
_NEW_CLAIM: Final = r"""
local now, node_id, rid, field = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local old = claim_of(field)
if old and live(old, now) then return {'ALREADY', old.node, old.lc} end
for _, j in ipairs(redis.call('HVALS', KEYS[1])) do
  local c = cjson.decode(j)
  if c.node == node_id and c.rid ~= rid and live(c, now) then
    return {'NODE_LIVE', fields(c)}
  end
end
local spent = redis.call('HGET', KEYS[2], node_id) == MAXGEN
if #ARGV == 4 then
  return {'OK', old and old.lc or '', old and old.entry or '', spent and 1 or 0}
end
if (old and old.lc or '') ~= ARGV[5] then return {'RETRY'} end
if spent then return {'LC_SPENT'} end
redis.call('HINCRBY', KEYS[2], node_id, 1)
local lc = redis.call('HGET', KEYS[2], node_id)
local serves = {}
for i = 11, #ARGV, 2 do serves[ARGV[i]] = ARGV[i + 1] end
local c = {desc = ARGV[9], node = node_id, entry = ARGV[7], mesh = ARGV[8], rid = rid,
           lc = lc, exp = ARGV[6], ver = '1', cap = ARGV[10], serves = serves}
redis.call('HSET', KEYS[1], field, cjson.encode(c))
return {'OK', lc}
"""

# KEYS: claims. ARGV: field, lc, now, expires.
_RENEW: Final = r"""
local c = claim_of(ARGV[1])
if c == nil or c.lc ~= ARGV[2] then return {'STALE_OWNER', '', ARGV[2], ''} end
if not live(c, ARGV[3]) then return {'EXPIRED', c.rid, c.lc, c.exp} end
if c.ver == MAXGEN then return {'SPENT'} end
if tonumber(ARGV[4]) > tonumber(c.exp) then c.exp = ARGV[4] end
c.ver = tostring(tonumber(c.ver) + 1)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(c))
return {'OK', fields(c)}
"""

# KEYS: claims. ARGV: field, lc, closed ('1': ClosePlacement, '0': OpenPlacement).
_MARK_PLACEMENT: Final = r"""
local c = claim_of(ARGV[1])
if c == nil or c.lc ~= ARGV[2] then return {'OK', 0} end
local closed = ARGV[3] == '1'
if (c.closed ~= nil) == closed then return {'OK', 1} end
if c.ver == MAXGEN then return {'SPENT'} end
if closed then c.closed = '1' else c.closed = nil end
c.ver = tostring(tonumber(c.ver) + 1)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(c))
return {'OK', 1}
"""

# KEYS: claims. ARGV: field, lc. {1, entry} when removed, {0} otherwise.
_REMOVE: Final = r"""
local c = claim_of(ARGV[1])
if c == nil or c.lc ~= ARGV[2] then return {0} end
redis.call('HDEL', KEYS[1], ARGV[1])
return {1, c.entry}
"""

# KEYS: claims, then the load key of each candidate. ARGV: now, counted, then each
# candidate's field and lc. Deletes each candidate claim still there with that lc and
# expired -- counted '1': the caller found it owns nothing in any bucket (``dead_mark``),
# and its load key goes too (units it took ahead included); '0' (a deployment from before
# the buckets counted units, ``location``): only with no capacity unit (its total: a
# shift within the lifecycle lost with a process may leave it split wrongly, ``runner``).
# Returns (field, entry, rid, lc) of each.
_REMOVE_DEAD: Final = r"""
local out = {}
for i = 2, #KEYS do
  local field, lc = ARGV[2 * i - 1], ARGV[2 * i]
  local c = claim_of(field)
  if c and c.lc == lc and not live(c, ARGV[1]) then
    local v = redis.call('HMGET', KEYS[i], 'pending', 'active')
    if ARGV[2] == '1' or (tonumber(v[1]) or 0) + (tonumber(v[2]) or 0) <= 0 then
      redis.call('HDEL', KEYS[1], field)
      if ARGV[2] == '1' then redis.call('DEL', KEYS[i]) end
      out[#out + 1] = {field, c.entry, c.rid, c.lc}
    end
  end
end
return out
"""

# KEYS: config. ARGV: buckets. The deployment's bucket count (set by the first open), and
# whether its buckets count each lifecycle's units ('1': set by a first open since they
# do; '' for a deployment created before, ``location``).
_CONFIG: Final = r"""
if redis.call('HSETNX', KEYS[1], 'buckets', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'counted', '1')
end
return {redis.call('HGET', KEYS[1], 'buckets'), redis.call('HGET', KEYS[1], 'counted') or ''}
"""

#: Name -> full source of every node script.
NODE_SCRIPTS: Final = {
    name: _NODE_PRELUDE + body for name, body in (
        ("n_take", _TAKE), ("n_shift", _SHIFT), ("n_new_claim", _NEW_CLAIM),
        ("n_renew", _RENEW), ("n_mark_placement", _MARK_PLACEMENT),
        ("n_remove", _REMOVE), ("n_remove_dead", _REMOVE_DEAD), ("n_config", _CONFIG))
}

# -- hint scripts (a reminder partition's slot, ``reminders``) -------------------------------

# KEYS: due hints, hint tokens, the partition's token counter. ARGV: member, score. The
# hint is at most score from now on (ZADD LT: never raised here) and carries a new
# token, returned.
_HINT: Final = r"""
local t = redis.call('INCR', KEYS[3])
redis.call('ZADD', KEYS[1], 'LT', ARGV[2], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], t)
return t
"""

# KEYS: due hints, hint tokens (one partition) -- or, with no KEYS, the same pairs of every
# partition a master serves after ARGV's first two (``sweep``: one script per master, the
# key names as arguments). ARGV: now, limit. Per partition, the first limit hints due at
# now, by (score, member): {member, score, token or ''} each.
_HINTS_DUE: Final = r"""#!lua flags=no-writes,allow-cross-slot-keys
local names = KEYS
if #names == 0 then names = {unpack(ARGV, 3)} end
local parts = {}
for k = 1, #names, 2 do
  local out = {}
  local due = redis.call('ZRANGE', names[k], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ARGV[2],
                         'WITHSCORES')
  for i = 1, #due, 2 do
    out[#out + 1] = {due[i], due[i + 1], redis.call('HGET', names[k + 1], due[i]) or ''}
  end
  parts[#parts + 1] = out
end
return parts
"""

# KEYS: due hints, hint tokens. ARGV: member, the token read with it, score ('' = its
# reminder is gone). Only while no hint write touched the member since it was read (its
# token unchanged): the score set (or the hint removed). 1 when it did, else 0.
_HINT_FIX: Final = r"""
if (redis.call('HGET', KEYS[2], ARGV[1]) or '') ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('HDEL', KEYS[2], ARGV[1])
else
  redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
end
return 1
"""

#: Name -> full source of every hint script.
HINT_SCRIPTS: Final = {"h_hint": _HINT, "h_due": _HINTS_DUE, "h_fix": _HINT_FIX}
