"""The Location Store's operator transaction as a Lua script (``release_expired``).

Theory of operation
-------------------
Same conventions as ``location`` (the body runs after the prelude -- ``rec``,
``claim_key``, ``release_record``): every read and comparison before the first
write. The script re-implements
``store.rules.operator.txn_release_expired`` check for check, in the same order,
but leaves the *wording* of a refusal to Python: it returns the record it
found and ``redis.location`` builds the error with the oracle's own
``release_expired_refusal`` / :class:`OwnerAlive`, so every backend says the
same thing.

Replies: ``{'NONE'}`` (no record), ``{'REFUSED', record}`` (fence, Entry or
state refused), ``{'OWNER_ALIVE', record, lease_expires_at}``, or
``{'OK', record}`` with the record as it was before the deletion.
"""

from __future__ import annotations

from typing import Final

__all__ = ("OPERATOR_BODIES",)

# ARGV: P, R, gen, ogen, now. KEYS: spot key.
_RELEASE_EXPIRED: Final = r"""
local r = rec(KEYS[1])
if r == nil then return {'NONE'} end
if r.gen ~= ARGV[3] or r.ogen ~= ARGV[4] or r.kind == 'entry' or r.state ~= ST_READY then
  return {'REFUSED', redis.call('HGETALL', KEYS[1])}
end
local c = rec(claim_key(r.mesh, r.orid))
if c ~= nil and c.lc == r.olc and tonumber(ARGV[5]) < tonumber(c.exp) then
  return {'OWNER_ALIVE', redis.call('HGETALL', KEYS[1]), c.exp}
end
local serr = step_to_missing(r.state, EV_RELEASE_EXPIRED)
if serr then return serr end
local before = redis.call('HGETALL', KEYS[1])
-- writes
release_record(r, 'active')
return {'OK', before}
"""

#: Name -> Lua body (``prelude.script`` adds the prelude; registered beside the Location
#: Store's scripts).
OPERATOR_BODIES: Final = {"release_expired": _RELEASE_EXPIRED}
