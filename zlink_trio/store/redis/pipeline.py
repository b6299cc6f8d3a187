"""Auto-pipelining: the calls queued within one scheduling tick share one round trip.

Theory of operation
-------------------
A :class:`Pipeline` owns one Redis connection of its own (plain RESP2 over a
``trio.SocketStream``: no coredis on this path, whose per-command client cost is
≈ 0.5 ms here against ≈ 10--80 µs for a raw frame) and one sender task. A caller
encodes its command (``EVALSHA`` of a script, ``HGETALL``, ...) and queues it; the
sender, woken by the first queued item, takes *every* item queued by then -- all
the calls made by the tasks that ran in the same scheduling tick -- writes them in
one ``send_all`` and reads the replies in order, handing each to its caller as it
arrives. Redis runs one connection's commands in order and each script atomically,
so batching changes no transaction's meaning. Items queued while a batch is on the
wire go in the next batch. The store uses two pipelines: one for write scripts and
one for reads (read-only scripts are flagged ``no-writes`` and must keep running
while writes are paused, so they never queue behind a write).

**The timeout rule on a shared connection** (docs/stores.md, *Failures*). A caller
waits for its reply until the earlier of its own deadline and the store timeout;
when that passes:

* its item was not taken by the sender yet: it leaves the queue -- **nothing written**;
* it was taken (connecting, or on the wire) and every other item of its batch still
  without a reply was abandoned too (or its caller's time is up as well): the batch
  is cancelled and the connection closed (Redis discards a postponed command of a client that
  disconnects, e.g. under ``CLIENT PAUSE … WRITE``) -- **nothing written**, exactly
  as the per-call connection guaranteed;
* it was taken and another caller of its batch still waits: the connection is
  kept for that caller, so this item **may have run** -- :class:`StoreUnavailable`
  with the re-read rule (every transaction is fenced; the caller's re-read decides).

Items whose reply arrived keep their answer. A lost connection (EOF, reset, refused)
fails the items still in flight with :class:`StoreUnavailable` ("may have run") and
the items never sent with "nothing written"; the next batch reconnects.

**Every call is answered.** The sender runs in a *shielded* scope that only
:meth:`Pipeline.close` cancels: a cancellation from outside (the scope around the
``async with`` that opened the store) must not stop it, because a caller may still be
shielded inside -- a node's shutdown removes its claim from a shielded, bounded scope
while the scope around it is cancelled; a sender cancelled with it would leave that
call waiting forever (the hang that once reverted this module). When the sender stops
(close, or a failure of its own) every item still queued or on the wire is answered
with :class:`StoreUnavailable`, and a call made after that fails at once.

**Reads never overtake the write they observe** (in one process). Two stores (two
nodes, or a node and a tool reading the same prefix) answer from separate sockets;
when a read sees a write's effect, both replies usually arrive in the same I/O wait
and Trio wakes their callers in random order, so the reader could act on the new
state before the writer's task has taken its own next step (a node seals a Spot's
admission right after its BeginClose reply). A read's caller therefore resumes one
scheduling round after its reply was read: every write answered in the same or an
earlier round has resumed first (in practice the order the coredis path gave).
It costs one checkpoint per read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio
from coredis.exceptions import NoScriptError, ResponseError

from zlink_trio.core.errors import StoreUnavailable

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ("Pipeline", "encode_command")

_QUEUED: Final = 0
_SENT: Final = 1
_DONE: Final = 2


def encode_command(args: Sequence[str | int | bytes]) -> bytes:
    """One command as a RESP array of bulk strings."""
    parts = [b"*%d\r\n" % len(args)]
    append = parts.append
    for arg in args:
        raw = (arg.encode("utf-8") if isinstance(arg, str)
               else arg if isinstance(arg, bytes) else str(arg).encode("ascii"))
        append(b"$%d\r\n" % len(raw))
        append(raw)
        append(b"\r\n")
    return b"".join(parts)


class _NeedMore(Exception):
    """Internal: the buffer ends inside a reply."""


class _Reader:
    """Incremental RESP2 reply parser over one connection's byte stream."""

    def __init__(self) -> None:
        self.buf = b""
        self.pos = 0

    def feed(self, data: bytes) -> None:
        self.buf = self.buf[self.pos:] + data
        self.pos = 0

    def reply(self) -> Any:
        """The next whole reply (errors are returned as exceptions); :class:`_NeedMore`."""
        start = self.pos
        try:
            return self._parse()
        except _NeedMore:
            self.pos = start
            raise

    def _parse(self) -> Any:
        buf = self.buf
        end = buf.find(b"\r\n", self.pos)
        if end < 0:
            raise _NeedMore
        kind, rest = buf[self.pos:self.pos + 1], buf[self.pos + 1:end]
        self.pos = end + 2
        if kind == b"$":
            size = int(rest)
            if size < 0:
                return None
            start = self.pos
            if len(buf) < start + size + 2:
                raise _NeedMore
            self.pos = start + size + 2
            return buf[start:start + size]
        if kind == b"*":
            count = int(rest)
            return None if count < 0 else [self._parse() for _ in range(count)]
        if kind == b":":
            return int(rest)
        if kind == b"+":
            return rest
        if kind == b"-":
            text = rest.decode("utf-8", "replace")
            return NoScriptError(text) if text.startswith("NOSCRIPT") else ResponseError(text)
        raise StoreUnavailable(f"Redis sent an unknown reply type {kind!r}; reconnecting")


class _Item:
    __slots__ = ("abandoned", "done", "frame", "limit", "replies", "state", "value")

    def __init__(self, frame: bytes, limit: float, replies: int = 1) -> None:
        self.frame = frame
        #: Replies the frame draws (``ASKING`` + a command: 2); the item gets the last one.
        self.replies = replies
        #: When the caller stops waiting (its deadline or the store timeout, the earlier).
        self.limit = limit
        self.state = _QUEUED
        self.abandoned = False
        self.done = trio.Event()
        self.value: Any = None


class Pipeline:
    """One connection, one sender task; see the module docstring for the rules."""

    def __init__(self, *, host: str, port: int, db: int, username: str | None,
                 password: str | None, timeout: float, where: str, name: str,
                 reads: bool = False) -> None:
        self._address = (host, port)
        self._setup = [encode_command(["CLIENT", "SETNAME", f"zlink-trio-{name}"])]
        if password is not None:
            auth: list[str | int | bytes] = ["AUTH", password]
            if username is not None:
                auth.insert(1, username)
            self._setup.insert(0, encode_command(auth))
        if db:
            self._setup.append(encode_command(["SELECT", db]))
        self._timeout = timeout
        self._where = where
        #: Reads resume one scheduling round late: see "Reads never overtake" above.
        self._reads = reads
        self._queue: list[_Item] = []
        self._wakeup = trio.Event()
        self._stream: trio.SocketStream | None = None
        self._reader = _Reader()
        self._inflight: list[_Item] = []
        self._batch_scope: trio.CancelScope | None = None
        self._on_wire = False  # the current batch's bytes started to leave
        #: The sender's scope: shielded from outside cancellation, cancelled by close().
        self._life = trio.CancelScope(shield=True)
        self._closed = False
        #: Batches sent and items in them (the benchmark reports the mean batch).
        self.batches = 0
        self.items = 0

    async def call(self, frame: bytes, *, replies: int = 1) -> Any:
        """Queue ``frame`` and return its reply; cancellation follows the timeout rule.

        ``replies``: how many commands ``frame`` holds (Redis Cluster's ``ASKING`` goes
        in front of the command it redirects, on the same connection); the last reply
        is returned, or the first error among them.

        Raises :class:`StoreUnavailable` when the connection failed; a Redis error
        reply is raised as coredis' own exception (``NoScriptError``, ``ResponseError``).
        When the caller's wait is cancelled, the item is abandoned; if it may have run,
        :class:`StoreUnavailable` says so instead of the cancellation's own error.
        """
        if self._closed:
            raise StoreUnavailable(f"the Redis store at {self._where} is closed; nothing "
                                   "was written (open the store again)")
        item = _Item(frame, trio.current_effective_deadline(), replies)
        self._queue.append(item)
        self._wakeup.set()
        try:
            await item.done.wait()
        except BaseException:
            if item.state != _DONE and not self._abandon(item):
                raise StoreUnavailable(
                    f"Redis at {self._where} did not answer in time and the connection is "
                    "shared with calls still waiting, so this transaction may have run; "
                    "re-read before retrying") from None
            raise
        if self._reads:
            await trio.lowlevel.cancel_shielded_checkpoint()
        if isinstance(item.value, BaseException):
            raise item.value
        return item.value

    def _abandon(self, item: _Item) -> bool:
        """Abandon ``item``; ``True`` when it certainly was not (and will not be) run."""
        item.abandoned = True
        if item.state == _QUEUED:
            self._queue.remove(item)
            return True
        # Callers whose time is also up count as gone (their wake-up may simply not
        # have run yet): they would be told "nothing written" too.
        now = trio.current_time()
        if all(i.abandoned or i.limit <= now for i in self._inflight if i.state == _SENT):
            if self._batch_scope is not None:
                self._batch_scope.cancel()  # the sender closes the connection
            return True
        return False

    def close(self) -> None:
        """Stop the sender (it answers every call still waiting); later calls fail at once."""
        self._closed = True
        self._life.cancel()

    async def run(self) -> None:
        """The sender task: one batch on the wire at a time, until :meth:`close`."""
        try:
            with self._life:  # shielded: see "Every call is answered" above
                while True:
                    await self._wakeup.wait()
                    self._wakeup = trio.Event()
                    if self._queue:
                        batch, self._queue = self._queue, []
                        await self._send_batch(batch)
        finally:
            # Nobody may wait for a sender that is gone (closed, or failed itself).
            self._closed = True
            for item in self._queue:
                item.state = _DONE
                item.value = StoreUnavailable(
                    f"the Redis store at {self._where} was closed before this call was "
                    "sent; nothing was written")
                item.done.set()
            self._queue = []
            await self._close()

    async def _send_batch(self, batch: list[_Item]) -> None:
        # Taken from the queue: from now on an abandoned item is settled by closing the
        # connection (or reported as "may have run"), never by leaving the queue.
        for item in batch:
            item.state = _SENT
        self._inflight = batch
        self._on_wire = False
        try:
            with trio.CancelScope() as self._batch_scope:
                try:
                    await self._exchange(batch)
                except Exception as error:  # any failure (even a garbled reply) fails it
                    self._fail(batch, f"{type(error).__name__}: {error}",
                               on_wire=self._on_wire)
                    await self._close()  # reconnect for the next batch
            if self._batch_scope.cancelled_caught:  # every caller left: drop the link
                await self._close()
        finally:
            self._batch_scope = None
            self._inflight = []
            # Cut short (the store closes): no caller may wait for a reply never read.
            self._fail(batch, "the store was closed", on_wire=self._on_wire)

    async def _exchange(self, batch: list[_Item]) -> None:
        if self._stream is None:
            with trio.move_on_after(self._timeout) as connecting:
                await self._connect()
            if connecting.cancelled_caught or self._stream is None:
                raise StoreUnavailable(f"connecting to Redis at {self._where} timed out")
        stream = self._stream
        self._on_wire = True
        self.batches += 1
        self.items += len(batch)
        await stream.send_all(b"".join(item.frame for item in batch))
        reader = self._reader
        for item in batch:
            value = await _next_reply(stream, reader)
            for _ in range(item.replies - 1):
                later = await _next_reply(stream, reader)
                value = value if isinstance(value, BaseException) else later
            item.state = _DONE
            item.value = value
            item.done.set()

    async def _connect(self) -> None:
        stream = await trio.open_tcp_stream(*self._address)
        reader = _Reader()
        try:
            await stream.send_all(b"".join(self._setup))
            for _ in self._setup:
                reply = await _next_reply(stream, reader)
                if isinstance(reply, BaseException):
                    raise StoreUnavailable(f"Redis refused the connection setup: {reply}")
        except BaseException:
            with trio.CancelScope(shield=True):
                await stream.aclose()
            raise
        self._stream, self._reader = stream, reader

    def _fail(self, batch: list[_Item], reason: str, *, on_wire: bool) -> None:
        """Answer every item of ``batch`` still without a reply (idempotent)."""
        if all(item.state == _DONE for item in batch):
            return
        sent = (f"the connection to Redis at {self._where} failed ({reason}) while this "
                "transaction was in flight; it may have run, re-read before retrying")
        unsent = (f"Redis at {self._where} failed ({reason}); the transaction did not "
                  "complete, retry once the store is reachable")
        for item in batch:
            if item.state != _DONE:  # one exception per caller: each raises its own
                item.value = StoreUnavailable(sent if on_wire else unsent)
                item.state = _DONE
                item.done.set()

    async def _close(self) -> None:
        stream, self._stream, self._reader = self._stream, None, _Reader()
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()


async def _next_reply(stream: trio.SocketStream, reader: _Reader) -> Any:
    """The next reply on ``stream``, reading more bytes until ``reader`` has it whole."""
    while True:
        try:
            return reader.reply()
        except _NeedMore:
            data = await stream.receive_some(65536)
            if not data:
                raise StoreUnavailable("Redis closed the connection") from None
            reader.feed(data)
