"""CommerceStateStore: cart snapshots and the IdempotencyKey -> OrderId mapping.

Theory of operation
-------------------
**Idempotency mapping.** A StartOrderReq carries an IdempotencyKey. CommerceApi
reserves the key (``reserve_order``) with a fresh candidate OrderId: the first caller
creates the mapping ``pending`` and wins (``ReserveResult.reserved``); every
other caller -- concurrent or a retry, on any API process -- gets the same
mapping and discards its candidate. Once OrderWorkflowSpot has recorded
OrderStartedEvent and the Created projection, ``mark_started`` moves the
mapping ``pending -> started`` (a compare-and-set on the OrderId: exactly one
caller sees ``changed``; a repeat is a no-op). A caller that reads ``pending``
is not done: it resumes the same OrderId's workflow.

**Cart snapshots.** The cart is built before the sample starts (the sample does not
build carts): the runner
stores a snapshot (``put_cart``) (JSON text: lines, amount, currency) and CommerceApi
reads it when it starts the workflow. The store never parses snapshots.

Every call is one atomic transaction. The Inventory and Payment module
stand-ins (``order_workflow.infrastructure.inventory``/``payment``) keep their
seeds and first results beside these records: open them on the same URL.

Backends (``storage.store_url``): SQLite -- tables
``commerce_idempotency`` and ``commerce_carts``; Redis -- a hash
``<prefix>:cs:idem:{<key>}`` per mapping and a string ``<prefix>:cs:cart:{<cart>}``
per snapshot, one Lua script per write. It opens like every store of the sample,
through ``storage.app_store.open_app_store``.

It lives in ``server/storage/`` rather than in ``commerce_api``: both server parts
use it (the CommerceApi reserves keys and reads carts; the OrderWorkflow marks
orders started and looks up payment methods), and neither part imports the other's
stores through it.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Final, Protocol

import attrs

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.storage.app_store import open_app_store

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Sequence
    from contextlib import AbstractAsyncContextManager

    from zlink_trio.samples.shoppingmall.server.storage.redis_db import (
        RedisDb,
    )
    from zlink_trio.samples.shoppingmall.server.storage.sqlite_db import (
        SqliteDb,
    )

__all__ = (
    "CommerceStateStore",
    "IdempotencyMapping",
    "IdempotencyStatus",
    "MappingConflict",
    "ReserveResult",
    "StartResult",
    "open_commerce_state_store",
)


class IdempotencyStatus(enum.StrEnum):
    """Where a mapping is: reserved by CommerceApi, or its order's start recorded."""

    PENDING = "pending"
    STARTED = "started"


@attrs.frozen(kw_only=True)
class IdempotencyMapping:
    """One IdempotencyKey's OrderId, status, and the snapshot its winner reserved."""

    idempotency_key: str
    order_id: str
    status: IdempotencyStatus
    #: JSON text the winning caller stored with the mapping (e.g. its StartOrderReq).
    snapshot: str


@attrs.frozen(kw_only=True)
class ReserveResult:
    """The key's mapping; ``reserved`` when this call created it (its candidate won)."""

    mapping: IdempotencyMapping
    reserved: bool


@attrs.frozen(kw_only=True)
class StartResult:
    """The key's mapping, started; ``changed`` when this call moved it from pending."""

    mapping: IdempotencyMapping
    changed: bool


class MappingConflict(zl.StaleFence):
    """Raised by ``mark_started`` when the key maps to another OrderId.

    The caller's OrderId is not the one the key's first reservation chose;
    nothing was written. A :class:`zlink_trio.StaleFence`: re-read the mapping
    (``get_mapping``) and use its OrderId.
    """

    def __init__(self, mapping: IdempotencyMapping, order_id: str) -> None:
        super().__init__(
            f"idempotency key {mapping.idempotency_key!r} maps to order {mapping.order_id!r}, "
            f"not {order_id!r}; nothing was written, use the mapped order")
        self.mapping = mapping
        self.order_id = order_id


class CommerceStateStore(Protocol):
    """Cart snapshots and idempotency mappings (module docstring); both backends."""

    async def reserve_order(self, idempotency_key: str, candidate_order_id: str,
                            snapshot: str = "{}") -> ReserveResult:
        """Map the key to ``candidate_order_id`` (pending) unless it is mapped already."""
        ...

    async def mark_started(self, idempotency_key: str, order_id: str) -> StartResult:
        """Move the key's mapping pending -> started.

        Raises :class:`zlink_trio.NotFound` when the key is not mapped and
        :class:`MappingConflict` when it maps to another order (nothing written).
        """
        ...

    async def get_mapping(self, idempotency_key: str) -> IdempotencyMapping | None:
        """The key's mapping, ``None`` when it has none."""
        ...

    async def put_cart(self, cart_id: str, snapshot: str) -> None:
        """Store (or replace) the cart's snapshot (JSON text)."""
        ...

    async def get_cart(self, cart_id: str) -> str | None:
        """The cart's snapshot, ``None`` when there is none."""
        ...


def _text(what: str, value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value.encode()) <= 255:
        raise zl.InvalidOperation(f"{what} {value!r} must be a string of 1..255 UTF-8 bytes; "
                                  "nothing was read or written")
    return value


def _json_text(what: str, value: object) -> str:
    if not isinstance(value, str):
        raise zl.InvalidOperation(f"{what} must be JSON text (str), got {type(value).__name__}")
    return value


def _not_mapped(key: str) -> zl.NotFound:
    return zl.NotFound(f"idempotency key {key!r} is not mapped; reserve_order it first")


SQLITE_SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS commerce_idempotency (
        idempotency_key TEXT PRIMARY KEY, order_id TEXT NOT NULL, status TEXT NOT NULL,
        snapshot TEXT NOT NULL) WITHOUT ROWID""",
    """CREATE TABLE IF NOT EXISTS commerce_carts (
        cart_id TEXT PRIMARY KEY, snapshot TEXT NOT NULL) WITHOUT ROWID""",
)


def _mapping_row(conn: sqlite3.Connection, key: str) -> IdempotencyMapping | None:
    row = conn.execute("SELECT order_id, status, snapshot FROM commerce_idempotency "
                       "WHERE idempotency_key = ?", (key,)).fetchone()
    if row is None:
        return None
    return IdempotencyMapping(idempotency_key=key, order_id=row[0],
                              status=IdempotencyStatus(row[1]), snapshot=row[2])


class SqliteCommerceStateStore:
    """The ``sqlite://`` CommerceStateStore: tables ``commerce_idempotency``, ``commerce_carts``."""

    def __init__(self, db: SqliteDb) -> None:
        self._db = db

    async def reserve_order(self, idempotency_key: str, candidate_order_id: str,
                            snapshot: str = "{}") -> ReserveResult:
        """See :meth:`CommerceStateStore.reserve_order`."""
        key = _text("idempotency key", idempotency_key)
        candidate = _text("order id", candidate_order_id)
        _json_text("snapshot", snapshot)

        def body(conn: sqlite3.Connection) -> ReserveResult:
            reserved = conn.execute(
                "INSERT INTO commerce_idempotency VALUES (?, ?, ?, ?) "
                "ON CONFLICT (idempotency_key) DO NOTHING",
                (key, candidate, IdempotencyStatus.PENDING.value, snapshot)).rowcount == 1
            mapping = _mapping_row(conn, key)
            assert mapping is not None
            return ReserveResult(mapping=mapping, reserved=reserved)

        return await self._db.write(body)

    async def mark_started(self, idempotency_key: str, order_id: str) -> StartResult:
        """See :meth:`CommerceStateStore.mark_started`."""
        key = _text("idempotency key", idempotency_key)
        _text("order id", order_id)

        def body(conn: sqlite3.Connection) -> StartResult:
            mapping = _mapping_row(conn, key)
            if mapping is None:
                raise _not_mapped(key)
            if mapping.order_id != order_id:
                raise MappingConflict(mapping, order_id)
            if mapping.status is IdempotencyStatus.STARTED:
                return StartResult(mapping=mapping, changed=False)
            conn.execute("UPDATE commerce_idempotency SET status = ? WHERE idempotency_key = ?",
                         (IdempotencyStatus.STARTED.value, key))
            return StartResult(mapping=attrs.evolve(mapping, status=IdempotencyStatus.STARTED),
                               changed=True)

        return await self._db.write(body)

    async def get_mapping(self, idempotency_key: str) -> IdempotencyMapping | None:
        """See :meth:`CommerceStateStore.get_mapping`."""
        key = _text("idempotency key", idempotency_key)
        return await self._db.read(lambda conn: _mapping_row(conn, key))

    async def put_cart(self, cart_id: str, snapshot: str) -> None:
        """See :meth:`CommerceStateStore.put_cart`."""
        cart = _text("cart id", cart_id)
        _json_text("cart snapshot", snapshot)
        await self._db.write(lambda conn: conn.execute(
            "INSERT INTO commerce_carts VALUES (?, ?) ON CONFLICT (cart_id) DO UPDATE SET "
            "snapshot = excluded.snapshot", (cart, snapshot)))

    async def get_cart(self, cart_id: str) -> str | None:
        """See :meth:`CommerceStateStore.get_cart`."""
        cart = _text("cart id", cart_id)

        def body(conn: sqlite3.Connection) -> str | None:
            row = conn.execute("SELECT snapshot FROM commerce_carts WHERE cart_id = ?",
                               (cart,)).fetchone()
            return None if row is None else str(row[0])

        return await self._db.read(body)


#: KEYS: the mapping hash. ARGV: candidate order id, snapshot.
_RESERVE: Final = """
if redis.call('HSETNX', KEYS[1], 'order_id', ARGV[1]) == 1 then
  redis.call('HSET', KEYS[1], 'status', 'pending', 'snapshot', ARGV[2])
  return {1, ARGV[1], 'pending', ARGV[2]}
end
local m = redis.call('HMGET', KEYS[1], 'order_id', 'status', 'snapshot')
return {0, m[1], m[2], m[3]}
"""

#: KEYS: the mapping hash. ARGV: order id. Reply: {outcome, order_id, status, snapshot}.
_MARK_STARTED: Final = """
local m = redis.call('HMGET', KEYS[1], 'order_id', 'status', 'snapshot')
if not m[1] then
  return {'missing'}
end
if m[1] ~= ARGV[1] then
  return {'mismatch', m[1], m[2], m[3]}
end
if m[2] == 'started' then
  return {'same', m[1], m[2], m[3]}
end
redis.call('HSET', KEYS[1], 'status', 'started')
return {'changed', m[1], 'started', m[3]}
"""

_SCRIPTS: Final = {"reserve": _RESERVE, "mark_started": _MARK_STARTED}


def _mapping_reply(key: str, fields: Sequence[bytes]) -> IdempotencyMapping:
    return IdempotencyMapping(idempotency_key=key, order_id=fields[0].decode(),
                              status=IdempotencyStatus(fields[1].decode()),
                              snapshot=fields[2].decode())


class RedisCommerceStateStore:
    """The ``redis://`` CommerceStateStore: a hash per mapping, a string per cart."""

    def __init__(self, db: RedisDb) -> None:
        self._db = db

    def _mapping_key(self, key: str) -> str:
        return f"{self._db.prefix}:cs:idem:{{{key}}}"

    def _cart_key(self, cart_id: str) -> str:
        return f"{self._db.prefix}:cs:cart:{{{cart_id}}}"

    async def reserve_order(self, idempotency_key: str, candidate_order_id: str,
                            snapshot: str = "{}") -> ReserveResult:
        """See :meth:`CommerceStateStore.reserve_order`."""
        key = _text("idempotency key", idempotency_key)
        candidate = _text("order id", candidate_order_id)
        _json_text("snapshot", snapshot)
        reply = await self._db.script(f"reserve idempotency key {key!r}", "reserve",
                                      [self._mapping_key(key)], [candidate, snapshot])
        return ReserveResult(mapping=_mapping_reply(key, reply[1:]), reserved=reply[0] == 1)

    async def mark_started(self, idempotency_key: str, order_id: str) -> StartResult:
        """See :meth:`CommerceStateStore.mark_started`."""
        key = _text("idempotency key", idempotency_key)
        _text("order id", order_id)
        reply = await self._db.script(f"mark idempotency key {key!r} started", "mark_started",
                                      [self._mapping_key(key)], [order_id])
        outcome = bytes(reply[0])
        if outcome == b"missing":
            raise _not_mapped(key)
        mapping = _mapping_reply(key, reply[1:])
        if outcome == b"mismatch":
            raise MappingConflict(mapping, order_id)
        return StartResult(mapping=mapping, changed=outcome == b"changed")

    async def get_mapping(self, idempotency_key: str) -> IdempotencyMapping | None:
        """See :meth:`CommerceStateStore.get_mapping`."""
        key = _text("idempotency key", idempotency_key)
        redis_key, client = self._mapping_key(key), self._db.client
        fields = await self._db.bounded(
            f"read idempotency key {key!r}",
            lambda: client.hmget(redis_key, ["order_id", "status", "snapshot"]))
        if any(field is None for field in fields):
            return None
        return _mapping_reply(key, [field for field in fields if field is not None])

    async def put_cart(self, cart_id: str, snapshot: str) -> None:
        """See :meth:`CommerceStateStore.put_cart`."""
        cart = _text("cart id", cart_id)
        _json_text("cart snapshot", snapshot)
        redis_key, client = self._cart_key(cart), self._db.client
        await self._db.bounded(f"store cart {cart!r}", lambda: client.set(redis_key, snapshot))

    async def get_cart(self, cart_id: str) -> str | None:
        """See :meth:`CommerceStateStore.get_cart`."""
        cart = _text("cart id", cart_id)
        redis_key, client = self._cart_key(cart), self._db.client
        value = await self._db.bounded(f"read cart {cart!r}", lambda: client.get(redis_key))
        return None if value is None else value.decode()


def open_commerce_state_store(url: str) -> AbstractAsyncContextManager[CommerceStateStore]:
    """Open the CommerceStateStore ``url`` names (``sqlite:///path.db`` or ``redis://...``).

    Raises :class:`zlink_trio.InvalidConfiguration` for a malformed URL and
    :class:`zlink_trio.StoreUnavailable` when the store cannot be reached.
    Leaving the block closes it.
    """
    return open_app_store(
        url, name="CommerceStateStore", sqlite_schema=SQLITE_SCHEMA, redis_scripts=_SCRIPTS,
        on_sqlite=SqliteCommerceStateStore, on_redis=RedisCommerceStateStore)


if TYPE_CHECKING:
    def _conforms(a: SqliteCommerceStateStore, b: RedisCommerceStateStore) -> tuple[
            CommerceStateStore, CommerceStateStore]:
        # mypy proves here that both backends satisfy the protocol.
        return a, b
