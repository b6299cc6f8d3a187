"""The Relocation Store's transactions as Lua scripts (one script per transaction).

Theory of operation
-------------------
Same conventions as ``_redis_lua`` (checks before the first write, a status
table back, ``ARGV[1]`` the Relocation key prefix ``<prefix>:rel:``), over
the Relocation Store's own keys, which never share a prefix with the
Location Store's:

- ``root:{<ref>}`` -- one immutable root's bytes. SHA-256 is not available in
  Redis Lua, so Python hashes: ``put_root`` computes the ref from the bytes
  before the script runs, and ``delete_root`` verifies the stored bytes'
  SHA-256 and size in Python, then deletes with a script that first checks
  (``redis.sha1hex``) the bytes are still the ones it verified.
- ``inbox:{<spot_id>}:<generation>`` -- hash ``last`` / ``cursor`` of one
  incarnation's inbox, and ``...:log`` -- hash sequence -> record bytes. The
  records above the cursor are contiguous (``cursor+1 .. last``), so a read is
  one ``HMGET`` of a sequence range.
- ``meta:{m}:stats`` -- running counts for ``statistics()``.
"""

from __future__ import annotations

from typing import Final

__all__ = ("RELOCATION_SCRIPTS",)

_PRELUDE: Final = r"""
local STATS = ARGV[1] .. 'meta:{m}:stats'
local function shift(field, delta)
  if delta ~= 0 and redis.call('HINCRBY', STATS, field, delta) == 0 then
    redis.call('HDEL', STATS, field)
  end
end
"""

# KEYS: root key. ARGV: R, data. 1 when stored, 0 when it was already there.
_PUT_ROOT: Final = r"""
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[1], ARGV[2])
shift('roots', 1)
shift('root_bytes', #ARGV[2])
return 1
"""

# KEYS: root key. ARGV: R, sha1 of the bytes Python verified.
# 1 deleted, 0 already gone, -1 the bytes changed since they were verified.
_DELETE_ROOT: Final = r"""
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if redis.sha1hex(v) ~= ARGV[2] then return -1 end
redis.call('DEL', KEYS[1])
shift('roots', -1)
shift('root_bytes', -#v)
return 1
"""

# KEYS: inbox key, log key. ARGV: R, record. Returns the new sequence as a string.
_INBOX_APPEND: Final = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'last', 0, 'cursor', 0)
  shift('inboxes', 1)
end
redis.call('HINCRBY', KEYS[1], 'last', 1)
local seq = redis.call('HGET', KEYS[1], 'last')
redis.call('HSET', KEYS[2], seq, ARGV[2])
shift('inbox_records', 1)
return seq
"""

# KEYS: inbox key, log key. ARGV: R, after, limit. Returns {first seq, {records...}} or {}.
_INBOX_READ: Final = r"""#!lua flags=no-writes
local m = redis.call('HMGET', KEYS[1], 'last', 'cursor')
if not m[1] then return {} end
local start = math.max(tonumber(ARGV[2]), tonumber(m[2])) + 1
local stop = math.min(tonumber(m[1]), start + tonumber(ARGV[3]) - 1)
if start > stop then return {} end
local fields = {}
for s = start, stop do fields[#fields + 1] = string.format('%d', s) end
return {string.format('%d', start), redis.call('HMGET', KEYS[2], unpack(fields))}
"""

# KEYS: inbox key, log key. ARGV: R, seq. {'OK', 0|1} or {'BACK', cursor} / {'PAST', last}.
_INBOX_SET_CURSOR: Final = r"""
local m = redis.call('HMGET', KEYS[1], 'last', 'cursor')
local last = tonumber(m[1]) or 0
local cursor = tonumber(m[2]) or 0
local seq = tonumber(ARGV[2])
if seq < cursor then return {'BACK', tostring(m[2] or '0')} end
if seq > last then return {'PAST', tostring(m[1] or '0')} end
if seq == cursor or not m[1] then return {'OK', 0} end
local batch = {}
for s = cursor + 1, seq do
  batch[#batch + 1] = string.format('%d', s)
  if #batch == 1000 then
    redis.call('HDEL', KEYS[2], unpack(batch))
    batch = {}
  end
end
if #batch > 0 then redis.call('HDEL', KEYS[2], unpack(batch)) end
redis.call('HSET', KEYS[1], 'cursor', ARGV[2])
shift('inbox_records', cursor - seq)
return {'OK', 1}
"""

# KEYS: inbox key, log key. ARGV: R. 1 dropped, 0 there was none.
_INBOX_DROP: Final = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = redis.call('HLEN', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2])
shift('inboxes', -1)
shift('inbox_records', -n)
return 1
"""

# ARGV: R.
_STATISTICS: Final = r"""#!lua flags=no-writes
return redis.call('HMGET', STATS, 'roots', 'root_bytes', 'inboxes', 'inbox_records')
"""


def _script(body: str) -> str:
    if body.startswith("#!"):
        first, _, rest = body.partition("\n")
        return f"{first}\n{_PRELUDE}\n{rest}"
    return f"{_PRELUDE}\n{body}"


#: Name -> full Lua source of every Relocation Store transaction.
RELOCATION_SCRIPTS: Final = {
    "put_root": _script(_PUT_ROOT),
    "delete_root": _script(_DELETE_ROOT),
    "inbox_append": _script(_INBOX_APPEND),
    "inbox_read": _script(_INBOX_READ),
    "inbox_set_cursor": _script(_INBOX_SET_CURSOR),
    "inbox_drop": _script(_INBOX_DROP),
    "statistics": _script(_STATISTICS),
}
