"""One coredis client for an application store: Lua scripts, bounded calls, typed errors.

Theory of operation
-------------------
The framework's Redis backend is internal, so this is the sample's own copy
of its pattern, on the public coredis API:

- Every write is **one Lua script** (``EVALSHA``; coredis loads the script
  and retries once on ``NOSCRIPT``, which is safe: the first call ran
  nothing). Redis runs a script atomically, and each script of the sample
  reads and checks every precondition before its first write, so a refused
  call has written nothing and no append is ever half-written.
- Every call ends by the earlier of the caller's deadline and the store's
  ``?timeout=`` (default 5 s). When the timeout cut it, the call raises
  :class:`zlink_trio.StoreUnavailable`; the caller's own deadline raises
  :class:`zlink_trio.DeadlineExceeded`. Connection loss and any Redis error
  become :class:`zlink_trio.StoreUnavailable` chained with ``from``; no
  coredis exception leaves the store. A write cut after it was sent *may have
  run*: the sample's writes are idempotent (SourceCommandId dedupe, first
  result wins, compare-and-set), so re-reading or retrying is safe.
- coredis runs on anyio (Trio backend here). The client must be used as an
  async context manager; its task group wraps errors in exception groups,
  which :func:`open_redis_db` unwraps so a caller sees the single error.
- coredis logs a connection that failed while it was being set up (a server
  that accepts but does not answer: paused, still starting, behind a proxy
  whose backend is gone) with ``logger.exception`` on the ``coredis`` logger:
  pages of exception-group traceback per attempt, while the caller already
  gets the typed error. While a store of the sample is open, a filter on that
  logger (:class:`OneLineRecords`) writes such a record as one line naming the
  errors, without the traceback; the last store to close removes it.

Keys: every key starts with ``<prefix>:`` and the name of the store that owns
it (``ev``, ``rm``, ``cs``, ``inv``, ``pay``, ``calls``), so one prefix may hold
every store of a deployment without two stores sharing a key. Scripts that
touch keys of several hash slots are atomic on one Redis server, which is
what the sample supports (Redis Cluster would refuse them with ``CROSSSLOT``).
"""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import trio

import zlink_trio as zl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping, Sequence

    import coredis
    from coredis.commands.script import Script

    from zlink_trio.samples.shoppingmall.server.storage.store_url import (
        RedisTarget,
    )

__all__ = ("OneLineRecords", "RedisDb", "open_redis_db")

T = TypeVar("T")

#: The logger coredis writes every record to.
CORE_LOGGER: Final = "coredis"


class OneLineRecords(logging.Filter):
    """A record with a traceback becomes one line naming its errors, without the traceback.

    Installed on the ``coredis`` logger while a store of the sample is open (see the
    module docstring); the record keeps its level and is never dropped.
    """

    def __init__(self) -> None:
        super().__init__()
        #: Stores open now; the filter is on the logger while there is one.
        self.users = 0

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        if error is not None:
            record.msg, record.args = "%s (%s)", (record.getMessage(), _errors(error))
            record.exc_info = record.exc_text = record.stack_info = None
        return True

    @contextmanager
    def installed(self) -> Iterator[None]:
        """On the ``coredis`` logger for the block (nested blocks share one install)."""
        logger = logging.getLogger(CORE_LOGGER)
        if self.users == 0:
            logger.addFilter(self)
        self.users += 1
        try:
            yield
        finally:
            self.users -= 1
            if self.users == 0:
                logger.removeFilter(self)


#: The one filter every store of the sample installs.
ONE_LINE: Final = OneLineRecords()


def _errors(error: BaseException) -> str:
    """``Type: message`` of each distinct error in ``error`` (the leaves of a group)."""
    seen: list[str] = []
    pending = [error]
    while pending:
        current = pending.pop(0)
        if isinstance(current, BaseExceptionGroup):
            pending[:0] = current.exceptions
            continue
        text = f"{type(current).__name__}: {current}" if str(current) else \
            type(current).__name__
        if text not in seen:
            seen.append(text)
    return "; ".join(seen)


def _failures() -> tuple[type[BaseException], ...]:
    from coredis.exceptions import RedisError

    return (RedisError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError,
            anyio.EndOfStream)


class RedisDb:
    """A coredis client, the registered scripts and the key prefix; see the module docstring."""

    def __init__(self, client: coredis.Redis[bytes], target: RedisTarget,
                 scripts: Mapping[str, str]) -> None:
        self.client = client
        self.target = target
        self._scripts: dict[str, Script[bytes]] = {
            name: client.register_script(source) for name, source in scripts.items()}
        self._failures = _failures()
        self._open = True

    @property
    def prefix(self) -> str:
        """The ``?prefix=`` of the URL; every key of the store starts with it and ``:``."""
        return self.target.prefix

    async def bounded(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` under the deadline rule; map every Redis failure to a typed error."""
        if not self._open:
            raise zl.StoreUnavailable(f"{what}: the Redis store at {self.target.where} is "
                                      "closed; open it again")
        caller = trio.current_effective_deadline()
        limit = trio.current_time() + self.target.timeout
        with trio.move_on_at(min(caller, limit)):
            try:
                return await call()
            except self._failures as error:
                raise zl.StoreUnavailable(
                    f"{what}: Redis at {self.target.where} failed ({type(error).__name__}: "
                    f"{error}); retry once the store is reachable (a write that was sent may "
                    "have run; the sample's writes are idempotent, so a retry is safe)"
                ) from error
        if caller <= limit:
            raise zl.DeadlineExceeded(
                f"{what}: the caller's deadline passed before Redis at {self.target.where} "
                "answered; a write in flight may have run, re-read before deciding")
        raise zl.StoreUnavailable(
            f"{what}: Redis at {self.target.where} did not answer within "
            f"{self.target.timeout} s; a write in flight may have run, retry later")

    async def script(self, what: str, name: str, keys: Sequence[str],
                     args: Sequence[str | int | bytes]) -> Any:
        """Run the registered script ``name`` (one atomic transaction); its raw reply."""
        script = self._scripts[name]

        async def call() -> Any:
            return await script(keys=list(keys), args=list(args))

        return await self.bounded(what, call)

    def close(self) -> None:
        """Refuse further calls (the client itself closes with its context)."""
        self._open = False


def _single(group: BaseExceptionGroup[BaseException]) -> BaseException | None:
    """The one leaf of (nested) single-member groups, else ``None``."""
    error: BaseException = group
    while isinstance(error, BaseExceptionGroup):
        if len(error.exceptions) != 1:
            return None
        error = error.exceptions[0]
    return error


@asynccontextmanager
async def open_redis_db(target: RedisTarget, scripts: Mapping[str, str],
                        what: str) -> AsyncIterator[RedisDb]:
    """Connect to ``target``, check it answers (``PING``), and yield a :class:`RedisDb`.

    ``what`` names the store in messages. Raises
    :class:`zlink_trio.InvalidConfiguration` when coredis is not installed,
    :class:`zlink_trio.StoreUnavailable` when Redis does not answer within the
    URL's ``timeout``. Leaving the block closes every connection.
    """
    try:
        import coredis
        from coredis.retry import NoRetryPolicy
    except ImportError:
        raise zl.InvalidConfiguration(
            f"{what} at {target.where}: the Redis backend needs coredis; install "
            "'zlink-trio[shoppingmall]'") from None
    client: coredis.Redis[bytes] = coredis.Redis(
        host=target.host, port=target.port, db=target.db, username=target.username,
        password=target.password, connect_timeout=target.timeout,
        pool_timeout=target.timeout, max_connections=target.max_connections,
        retry_policy=NoRetryPolicy(), client_name=f"shoppingmall-{target.prefix}",
        decode_responses=False,
    )
    db = RedisDb(client, target, scripts)
    try:
        # The client's task group must not live inside a cancel scope it outlives,
        # so enter it first (that connects nothing), then bound the first round trip.
        with ONE_LINE.installed():
            async with client:
                await db.bounded(f"{what}: open (PING)", client.ping)
                try:
                    yield db
                finally:
                    db.close()
    except BaseExceptionGroup as group:
        inner = _single(group)
        if inner is None:
            raise
        raise inner from inner.__cause__
