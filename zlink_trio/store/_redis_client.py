"""Running the backend's scripts and commands on coredis, with deadlines and typed errors.

Theory of operation
-------------------
:class:`ScriptRunner` owns the registered Lua scripts (``coredis`` ``Script``
objects; the SHA is computed locally) and sends each call as ``EVALSHA``.
When the server answers ``NOSCRIPT`` (restarted, ``SCRIPT FLUSH``, failover
to a replica that never saw the script) it loads the script and sends the
call once more; the first call did nothing, so the retry is safe. Nothing
else is ever retried: a write that may have run must not run twice.

**Deadlines.** Every call ends by the earlier of the caller's deadline
(``trio.current_effective_deadline()``) and the store's operation timeout
(URL ``?timeout=``, default 5 s). When the operation timeout is what cut
it, the call raises :class:`Unavailable`; when the caller's deadline did, it
raises :class:`DeadlineExceeded` (an explicit cancel still propagates as
``Cancelled``). Connection loss, refused connections, a server that is
loading, read-only or paused past the timeout, and any other Redis error
become :class:`Unavailable` chained with ``from``; no coredis exception
leaves the store.

**Writes use their own connection while in flight.** coredis multiplexes
commands on pooled connections; a *write* script is sent as a blocking
request, so its connection is not shared until the reply and is dropped if
the call is cancelled or times out. Closing the connection is what makes a
timed-out write safe: Redis discards a command of a client that disconnects
while its command is postponed (``CLIENT PAUSE``), so "Unavailable" then
means "nothing written". The one ambiguous case is a reply lost after the
script ran (connection cut mid-reply): the transaction happened, atomically,
and the caller's re-read (every fence check is idempotent or reports its own
record) tells which.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import trio
from coredis.exceptions import NoScriptError, RedisError

from zlink_trio.core.errors import DeadlineExceeded, StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping, Sequence

    import coredis
    from coredis.commands.script import Script

__all__ = ("ScriptRunner",)

T = TypeVar("T")

#: What a call may raise when Redis or the link to it fails (never leaves the store).
_FAILURES = (RedisError, OSError, anyio.BrokenResourceError, anyio.ClosedResourceError,
             anyio.EndOfStream)


class ScriptRunner:
    """Sends scripts and commands to one Redis with the deadline and error rules above."""

    def __init__(self, client: coredis.Redis[bytes], scripts: Mapping[str, str], *,
                 timeout: float, where: str) -> None:
        self.client = client
        self.timeout = timeout
        #: Where the store is, for messages (``redis://host:port/db``, no password).
        self.where = where
        self._scripts: dict[str, Script[bytes]] = {
            name: client.register_script(source) for name, source in scripts.items()}

    def add_scripts(self, scripts: Mapping[str, str]) -> None:
        """Register more scripts (the Relocation Store's) on the same client."""
        for name, source in scripts.items():
            self._scripts[name] = self.client.register_script(source)

    async def bounded(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` under the deadline rule; map every Redis failure to a typed error."""
        caller = trio.current_effective_deadline()
        limit = trio.current_time() + self.timeout
        with trio.move_on_at(min(caller, limit)):
            try:
                return await call()
            except _FAILURES as error:
                raise StoreUnavailable(
                    f"{what}: Redis at {self.where} failed ({type(error).__name__}: {error}); "
                    "the transaction did not complete, retry once the store is reachable"
                ) from error
        if caller <= limit:
            raise DeadlineExceeded(
                f"{what}: the caller's deadline passed before Redis at {self.where} answered; "
                "a write in flight was abandoned with its connection, re-read before retrying"
            )
        raise StoreUnavailable(
            f"{what}: Redis at {self.where} did not answer within {self.timeout} s (paused, "
            "overloaded or unreachable); nothing was written, retry later"
        )

    async def script(self, what: str, name: str, keys: Sequence[str],
                     args: Sequence[str | int | bytes], *, write: bool = True) -> Any:
        """Run script ``name`` as one atomic transaction and return its raw reply."""
        script = self._scripts[name]

        async def attempt() -> Any:
            try:
                return await self._send(script, keys, args, write)
            except NoScriptError:
                await self.client.script_load(script.script)
                return await self._send(script, keys, args, write)

        return await self.bounded(what, attempt)

    async def _send(self, script: Script[bytes], keys: Sequence[str],
                    args: Sequence[str | int | bytes], write: bool) -> Any:
        request = self.client.evalsha(script.sha, keys=list(keys), args=list(args))
        if write:
            # A blocking request keeps its connection to itself and drops it when
            # cancelled (see the module docstring).
            request.blocking = True
        return await request
