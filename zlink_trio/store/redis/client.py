"""Running the backend's scripts and commands, with deadlines and typed errors.

Theory of operation
-------------------
:class:`ScriptRunner` holds the registered Lua scripts and their SHA1 digests
(``hashlib``, as Redis computes them) and sends each call as ``EVALSHA``. When
the server answers ``NOSCRIPT`` (restarted, ``SCRIPT FLUSH``, failover to a
replica that never saw the script) it loads the script and sends the call once
more; the first call did nothing, so the retry is safe. Nothing else is ever
retried: a write that may have run must not run twice.

**Deadlines.** Every call ends by the earlier of the caller's deadline
(``trio.current_effective_deadline()``) and the store's operation timeout
(URL ``?timeout=``, default 5 s). A caller whose deadline passed before the call
raises :class:`DeadlineExceeded` at once, and so does :meth:`ScriptRunner.bounded`
when the caller's deadline is what cut it; a deadline that passes while a call waits
reaches it as a cancellation of the caller's own scope (the timeout rule of
``pipeline`` decides what it raises). When the operation timeout is what cut a call,
it raises :class:`StoreUnavailable`. Connection loss, refused connections, a server
that is loading, read-only or paused past the timeout, and any other Redis error
reply become :class:`StoreUnavailable` (chained with ``from`` where there is an
underlying error); no exception of the RESP layer leaves the store.

**Scripts and reads are auto-pipelined** (``pipeline``): every script and every
read command is queued on one of two pipelines -- write scripts on one connection,
reads (``no-writes`` scripts, ``HGETALL``, ``GET``) on another, so reads keep running
while writes are paused -- and the calls queued in one scheduling tick share a round
trip. ``NOSCRIPT`` is answered by ``SCRIPT LOAD`` on the same pipeline (so the retry,
sent after it on the same connection, finds the script). A timed-out write that was
never sent, or whose connection every waiting caller abandoned (the connection is then
closed, and Redis discards a command postponed by ``CLIENT PAUSE`` of a client that
disconnects), has written nothing; one that shares its connection with a caller still
waiting "may have run" and says so (:class:`StoreUnavailable`: re-read before
retrying). The ambiguous case of a reply lost after the script ran (connection cut
mid-reply) remains: the transaction happened, atomically, and the caller's re-read
(every fence check is idempotent or reports its own record) tells which. The opening
``PING`` is a read on the same pipeline. A call made once the store is closed raises
:class:`StoreUnavailable` at once.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any, Final, TypeVar

import trio

from zlink_trio.core.errors import DeadlineExceeded, StoreUnavailable
from zlink_trio.store.redis.pipeline import Expired
from zlink_trio.store.redis.resp import NoScriptError, ReplyError, encode_command

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence

    from zlink_trio.store.redis.pipeline import Pipeline

__all__ = ("ScriptRunner", "script_sha")

T = TypeVar("T")


def script_sha(source: str) -> str:
    """The SHA1 hex digest ``EVALSHA`` names ``source`` by (what ``SCRIPT LOAD`` returns)."""
    return hashlib.sha1(source.encode(), usedforsecurity=False).hexdigest()


class ScriptRunner:
    """Sends scripts and commands to one Redis with the deadline and error rules above."""

    def __init__(self, scripts: Mapping[str, str], *, timeout: float, where: str,
                 prefixes: Sequence[str]) -> None:
        self.timeout = timeout
        #: Where the store is, for messages (``redis://host:port/db``, no password).
        self.where = where
        #: Sent before every script's own arguments: the Location and Relocation key
        #: prefixes, the prelude's ``P`` and ``R`` (``lua.prelude``).
        self.prefixes: Final = tuple(prefixes)
        #: Each script's ``SCRIPT LOAD`` frame, sent when the server answers ``NOSCRIPT``.
        self._loads: dict[str, bytes] = {
            name: encode_command(["SCRIPT", "LOAD", source]) for name, source in scripts.items()}
        #: Each script's SHA, as ``EVALSHA`` names it.
        self._shas: dict[str, str] = {
            name: script_sha(source) for name, source in scripts.items()}
        #: Auto-pipelines for write scripts and for reads (``pipeline``), set by
        #: ``open_redis_store`` while the store is open; ``None`` before and after, when a
        #: call fails at once with :class:`StoreUnavailable`.
        self.writes: Pipeline | None = None
        self.reads: Pipeline | None = None

    async def bounded(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """Run ``call`` under the deadline rule; map every Redis failure to a typed error."""
        caller = trio.current_effective_deadline()
        limit = trio.current_time() + self.timeout
        with trio.move_on_at(min(caller, limit)):
            try:
                return await call()
            except ReplyError as error:
                raise self._failed(what, error) from error
        if caller <= limit:
            raise self._late(what)
        raise self._timed_out(what)

    def script(self, what: str, name: str, keys: Sequence[str],
               args: Sequence[str | int | bytes], *, write: bool = True
               ) -> Coroutine[Any, Any, Any]:
        """Run script ``name`` as one atomic transaction; await it for its raw reply.

        ``args`` are the script's own arguments: they follow :attr:`prefixes`. A plain
        function returning :meth:`_call`'s coroutine (one coroutine frame less on every
        suspension and resumption of the store call); a closed store raises here.
        """
        pipeline = self._pipeline(what, write)
        frame = encode_command(
            ("EVALSHA", self._shas[name], len(keys), *keys, *self.prefixes, *args))
        return self._call(what, pipeline, frame, name)

    def command(self, what: str, args: Sequence[str | int | bytes]
                ) -> Coroutine[Any, Any, Any]:
        """Run one read command (``HGETALL``, ``GET``, ...); await it for its raw RESP2
        reply (a plain function, as :meth:`script`)."""
        return self._call(what, self._pipeline(what, write=False), encode_command(args))

    async def _call(self, what: str, pipeline: Pipeline, frame: bytes,
                    script: str | None = None) -> Any:
        """``frame`` on ``pipeline`` under the deadline rule, without a cancel scope.

        The same outcomes as :meth:`bounded`: the caller's deadline reaches the call as a
        cancellation of its own scope; the store timeout is the pipeline's ``expires``.
        """
        caller = trio.current_effective_deadline()
        now = trio.current_time()
        if caller <= now:  # the caller's time is up already: nothing is sent
            raise self._late(what)
        expires = now + self.timeout
        try:
            try:
                return await pipeline.call(frame, caller=caller, expires=expires)
            except NoScriptError:
                if script is None:
                    raise
                # Loaded on the same connection, so the retry (in order) finds it.
                await pipeline.call(self._loads[script], caller=caller, expires=expires)
                return await pipeline.call(frame, caller=caller, expires=expires)
        except Expired:
            raise self._timed_out(what) from None
        except ReplyError as error:
            raise self._failed(what, error) from error

    def _failed(self, what: str, error: BaseException) -> StoreUnavailable:
        return StoreUnavailable(
            f"{what}: Redis at {self.where} failed ({type(error).__name__}: {error}); "
            "the transaction did not complete, retry once the store is reachable")

    def _late(self, what: str) -> DeadlineExceeded:
        return DeadlineExceeded(
            f"{what}: the caller's deadline passed before Redis at {self.where} answered; "
            "a write in flight was abandoned with its connection, re-read before retrying")

    def _timed_out(self, what: str) -> StoreUnavailable:
        return StoreUnavailable(
            f"{what}: Redis at {self.where} did not answer within {self.timeout} s (paused, "
            "overloaded or unreachable); nothing was written, retry later")

    def _pipeline(self, what: str, write: bool) -> Pipeline:
        pipeline = self.writes if write else self.reads
        if pipeline is None:
            raise StoreUnavailable(f"{what}: the Redis store at {self.where} is closed; "
                                   "nothing was written (open the store again)")
        return pipeline
