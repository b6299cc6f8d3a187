"""The combined cold-activation transactions as Lua scripts (one script each).

Theory of operation
-------------------
Both stores live on one Redis server under two prefixes, so one script may touch
both key spaces without merging them: the prelude's ``P`` (``ARGV[1]``) and ``R``
(``ARGV[2]``). Each script does every check of the steps it merges, in the order
``protocol.CombinedTransactions`` documents, before its first write -- Redis has no
rollback -- by calling the very prelude helpers the single-step scripts call
(``reserve_spot``, ``commit_ready_spot``, ``cursor_move``, ``pointer_removal``) and
returns their status codes, so ``codec.raise_status`` maps a refusal to the oracle's
typed error; then it writes with the helpers those scripts write with.
"""

from __future__ import annotations

from typing import Final

__all__ = ("COMBINED_BODIES",)

# KEYS: spot key, root key. ARGV: P, R, id, kind, stable_type, mesh, rid, lc, now, root
# bytes, then the recovery pointer's field/value pairs. The checks are reserve_spot's.
_RESERVE_WITH_ROOT: Final = r"""
local err, gen, exp = reserve_spot(3, 11, '')
if err then return err end
put_root(KEYS[2], ARGV[10])
return {'OK', gen, exp}
"""

# KEYS: spot key, inbox key, log key. ARGV: P, R, gen, ogen, rid, lc, store_version,
# store_version + 1, now, record. The checks are commit_ready_spot's.
_COMMIT_READY_WITH_FIRST_RECORD: Final = r"""
local err, wrote = commit_ready_spot()
if err then return err end
if not wrote then  -- this very commit already happened: the inbox's last sequence
  return {'OK', redis.call('HGETALL', KEYS[1]), redis.call('HGET', KEYS[2], 'last') or '0'}
end
local seq = inbox_append(KEYS[2], KEYS[3], ARGV[10])
return {'OK', redis.call('HGETALL', KEYS[1]), seq}
"""

# KEYS: inbox key, log key, spot key, root key. ARGV: P, R, gen, seq, expected version,
# SHA-1 of the root bytes Python verified ('' when it read none).
_FINISH_FIRST_RECORD: Final = r"""
local v = redis.call('GET', KEYS[4])
if (v and redis.sha1hex(v) ~= ARGV[6]) or (not v and ARGV[6] ~= '') then
  return {'CHANGED'}
end
local err, move, cursor = cursor_move(KEYS[1], ARGV[4])
if err then return err end
local perr, remove = pointer_removal(KEYS[3], ARGV[3], ARGV[5])
if perr then return perr end
-- writes
if move then move_cursor(KEYS[1], KEYS[2], cursor, ARGV[4]) end
if remove then remove_pointer(KEYS[3]) end
if v then drop_root(KEYS[4], v) end
return {'OK', move and 1 or 0, remove and 1 or 0, v and 1 or 0}
"""

#: Name -> Lua body of every combined transaction (``prelude.script`` adds the prelude).
COMBINED_BODIES: Final = {
    "reserve_with_root": _RESERVE_WITH_ROOT,
    "commit_ready_with_first_record": _COMMIT_READY_WITH_FIRST_RECORD,
    "finish_first_record": _FINISH_FIRST_RECORD,
}
