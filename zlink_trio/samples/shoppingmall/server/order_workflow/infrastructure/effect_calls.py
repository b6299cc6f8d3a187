"""What the Inventory and Payment stand-ins answer, and the evidence of every call they get.

Theory of operation
-------------------
An external module answers with an :class:`EffectResult` (accepted or not, and
why). It must return the *first* result for a repeated deterministic id
(ReservationId, PaymentId), so each module records its first
result and answers every later call with the same id from that record.

For the runner (which checks who called before and after a planned relocation,
that an external effect ran once, and the ``external-effect-repeated`` row)
every call is also recorded as a :class:`ModuleCall`, in the same transaction as
the result, in a per-order log the runner reads back through the module's
``calls(order_id)``. ``effect`` tells the two kinds apart: ``True`` when the
module decided (the effect happened on this call), ``False`` when it answered
from its first result; ``caller`` is who called, as the caller said (the
workflow passes its NodeId, so the runner sees which owner called before and
after a planned relocation). "ReserveInventoryReq ran once" is then "one reserve
call with ``effect``", "no Payment module call" is "no payment calls", and an
external effect repeated would be two ``effect`` calls for one id -- which the
modules' transactions rule out.

Storage: SQLite table ``external_calls`` (in arrival order); Redis list
``<prefix>:calls:{<order>}`` of JSON records (built by the scripts of
``effect_scripts`` with ``cjson``, read with :meth:`ModuleCall.from_json`).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Final

import attrs

import zlink_trio as zl

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable

__all__ = (
    "CALLS_SCHEMA",
    "EffectResult",
    "ModuleCall",
    "calls_key",
    "check_caller",
    "check_text",
    "read_calls",
    "record_call",
    "repeated_effects",
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
    #: Who called, as the caller said (the workflow passes its NodeId), else ``None``.
    caller: str | None = None

    def to_json(self) -> str:
        """The record as JSON text (the same fields the Redis scripts write)."""
        return json.dumps({
            "module": self.module, "operation": self.operation, "orderId": self.order_id,
            "requestId": self.request_id, "effect": self.effect,
            "accepted": self.result.accepted, "reason": self.result.reason,
            "caller": self.caller,
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> ModuleCall:
        """Parse :meth:`to_json`'s output (or a script's record)."""
        data: dict[str, Any] = json.loads(text)
        reason, caller = data.get("reason"), data.get("caller")
        return cls(module=data["module"], operation=data["operation"],
                   order_id=data["orderId"], request_id=data["requestId"],
                   effect=bool(data["effect"]),
                   result=EffectResult(accepted=bool(data["accepted"]),
                                       reason=reason if isinstance(reason, str) else None),
                   caller=caller if isinstance(caller, str) and caller else None)


def repeated_effects(calls: Iterable[ModuleCall]) -> tuple[ModuleCall, ...]:
    """The calls whose effect ran again: a second ``effect`` for one module, operation and id.

    Empty when every external effect ran at most once -- what the evidence row
    ``external-effect-repeated`` (count 0) asks the runner to confirm.
    """
    seen: set[tuple[str, str, str]] = set()
    repeated: list[ModuleCall] = []
    for call in calls:
        if call.effect:
            key = (call.module, call.operation, call.request_id)
            if key in seen:
                repeated.append(call)
            seen.add(key)
    return tuple(repeated)


def check_text(what: str, value: object) -> str:
    """``value`` if it is a non-empty string; :class:`zlink_trio.InvalidOperation` otherwise."""
    if not isinstance(value, str) or not value:
        raise zl.InvalidOperation(f"{what} {value!r} must be a non-empty string; nothing was "
                                  "read or written")
    return value


def check_caller(caller: object) -> str:
    """``caller`` as a script argument: ``""`` for ``None``, else a non-empty string."""
    return "" if caller is None else check_text("caller", caller)


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
