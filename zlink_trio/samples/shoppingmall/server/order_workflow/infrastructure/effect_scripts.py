"""The Redis Lua scripts of the Inventory and Payment stand-ins (one transaction each).

Each script reads the first result for its deterministic id; when there is one
it logs a call without ``effect`` and returns it. Otherwise it decides (from
the seeds), writes the result and its effect (stock taken or given back),
logs a call with ``effect``, and returns the result -- all in one atomic
script, so concurrent identical calls see exactly one decision. Replies are
``{accepted '1'|'0', reason ''|text}``; call records are the JSON of
:class:`~.effect_calls.ModuleCall`.
"""

from __future__ import annotations

from typing import Final

__all__ = (
    "AUTHORIZE",
    "INSUFFICIENT",
    "NOT_RESERVED",
    "REJECTED",
    "RELEASE",
    "RESERVE",
    "UNKNOWN_METHOD",
)

#: The reason of a refused reservation.
INSUFFICIENT: Final = "insufficient-inventory"
#: The reason of a refused release: no accepted reservation with that id.
NOT_RESERVED: Final = "not-reserved"
#: The default reason of a payment method seeded as rejected.
REJECTED: Final = "payment-rejected"
#: The reason for a payment method nobody seeded.
UNKNOWN_METHOD: Final = "unknown-payment-method"

#: Lua: append a call record to KEYS[calls] (used by both modules' scripts).
_LOG: Final = """
local function log(calls, module, operation, order_id, request_id, effect, accepted, reason,
                   caller)
  local why, who = cjson.null, cjson.null
  if reason and reason ~= '' then why = reason end
  if caller and caller ~= '' then who = caller end
  redis.call('RPUSH', calls, cjson.encode({module = module, operation = operation,
    orderId = order_id, requestId = request_id, effect = effect, accepted = accepted,
    reason = why, caller = who}))
end
"""

#: KEYS: stock, reservation, calls. ARGV: order, reservation id, lines JSON, caller, sku, n...
RESERVE: Final = _LOG + """
local stock, res, calls = KEYS[1], KEYS[2], KEYS[3]
local order, rid, caller = ARGV[1], ARGV[2], ARGV[4]
local first = redis.call('HMGET', res, 'accepted', 'reason')
if first[1] then
  log(calls, 'inventory', 'reserve', order, rid, false, first[1] == '1', first[2], caller)
  return {first[1], first[2]}
end
local accepted, reason = '1', ''
for i = 5, #ARGV, 2 do
  if tonumber(redis.call('HGET', stock, ARGV[i]) or '0') < tonumber(ARGV[i + 1]) then
    accepted, reason = '0', '""" + INSUFFICIENT + """'
    break
  end
end
if accepted == '1' then
  for i = 5, #ARGV, 2 do
    redis.call('HINCRBY', stock, ARGV[i], -tonumber(ARGV[i + 1]))
  end
end
redis.call('HSET', res, 'order_id', order, 'accepted', accepted, 'reason', reason,
           'lines', ARGV[3])
log(calls, 'inventory', 'reserve', order, rid, true, accepted == '1', reason, caller)
return {accepted, reason}
"""

#: KEYS: stock, reservation, release, calls. ARGV: order, reservation id, reason, caller.
RELEASE: Final = _LOG + """
local stock, res, rel, calls = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local order, rid, caller = ARGV[1], ARGV[2], ARGV[4]
local first = redis.call('HMGET', rel, 'accepted', 'reason')
if first[1] then
  log(calls, 'inventory', 'release', order, rid, false, first[1] == '1', first[2], caller)
  return {first[1], first[2]}
end
local reserved = redis.call('HMGET', res, 'accepted', 'lines')
local accepted, reason = '0', '""" + NOT_RESERVED + """'
if reserved[1] == '1' then
  accepted, reason = '1', ''
  for _, line in ipairs(cjson.decode(reserved[2])) do
    redis.call('HINCRBY', stock, line[1], line[2])
  end
end
redis.call('HSET', rel, 'order_id', order, 'accepted', accepted, 'reason', reason,
           'requested_for', ARGV[3])
log(calls, 'inventory', 'release', order, rid, true, accepted == '1', reason, caller)
return {accepted, reason}
"""

#: KEYS: methods, authorization, calls. ARGV: order, payment id, method, amount, currency,
#: caller.
AUTHORIZE: Final = _LOG + """
local methods, auth, calls = KEYS[1], KEYS[2], KEYS[3]
local order, pid, caller = ARGV[1], ARGV[2], ARGV[6]
local first = redis.call('HMGET', auth, 'accepted', 'reason')
if first[1] then
  log(calls, 'payment', 'authorize', order, pid, false, first[1] == '1', first[2], caller)
  return {first[1], first[2]}
end
local seed = redis.call('HGET', methods, ARGV[3])
local accepted, reason = '0', '""" + UNKNOWN_METHOD + """'
if seed then
  accepted, reason = string.sub(seed, 1, 1), string.sub(seed, 3)
end
redis.call('HSET', auth, 'order_id', order, 'payment_method_id', ARGV[3], 'amount', ARGV[4],
           'currency', ARGV[5], 'accepted', accepted, 'reason', reason)
log(calls, 'payment', 'authorize', order, pid, true, accepted == '1', reason, caller)
return {accepted, reason}
"""
