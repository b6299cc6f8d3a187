"""The Inventory module stand-in: reserve and release stock by ReservationId, first result wins.

Theory of operation
-------------------
A seeded module: the runner seeds the stock of each SKU
(``seed_stock``); an unseeded SKU has none. The module is an external effect
to the workflow, so its answers must not depend on how often it is asked:

``reserve(order_id, reservation_id, lines)``
    The first call for a ReservationId decides: when every SKU has the
    quantity (lines of one SKU are summed), the stock is taken and the
    reservation accepted; otherwise nothing is taken and it is refused with
    reason ``"insufficient-inventory"``. Every later call with that
    ReservationId -- concurrent, retried, or after a relocation -- returns
    the first result and takes nothing.
``release(order_id, reservation_id, reason)``
    The first call for a ReservationId returns the stock of an accepted
    reservation (accepted, i.e. released) or, when there is none to release,
    refuses with reason ``"not-reserved"``. Later calls return the first result.
    ``reason`` (why the workflow releases) is kept with the first release.

Each call is one atomic transaction that also records a
:class:`~.effect_calls.ModuleCall` (``effect`` when this call decided), read
back with ``calls(order_id)``. Open it on the CommerceStateStore's URL: the
sample keeps the module's results in that store (tables ``inventory_*``; Redis keys
``<prefix>:inv:*``).
"""

from __future__ import annotations

import json
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
    INSUFFICIENT,
    NOT_RESERVED,
    RELEASE,
    RESERVE,
)
from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_records import (
    check_order_id,
)
from zlink_trio.samples.shoppingmall.server.storage.app_store import open_app_store

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable
    from contextlib import AbstractAsyncContextManager

    from zlink_trio.samples.shoppingmall.server.storage.redis_db import (
        RedisDb,
    )
    from zlink_trio.samples.shoppingmall.server.storage.sqlite_db import (
        SqliteDb,
    )

__all__ = ("INSUFFICIENT", "NOT_RESERVED", "Inventory", "OrderLineLike", "open_inventory")

_MODULE: Final = "inventory"


class OrderLineLike(Protocol):
    """What a line needs: the domain's ``OrderLine`` (``sku``, ``quantity``) fits."""

    @property
    def sku(self) -> str: ...

    @property
    def quantity(self) -> int: ...


class Inventory(Protocol):
    """The Inventory stand-in (module docstring); both backends implement it."""

    async def seed_stock(self, sku: str, quantity: int) -> None:
        """Set the SKU's stock (runner only)."""
        ...

    async def stock(self, sku: str) -> int:
        """The SKU's stock now (0 when unseeded)."""
        ...

    async def reserve(self, order_id: str, reservation_id: str,
                      lines: Iterable[OrderLineLike], *,
                      caller: str | None = None) -> EffectResult:
        """Reserve the lines' stock; the first result for ``reservation_id`` wins.

        ``caller`` (e.g. the workflow's NodeId) is kept in the call's evidence.
        """
        ...

    async def release(self, order_id: str, reservation_id: str, reason: str, *,
                      caller: str | None = None) -> EffectResult:
        """Give back an accepted reservation's stock; the first result wins."""
        ...

    async def calls(self, order_id: str) -> tuple[ModuleCall, ...]:
        """Every call the module got for ``order_id``, in arrival order (evidence)."""
        ...


def _seed(quantity: object) -> int:
    if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 0:
        raise zl.InvalidOperation(f"stock {quantity!r} must be an int >= 0")
    return quantity


def _quantities(lines: Iterable[OrderLineLike]) -> dict[str, int]:
    """The lines as SKU -> total quantity; refuses an empty cart or a quantity < 1."""
    wanted: dict[str, int] = {}
    for line in lines:
        quantity = line.quantity
        if isinstance(quantity, bool) or not isinstance(quantity, int) or quantity < 1:
            raise zl.InvalidOperation(f"line {line!r}: quantity must be an int >= 1")
        sku = check_text("sku", line.sku)
        wanted[sku] = wanted.get(sku, 0) + quantity
    if not wanted:
        raise zl.InvalidOperation("a reservation needs at least one line")
    return wanted


def _call(operation: str, order_id: str, request_id: str, effect: bool,
          result: EffectResult, caller: str | None) -> ModuleCall:
    return ModuleCall(module=_MODULE, operation=operation, order_id=order_id,
                      request_id=request_id, effect=effect, result=result, caller=caller)


SQLITE_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS inventory_stock (
        sku TEXT PRIMARY KEY, quantity INTEGER NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS inventory_reservations (
        reservation_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, accepted INTEGER NOT NULL,
        reason TEXT, lines TEXT NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS inventory_releases (
        reservation_id TEXT PRIMARY KEY, order_id TEXT NOT NULL, accepted INTEGER NOT NULL,
        reason TEXT, requested_for TEXT NOT NULL) WITHOUT ROWID""",
    *CALLS_SCHEMA,
)


def _stock(conn: sqlite3.Connection, sku: str) -> int:
    row = conn.execute("SELECT quantity FROM inventory_stock WHERE sku = ?", (sku,)).fetchone()
    return 0 if row is None else int(row[0])


def _first(conn: sqlite3.Connection, table: str, reservation_id: str) -> EffectResult | None:
    row = conn.execute(f"SELECT accepted, reason FROM {table} WHERE reservation_id = ?",
                       (reservation_id,)).fetchone()
    return None if row is None else EffectResult(accepted=bool(row[0]), reason=row[1])


def _add(conn: sqlite3.Connection, wanted: dict[str, int], sign: int) -> None:
    for sku, quantity in wanted.items():
        conn.execute("INSERT INTO inventory_stock VALUES (?, ?) ON CONFLICT (sku) DO UPDATE "
                     "SET quantity = quantity + excluded.quantity", (sku, sign * quantity))


class SqliteInventory:
    """The ``sqlite://`` Inventory: tables ``inventory_*`` and ``external_calls``."""

    def __init__(self, db: SqliteDb) -> None:
        self._db = db

    async def seed_stock(self, sku: str, quantity: int) -> None:
        """See :meth:`Inventory.seed_stock`."""
        check_text("sku", sku)
        await self._db.write(lambda conn: conn.execute(
            "INSERT INTO inventory_stock VALUES (?, ?) ON CONFLICT (sku) DO UPDATE SET "
            "quantity = excluded.quantity", (sku, _seed(quantity))))

    async def stock(self, sku: str) -> int:
        """See :meth:`Inventory.stock`."""
        check_text("sku", sku)
        return await self._db.read(lambda conn: _stock(conn, sku))

    async def reserve(self, order_id: str, reservation_id: str,
                      lines: Iterable[OrderLineLike], *,
                      caller: str | None = None) -> EffectResult:
        """See :meth:`Inventory.reserve`."""
        check_order_id(order_id)
        check_text("reservation id", reservation_id)
        check_caller(caller)
        wanted = _quantities(lines)

        def body(conn: sqlite3.Connection) -> EffectResult:
            first = _first(conn, "inventory_reservations", reservation_id)
            if first is not None:
                record_call(conn, _call("reserve", order_id, reservation_id, False, first,
                                         caller))
                return first
            enough = all(_stock(conn, sku) >= n for sku, n in wanted.items())
            result = EffectResult(accepted=enough, reason=None if enough else INSUFFICIENT)
            if enough:
                _add(conn, wanted, -1)
            conn.execute("INSERT INTO inventory_reservations VALUES (?, ?, ?, ?, ?)",
                         (reservation_id, order_id, int(enough), result.reason,
                          json.dumps(sorted(wanted.items()))))
            record_call(conn, _call("reserve", order_id, reservation_id, True, result,
                                         caller))
            return result

        return await self._db.write(body)

    async def release(self, order_id: str, reservation_id: str, reason: str, *,
                      caller: str | None = None) -> EffectResult:
        """See :meth:`Inventory.release`."""
        check_order_id(order_id)
        check_text("reservation id", reservation_id)
        check_text("release reason", reason)
        check_caller(caller)

        def body(conn: sqlite3.Connection) -> EffectResult:
            first = _first(conn, "inventory_releases", reservation_id)
            if first is not None:
                record_call(conn, _call("release", order_id, reservation_id, False, first,
                                         caller))
                return first
            row = conn.execute("SELECT lines FROM inventory_reservations WHERE "
                               "reservation_id = ? AND accepted = 1",
                               (reservation_id,)).fetchone()
            result = EffectResult(accepted=row is not None,
                                  reason=None if row is not None else NOT_RESERVED)
            if row is not None:
                _add(conn, dict(json.loads(row[0])), +1)
            conn.execute("INSERT INTO inventory_releases VALUES (?, ?, ?, ?, ?)",
                         (reservation_id, order_id, int(result.accepted), result.reason,
                          reason))
            record_call(conn, _call("release", order_id, reservation_id, True, result,
                                         caller))
            return result

        return await self._db.write(body)

    async def calls(self, order_id: str) -> tuple[ModuleCall, ...]:
        """See :meth:`Inventory.calls`."""
        check_order_id(order_id)
        return await self._db.read(lambda conn: read_calls(conn, order_id, _MODULE))


_SCRIPTS: Final = {"reserve": RESERVE, "release": RELEASE}


def _reply(reply: list[bytes]) -> EffectResult:
    reason = bytes(reply[1]).decode() if reply[1] else None
    return EffectResult(accepted=bytes(reply[0]) == b"1", reason=reason or None)


class RedisInventory:
    """The ``redis://`` Inventory: ``<prefix>:inv:*`` keys, one script per call."""

    def __init__(self, db: RedisDb) -> None:
        self._db = db
        self._stock_key = f"{db.prefix}:inv:stock"

    def _keys(self, kind: str, reservation_id: str) -> str:
        return f"{self._db.prefix}:inv:{kind}:{{{reservation_id}}}"

    async def seed_stock(self, sku: str, quantity: int) -> None:
        """See :meth:`Inventory.seed_stock`."""
        check_text("sku", sku)
        key, client = self._stock_key, self._db.client
        await self._db.bounded("seed stock", lambda: client.hset(key, {sku: _seed(quantity)}))

    async def stock(self, sku: str) -> int:
        """See :meth:`Inventory.stock`."""
        check_text("sku", sku)
        key, client = self._stock_key, self._db.client
        value = await self._db.bounded(f"read the stock of {sku!r}",
                                       lambda: client.hget(key, sku))
        return 0 if value is None else int(value)

    async def reserve(self, order_id: str, reservation_id: str,
                      lines: Iterable[OrderLineLike], *,
                      caller: str | None = None) -> EffectResult:
        """See :meth:`Inventory.reserve`."""
        check_order_id(order_id)
        check_text("reservation id", reservation_id)
        wanted = sorted(_quantities(lines).items())
        flat = [part for sku, n in wanted for part in (sku, n)]
        reply = await self._db.script(
            f"reserve {reservation_id!r}", "reserve",
            [self._stock_key, self._keys("res", reservation_id),
             calls_key(self._db.prefix, order_id)],
            [order_id, reservation_id, json.dumps(wanted), check_caller(caller), *flat])
        return _reply(reply)

    async def release(self, order_id: str, reservation_id: str, reason: str, *,
                      caller: str | None = None) -> EffectResult:
        """See :meth:`Inventory.release`."""
        check_order_id(order_id)
        check_text("reservation id", reservation_id)
        check_text("release reason", reason)
        reply = await self._db.script(
            f"release {reservation_id!r}", "release",
            [self._stock_key, self._keys("res", reservation_id),
             self._keys("rel", reservation_id), calls_key(self._db.prefix, order_id)],
            [order_id, reservation_id, reason, check_caller(caller)])
        return _reply(reply)

    async def calls(self, order_id: str) -> tuple[ModuleCall, ...]:
        """See :meth:`Inventory.calls`."""
        check_order_id(order_id)
        key, client = calls_key(self._db.prefix, order_id), self._db.client
        items = await self._db.bounded(f"read the calls of {order_id!r}",
                                       lambda: client.lrange(key, 0, -1))
        return tuple(c for c in map(ModuleCall.from_json, items) if c.module == _MODULE)


def open_inventory(url: str) -> AbstractAsyncContextManager[Inventory]:
    """Open the Inventory stand-in on ``url`` (the CommerceStateStore's; module docstring).

    Raises :class:`zlink_trio.InvalidConfiguration` for a malformed URL and
    :class:`zlink_trio.StoreUnavailable` when the store cannot be reached.
    """
    return open_app_store(
        url, name="Inventory", sqlite_schema=SQLITE_SCHEMA, redis_scripts=_SCRIPTS,
        on_sqlite=SqliteInventory, on_redis=RedisInventory)


if TYPE_CHECKING:
    def _conforms(a: SqliteInventory, b: RedisInventory) -> tuple[Inventory, Inventory]:
        # mypy proves here that both backends satisfy the protocol.
        return a, b
