"""The Relocation Store's transactions as Lua scripts (one script per transaction).

Theory of operation
-------------------
Same conventions as ``location`` (the prelude, checks before the first write, a
status table back), over the Relocation Store's own keys under ``R`` (``ARGV[2]``,
``<prefix>:rel:``), which never share a prefix with the Location Store's:

- ``root:{<ref>}`` -- one immutable root's bytes. SHA-256 is not available in
  Redis Lua, so Python hashes: ``put_root`` computes the ref from the bytes
  before the script runs, and ``delete_root`` verifies the stored bytes'
  SHA-256 and size in Python, then deletes with a script that first checks
  (``redis.sha1hex``) the bytes are still the ones it verified.
- ``inbox:{<spot_id>}:<generation>`` -- hash ``last`` / ``cursor`` of one
  incarnation's inbox, and ``...:log`` -- hash sequence -> record bytes. The
  records above the cursor are contiguous (``cursor+1 .. last``), so a read is
  one ``HMGET`` of a sequence range.
- ``meta:{m}:stats`` -- running counts for ``statistics()`` (the prelude's ``rstat``).
"""

from __future__ import annotations

from typing import Final

__all__ = ("RELOCATION_BODIES",)

# KEYS: root key. ARGV: P, R, data. 1 when stored, 0 when it was already there.
_PUT_ROOT: Final = r"""
return put_root(KEYS[1], ARGV[3])
"""

# KEYS: root key. ARGV: P, R, sha1 of the bytes Python verified.
# 1 deleted, 0 already gone, -1 the bytes changed since they were verified.
_DELETE_ROOT: Final = r"""
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
if redis.sha1hex(v) ~= ARGV[3] then return -1 end
drop_root(KEYS[1], v)
return 1
"""

# KEYS: inbox key, log key. ARGV: P, R, record. Returns the new sequence as a string.
_INBOX_APPEND: Final = r"""
return inbox_append(KEYS[1], KEYS[2], ARGV[3])
"""

# KEYS: inbox key, log key. ARGV: P, R, after, limit. Returns {first seq, {records...}} or {}.
_INBOX_READ: Final = r"""#!lua flags=no-writes
local m = redis.call('HMGET', KEYS[1], 'last', 'cursor')
if not m[1] then return {} end
local start = math.max(tonumber(ARGV[3]), tonumber(m[2])) + 1
local stop = math.min(tonumber(m[1]), start + tonumber(ARGV[4]) - 1)
if start > stop then return {} end
local fields = {}
for s = start, stop do fields[#fields + 1] = string.format('%d', s) end
return {string.format('%d', start), redis.call('HMGET', KEYS[2], unpack(fields))}
"""

# KEYS: inbox key, log key. ARGV: P, R, seq. {'OK', 0|1} or {'BACK', cursor} / {'PAST', last}.
_INBOX_SET_CURSOR: Final = r"""
local err, move, cursor = cursor_move(KEYS[1], ARGV[3])
if err then return err end
if not move then return {'OK', 0} end
move_cursor(KEYS[1], KEYS[2], cursor, ARGV[3])
return {'OK', 1}
"""

# KEYS: inbox key, log key. ARGV: P, R. 1 dropped, 0 there was none.
_INBOX_DROP: Final = r"""
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local n = redis.call('HLEN', KEYS[2])
redis.call('DEL', KEYS[1], KEYS[2])
rstat('inboxes', -1)
rstat('inbox_records', -n)
return 1
"""

# ARGV: P, R.
_STATISTICS: Final = r"""#!lua flags=no-writes
return redis.call('HMGET', RSTATS, 'roots', 'root_bytes', 'inboxes', 'inbox_records')
"""

#: Name -> Lua body of every Relocation Store transaction (``prelude.script`` adds the
#: prelude; ``rel_`` names: the scripts share one registry with the Location Store's).
RELOCATION_BODIES: Final = {
    "rel_put_root": _PUT_ROOT,
    "rel_delete_root": _DELETE_ROOT,
    "rel_inbox_append": _INBOX_APPEND,
    "rel_inbox_read": _INBOX_READ,
    "rel_inbox_set_cursor": _INBOX_SET_CURSOR,
    "rel_inbox_drop": _INBOX_DROP,
    "rel_statistics": _STATISTICS,
}
