"""A Spot's durable state: its writes, fenced by the authority record in one script.

``write_state`` checks the writer's fence against the record (``KEYS[1]``) -- the same
generations and owner, a serving state, the owner's claim live: the prelude's
``state_writer``, which the reminder writes share (``reminders``) -- before it touches the
state's hash (``KEYS[2]``: fields ``v`` version, ``g`` ObjectGeneration, ``d`` bytes),
in the oracle's order (``store.rules.state``). Loads are a plain ``HGETALL``.
"""

from __future__ import annotations

from typing import Final

__all__ = ("STATE_BODIES",)

# KEYS: spot key, state key. ARGV: P, R, gen, ogen, rid, lc, now, mode ('save' or
# 'clear'), data (save). {'OK', version, gen} saved; {'OK', n} cleared (n: keys
# deleted); {'STATE_STALE', record or {}}; {'STATE_IDLE', record}; owner_claim's.
_WRITE_STATE: Final = r"""
local r, err = state_writer(ARGV[7])
if err then return err end
if ARGV[8] == 'clear' then return {'OK', redis.call('DEL', KEYS[2])} end
local v = redis.call('HINCRBY', KEYS[2], 'v', 1)
redis.call('HSET', KEYS[2], 'g', r.gen, 'd', ARGV[9])
return {'OK', v, r.gen}
"""

#: Name -> Lua body of the state scripts.
STATE_BODIES: Final = {"write_state": _WRITE_STATE}
