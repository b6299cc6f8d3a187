"""The Payment module stand-in: authorize by PaymentId, first result wins.

Theory of operation
-------------------
A seeded module: the runner seeds each payment method
(``seed_payment_method``): accepted, or rejected with a reason (default
``"payment-rejected"``); an unseeded method is rejected with
``"unknown-payment-method"``. There is no PSP, no 3-D Secure, nothing
asynchronous (a real PSP is out of the sample's scope).

``authorize(order_id, payment_id, payment_method_id, amount, currency)``
    The first call for a PaymentId decides from the method's seed and
    records the authorization (method, amount, currency, result). Every
    later call with that PaymentId -- concurrent, retried, or after a
    relocation -- returns the first result, whatever its arguments.

Each call is one atomic transaction that also records a
:class:`~.effect_calls.ModuleCall` (``effect`` when this call decided), read
back with ``calls(order_id)``. Open it on the CommerceStateStore's URL (tables
``payment_*``; Redis keys ``<prefix>:pay:*``).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Final, Protocol

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.effect_calls import (
    CALLS_SCHEMA,
    EffectResult,
    ModuleCall,
    calls_key,
    check_caller,
    check_text,
    read_calls,
    record_call,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.effect_scripts import (
    AUTHORIZE,
    REJECTED,
    UNKNOWN_METHOD,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_records import (
    check_order_id,
)
from zlink_trio.samples.shoppingmall.server.storage.app_store import open_app_store

if TYPE_CHECKING:
    import sqlite3
    from contextlib import AbstractAsyncContextManager

    from zlink_trio.samples.shoppingmall.server.storage.redis_db import (
        RedisDb,
    )
    from zlink_trio.samples.shoppingmall.server.storage.sqlite_db import (
        SqliteDb,
    )

__all__ = ("REJECTED", "UNKNOWN_METHOD", "Payment", "open_payment")

_MODULE: Final = "payment"


class Payment(Protocol):
    """The Payment stand-in (module docstring); both backends implement it."""

    async def seed_payment_method(self, payment_method_id: str, *, accept: bool,
                                  reason: str | None = None) -> None:
        """Seed how the method answers (runner only); ``reason`` for a rejection."""
        ...

    async def authorize(self, order_id: str, payment_id: str, payment_method_id: str,
                        amount: float | Decimal, currency: str, *,
                        caller: str | None = None) -> EffectResult:
        """Authorize the amount; the first result for ``payment_id`` wins.

        ``caller`` (e.g. the workflow's NodeId) is kept in the call's evidence.
        """
        ...

    async def calls(self, order_id: str) -> tuple[ModuleCall, ...]:
        """Every call the module got for ``order_id``, in arrival order (evidence)."""
        ...


def _check(order_id: str, payment_id: str, method: str, amount: object,
           currency: str) -> str:
    """Refuse malformed arguments; the amount as decimal text."""
    check_order_id(order_id)
    check_text("payment id", payment_id)
    check_text("payment method id", method)
    check_text("currency", currency)
    if isinstance(amount, bool) or not isinstance(amount, int | float | Decimal):
        raise zl.InvalidOperation(f"amount {amount!r} must be a number")
    return str(amount)


def _seed_reason(accept: bool, reason: str | None) -> str:
    return "" if accept else (reason or REJECTED)


SQLITE_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS payment_methods (
        payment_method_id TEXT PRIMARY KEY, accepted INTEGER NOT NULL, reason TEXT NOT NULL
        ) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS payment_authorizations (
        payment_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, payment_method_id TEXT NOT NULL,
        amount TEXT NOT NULL, currency TEXT NOT NULL, accepted INTEGER NOT NULL, reason TEXT
        ) WITHOUT ROWID""",
    *CALLS_SCHEMA,
)


def _call(order_id: str, payment_id: str, effect: bool, result: EffectResult,
          caller: str | None) -> ModuleCall:
    return ModuleCall(module=_MODULE, operation="authorize", order_id=order_id,
                      request_id=payment_id, effect=effect, result=result, caller=caller)


class SqlitePayment:
    """The ``sqlite://`` Payment: tables ``payment_*`` and ``external_calls``."""

    def __init__(self, db: SqliteDb) -> None:
        self._db = db

    async def seed_payment_method(self, payment_method_id: str, *, accept: bool,
                                  reason: str | None = None) -> None:
        """See :meth:`Payment.seed_payment_method`."""
        check_text("payment method id", payment_method_id)
        why = _seed_reason(accept, reason)
        await self._db.write(lambda conn: conn.execute(
            "INSERT INTO payment_methods VALUES (?, ?, ?) ON CONFLICT (payment_method_id) DO "
            "UPDATE SET accepted = excluded.accepted, reason = excluded.reason",
            (payment_method_id, int(accept), why)))

    async def authorize(self, order_id: str, payment_id: str, payment_method_id: str,
                        amount: float | Decimal, currency: str, *,
                        caller: str | None = None) -> EffectResult:
        """See :meth:`Payment.authorize`."""
        text = _check(order_id, payment_id, payment_method_id, amount, currency)
        check_caller(caller)

        def body(conn: sqlite3.Connection) -> EffectResult:
            row = conn.execute("SELECT accepted, reason FROM payment_authorizations WHERE "
                               "payment_id = ?", (payment_id,)).fetchone()
            if row is not None:
                first = EffectResult(accepted=bool(row[0]), reason=row[1])
                record_call(conn, _call(order_id, payment_id, False, first, caller))
                return first
            seed = conn.execute("SELECT accepted, reason FROM payment_methods WHERE "
                                "payment_method_id = ?", (payment_method_id,)).fetchone()
            result = (EffectResult(accepted=False, reason=UNKNOWN_METHOD) if seed is None
                      else EffectResult(accepted=bool(seed[0]), reason=seed[1] or None))
            conn.execute("INSERT INTO payment_authorizations VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (payment_id, order_id, payment_method_id, text, currency,
                          int(result.accepted), result.reason))
            record_call(conn, _call(order_id, payment_id, True, result, caller))
            return result

        return await self._db.write(body)

    async def calls(self, order_id: str) -> tuple[ModuleCall, ...]:
        """See :meth:`Payment.calls`."""
        check_order_id(order_id)
        return await self._db.read(lambda conn: read_calls(conn, order_id, _MODULE))


_SCRIPTS: Final = {"authorize": AUTHORIZE}


class RedisPayment:
    """The ``redis://`` Payment: ``<prefix>:pay:*`` keys, one script per call.

    A method's seed is ``"1:"`` (accepted) or ``"0:<reason>"`` in the hash
    ``<prefix>:pay:methods``.
    """

    def __init__(self, db: RedisDb) -> None:
        self._db = db
        self._methods_key = f"{db.prefix}:pay:methods"

    async def seed_payment_method(self, payment_method_id: str, *, accept: bool,
                                  reason: str | None = None) -> None:
        """See :meth:`Payment.seed_payment_method`."""
        check_text("payment method id", payment_method_id)
        seed = f"{int(accept)}:{_seed_reason(accept, reason)}"
        key, client = self._methods_key, self._db.client
        await self._db.bounded("seed a payment method",
                               lambda: client.hset(key, {payment_method_id: seed}))

    async def authorize(self, order_id: str, payment_id: str, payment_method_id: str,
                        amount: float | Decimal, currency: str, *,
                        caller: str | None = None) -> EffectResult:
        """See :meth:`Payment.authorize`."""
        text = _check(order_id, payment_id, payment_method_id, amount, currency)
        reply = await self._db.script(
            f"authorize {payment_id!r}", "authorize",
            [self._methods_key, f"{self._db.prefix}:pay:auth:{{{payment_id}}}",
             calls_key(self._db.prefix, order_id)],
            [order_id, payment_id, payment_method_id, text, currency, check_caller(caller)])
        reason = bytes(reply[1]).decode() if reply[1] else None
        return EffectResult(accepted=bytes(reply[0]) == b"1", reason=reason or None)

    async def calls(self, order_id: str) -> tuple[ModuleCall, ...]:
        """See :meth:`Payment.calls`."""
        check_order_id(order_id)
        key, client = calls_key(self._db.prefix, order_id), self._db.client
        items = await self._db.bounded(f"read the calls of {order_id!r}",
                                       lambda: client.lrange(key, 0, -1))
        return tuple(c for c in map(ModuleCall.from_json, items) if c.module == _MODULE)


def open_payment(url: str) -> AbstractAsyncContextManager[Payment]:
    """Open the Payment stand-in on ``url`` (the CommerceStateStore's; module docstring).

    Raises :class:`zlink_trio.InvalidConfiguration` for a malformed URL and
    :class:`zlink_trio.StoreUnavailable` when the store cannot be reached.
    """
    return open_app_store(
        url, name="Payment", sqlite_schema=SQLITE_SCHEMA, redis_scripts=_SCRIPTS,
        on_sqlite=SqlitePayment, on_redis=RedisPayment)


if TYPE_CHECKING:
    def _conforms(a: SqlitePayment, b: RedisPayment) -> tuple[Payment, Payment]:
        # mypy proves here that both backends satisfy the protocol.
        return a, b
