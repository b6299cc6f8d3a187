"""What the Inventory and Payment stand-ins answer, and the evidence of every call they get.

Theory of operation
-------------------
An external module answers with an :class:`EffectResult` (accepted or not, and
why). It must return the *first* result for a repeated deterministic id
(ReservationId, PaymentId: §6.3, §7.2), so each module records its first
result and answers every later call with the same id from that record.

For the runner (§7.3 "Planned Relocation Fixture", §9.1, §10.1) every call is
also recorded as a :class:`ModuleCall`, in the same transaction as the
result, in a per-order log the runner reads back through the module's
``calls(order_id)``. ``effect`` tells the two kinds apart: ``True`` when the
module decided (the effect happened on this call), ``False`` when it answered
from its first result. "ReserveInventoryReq ran once" is then "one reserve
call with ``effect``", "no Payment module call" is "no payment calls", and an
external effect repeated would be two ``effect`` calls for one id -- which the
modules' transactions rule out.

Storage: SQLite table ``external_calls`` (in arrival order); Redis list
``<prefix>:calls:{<order>}`` of JSON records (built by the scripts with
``cjson``, read with :meth:`ModuleCall.from_json`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    import sqlite3

__all__ = (
    "CALLS_SCHEMA",
    "EffectResult",
    "ModuleCall",
    "calls_key",
    "read_calls",
    "record_call",
)


@attrs.frozen(kw_only=True)
class EffectResult:
    """A module's answer: ``accepted`` (reserved, released, authorized) or not, and why."""

    accepted: bool
    reason: str | None = None


@attrs.frozen(kw_only=True)
class ModuleCall:
    """One call a module received (the evidence the runner checks)."""

    #: ``"inventory"`` or ``"payment"``.
    module: str
    #: ``"reserve"``, ``"release"`` or ``"authorize"``.
    operation: str
    order_id: str
    #: The deterministic id of the call: the ReservationId or the PaymentId.
    request_id: str
    #: Whether the module decided on this call (else it answered its first result).
    effect: bool
    result: EffectResult

    def to_json(self) -> str:
        """The record as JSON text (the same fields the Redis scripts write)."""
        return json.dumps({
            "module": self.module, "operation": self.operation, "orderId": self.order_id,
            "requestId": self.request_id, "effect": self.effect,
            "accepted": self.result.accepted, "reason": self.result.reason,
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> ModuleCall:
        """Parse :meth:`to_json`'s output (or a script's record)."""
        data: dict[str, Any] = json.loads(text)
        reason = data.get("reason")
        return cls(module=data["module"], operation=data["operation"],
                   order_id=data["orderId"], request_id=data["requestId"],
                   effect=bool(data["effect"]),
                   result=EffectResult(accepted=bool(data["accepted"]),
                                       reason=reason if isinstance(reason, str) else None))


CALLS_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS external_calls (
        seq INTEGER PRIMARY KEY AUTOINCREMENT, order_id TEXT NOT NULL, module TEXT NOT NULL,
        body TEXT NOT NULL)""",
    "CREATE INDEX IF NOT EXISTS external_calls_order ON external_calls (order_id, module)",
)


def record_call(conn: sqlite3.Connection, call: ModuleCall) -> None:
    """Append ``call`` to the log (inside the module's transaction)."""
    conn.execute("INSERT INTO external_calls (order_id, module, body) VALUES (?, ?, ?)",
                 (call.order_id, call.module, call.to_json()))


def read_calls(conn: sqlite3.Connection, order_id: str, module: str) -> tuple[ModuleCall, ...]:
    """The calls ``module`` received for ``order_id``, in arrival order."""
    rows = conn.execute("SELECT body FROM external_calls WHERE order_id = ? AND module = ? "
                        "ORDER BY seq", (order_id, module)).fetchall()
    return tuple(ModuleCall.from_json(row[0]) for row in rows)


def calls_key(prefix: str, order_id: str) -> str:
    """The Redis list of ``order_id``'s calls (both modules)."""
    return f"{prefix}:calls:{{{order_id}}}"


#: Lua: append a call record to KEYS[calls] (used by both modules' scripts).
LUA_LOG: Final = """
local function log(calls, module, operation, order_id, request_id, effect, accepted, reason)
  local why = cjson.null
  if reason and reason ~= '' then why = reason end
  redis.call('RPUSH', calls, cjson.encode({module = module, operation = operation,
    orderId = order_id, requestId = request_id, effect = effect, accepted = accepted,
    reason = why}))
end
"""
