"""Auto-pipelining: the calls queued within one scheduling tick share one round trip.

Theory of operation
-------------------
A :class:`Pipeline` owns one Redis connection (plain RESP2 over a
``trio.SocketStream``, framed by ``resp``: a general-purpose client costs ≈ 0.5 ms of
CPU per command here, a raw frame ≈ 10--80 µs) and one sender task. A caller
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

**Who enforces the time.** A caller's own deadline (any cancel scope around it) reaches
it as a cancellation while it waits, and the rule above runs in its task. The store
timeout may instead be handed to :meth:`Pipeline.call` as ``expires``: then no cancel
scope is opened per call; the pipeline's watchdog task wakes when the oldest
outstanding item's ``expires`` passes and applies the same rule to every expired item
(``Expired``: certainly not run; the "may have run" :class:`StoreUnavailable`
otherwise). The watchdog sleeps until the earliest ``expires`` of the items still
outstanding, so it wakes about once per timeout, not once per call.

Items whose reply arrived keep their answer. A lost connection (EOF, reset, refused)
fails the items still in flight with :class:`StoreUnavailable` ("may have run") and
the items never sent with "nothing written"; the next batch reconnects.

**Outages are logged as episodes** (``lowlevel.outage``), one per Redis server of the
store, shared by its pipelines: a batch the connection failed, or calls the watchdog
answered because the server said nothing within the store timeout, open it with one
WARNING on ``zlink_trio.store`` (then a count of the failed calls at most every 30 s);
the next batch answered whole by a pipeline that failed closes it with one INFO. Only
a pipeline that failed itself closes it, so reads answered while writes are paused
(``CLIENT PAUSE ... WRITE``) do not end the writes' episode.

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
earlier round has resumed first. It costs one checkpoint per read.

**Where the senders run.** :func:`open_pipelines` opens the nursery of one store's
senders and yields a :class:`Pipelines`, which starts a pipeline's sender as the
pipeline is made (the Redis Cluster router makes them on demand, one pair per master).
Leaving the block closes every pipeline. An exception raised in the block leaves it
as raised: it is carried past the senders' nursery (which would wrap it in an
``ExceptionGroup``) and raised again once the senders have stopped.
"""

from __future__ import annotations

import logging
import math
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import trio

from zlink_trio.core.errors import StoreUnavailable
from zlink_trio.lowlevel.outage import Outage
from zlink_trio.lowlevel.parking import ParkingSlot
from zlink_trio.store.redis.resp import NeedMore, ReplyReader, encode_command, new_reader

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Sequence

__all__ = ("Expired", "Pipeline", "Pipelines", "QueuedCall", "open_pipelines")

LOGGER: Final = logging.getLogger("zlink_trio.store")

_QUEUED: Final = 0
_SENT: Final = 1
_DONE: Final = 2


class Expired(Exception):
    """The store timeout (``expires``) passed and the call certainly did not run.

    Raised by :meth:`Pipeline.call` to a caller that handed it ``expires``; the caller
    words the error (``client.ScriptRunner``: "did not answer within ...").
    """


class QueuedCall(ParkingSlot):
    """One call in the pipeline; its caller parks in it (no ``trio.Event``: this is once
    per store call) until its answer is there or its wait is given up."""

    __slots__ = ("abandoned", "expires", "frame", "limit", "replies", "state", "value")

    def __init__(self, frame: bytes, limit: float, replies: int = 1,
                 expires: float | None = None) -> None:
        super().__init__()
        self.frame = frame
        #: Replies the frame draws (``ASKING`` + a command: 2); the item gets the last one.
        self.replies = replies
        #: When the caller stops waiting (its deadline or the store timeout, the earlier).
        self.limit = limit
        #: The store timeout the watchdog enforces (``None``: the caller's scopes do).
        self.expires = expires
        self.state = _QUEUED
        #: Its caller stopped waiting (or was answered by the watchdog): a reply read
        #: later is dropped, never handed to anyone.
        self.abandoned = False
        self.value: Any = None


class Pipeline:
    """One connection, one sender task; see the module docstring for the rules."""

    def __init__(self, *, host: str, port: int, db: int, username: str | None,
                 password: str | None, timeout: float, where: str, name: str,
                 outage: Outage, reads: bool = False) -> None:
        self._address = (host, port)
        #: The outage episodes of the server (shared with the store's other pipelines to
        #: it), and whether this pipeline failed since its last answered batch.
        self._outage = outage
        self._failing = False
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
        self._queue: list[QueuedCall] = []
        self._wakeup = trio.Event()
        self._stream: trio.SocketStream | None = None
        self._reader = new_reader()
        self._inflight: list[QueuedCall] = []
        self._batch_scope: trio.CancelScope | None = None
        self._on_wire = False  # the current batch's bytes started to leave
        #: The sender's scope: shielded from outside cancellation, cancelled by close().
        self._life = trio.CancelScope(shield=True)
        self._closed = False
        #: The watchdog's next wake-up (``inf``: idle), its event and its sleep's scope.
        self._watch_due = math.inf
        self._watch_wakeup = trio.Event()
        self._watch_scope: trio.CancelScope | None = None
        #: Batches sent and items in them (the benchmark reports the mean batch).
        self.batches = 0
        self.items = 0

    async def call(self, frame: bytes, *, replies: int = 1, caller: float | None = None,
                   expires: float | None = None) -> Any:
        """Queue ``frame`` and return its reply; cancellation follows the timeout rule.

        ``replies``: how many commands ``frame`` holds (Redis Cluster's ``ASKING`` goes
        in front of the command it redirects, on the same connection); the last reply
        is returned, or the first error among them.

        ``caller``: the caller's effective deadline, if it already read it (else it is
        read here). ``expires``: the store timeout as a point in time, enforced by the
        watchdog (see "Who enforces the time"); when it passes, the call raises
        :class:`Expired` (nothing was written) or the "may have run"
        :class:`StoreUnavailable`.

        Raises :class:`StoreUnavailable` when the connection failed; a Redis error
        reply is raised as ``resp``'s :class:`~zlink_trio.store.redis.resp.ReplyError`
        (:class:`~zlink_trio.store.redis.resp.NoScriptError` for ``NOSCRIPT``).
        When the caller's wait is cancelled, the item is abandoned; if it may have run,
        :class:`StoreUnavailable` says so instead of the cancellation's own error.
        """
        return await self.answer(self.submit(frame, replies=replies, caller=caller,
                                             expires=expires))

    def submit(self, frame: bytes, *, replies: int = 1, caller: float | None = None,
               expires: float | None = None) -> QueuedCall:
        """Queue ``frame`` now (it goes with the sender's next batch); :meth:`answer` waits
        for its reply. Between the two the caller may wait for other calls -- never
        without awaiting :meth:`answer` in the end (a cancelled caller included: only the
        answer tells whether the call ran). The arguments are :meth:`call`'s."""
        if self._closed:
            raise StoreUnavailable(f"the Redis store at {self._where} is closed; nothing "
                                   "was written (open the store again)")
        if caller is None:
            caller = trio.current_effective_deadline()
        item = QueuedCall(frame, caller if expires is None or caller < expires else expires,
                     replies, expires)
        self._queue.append(item)
        self._wakeup.set()
        if expires is not None and expires < self._watch_due:
            self._watch_due = expires  # earlier than the watchdog's wake-up: move it
            self._watch_wakeup.set()
            if self._watch_scope is not None:
                self._watch_scope.deadline = expires
        return item

    async def answer(self, item: QueuedCall) -> Any:
        """The reply of ``item`` (from :meth:`submit`), as :meth:`call` returns or raises it."""
        try:
            if item.state != _DONE:
                await item.park()
            else:  # answered already: no cancel point, the answer is what it says
                await trio.lowlevel.cancel_shielded_checkpoint()
        except BaseException:
            if item.state != _DONE and not self._abandon(item):
                raise StoreUnavailable(_may_have_run(self._where)) from None
            raise
        if self._reads:
            await trio.lowlevel.cancel_shielded_checkpoint()
        if isinstance(item.value, BaseException):
            raise item.value
        return item.value

    async def command(self, args: Sequence[str | int | bytes]) -> Any:
        """Send one command (``["SCAN", 0, ...]``) and return its reply; as :meth:`call`."""
        return await self.call(encode_command(args))

    def _abandon(self, item: QueuedCall) -> bool:
        """Abandon ``item``; ``True`` when it certainly was not (and will not be) run."""
        item.abandoned = True
        if item.state == _QUEUED:
            self._queue.remove(item)
            item.state = _DONE
            return True
        return self._all_gone()

    def _all_gone(self) -> bool:
        """Every caller of the batch on the wire is gone: cancel it (``True``), else ``False``."""
        # Callers whose time is also up count as gone (their wake-up may simply not
        # have run yet): they would be told "nothing written" too.
        now = trio.current_time()
        if all(i.abandoned or i.limit <= now for i in self._inflight if i.state == _SENT):
            if self._batch_scope is not None:
                self._batch_scope.cancel()  # the sender closes the connection
            return True
        return False

    def _expire(self) -> None:
        """Answer every outstanding item whose ``expires`` passed (the watchdog's rule)."""
        now = trio.current_time()
        queued = [i for i in self._queue if i.expires is not None and i.expires <= now]
        for item in queued:  # never sent: nothing written
            self._queue.remove(item)
            self._answer(item, Expired())
        sent = [i for i in self._inflight if i.state == _SENT and not i.abandoned
                and i.expires is not None and i.expires <= now]
        if queued or sent:
            self._failed(f"no answer within {self._timeout} s (paused, overloaded or "
                         "unreachable)", len(queued) + len(sent))
        if not sent:
            return
        for item in sent:
            item.abandoned = True
        gone = self._all_gone()
        for item in sent:
            item.value = Expired() if gone else StoreUnavailable(_may_have_run(self._where))
            item.wake()

    def _answer(self, item: QueuedCall, value: object) -> None:
        item.abandoned = True
        item.state = _DONE
        item.value = value
        item.wake()

    def _next_expiry(self) -> float:
        due = math.inf
        for batch in (self._inflight, self._queue):
            for item in batch:
                if (item.expires is not None and item.expires < due and not item.abandoned
                        and item.state != _DONE):
                    due = item.expires
        return due

    async def _watch(self) -> None:
        """The watchdog: enforce ``expires`` (see "Who enforces the time")."""
        while True:
            self._watch_due = due = self._next_expiry()
            if due == math.inf:
                await self._watch_wakeup.wait()
                self._watch_wakeup = trio.Event()
                continue
            with trio.CancelScope(deadline=due) as self._watch_scope:
                await trio.sleep_forever()
            self._watch_scope = None
            self._watch_wakeup = trio.Event()
            self._expire()

    def close(self) -> None:
        """Stop the sender (it answers every call still waiting); later calls fail at once."""
        self._closed = True
        self._life.cancel()

    async def run(self) -> None:
        """The sender task: one batch on the wire at a time, until :meth:`close`."""
        try:
            with self._life:  # shielded: see "Every call is answered" above
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._watch)
                    await self._send_loop()
        finally:
            # Nobody may wait for a sender that is gone (closed, or failed itself).
            self._closed = True
            for item in self._queue:
                item.state = _DONE
                item.value = StoreUnavailable(
                    f"the Redis store at {self._where} was closed before this call was "
                    "sent; nothing was written")
                item.wake()
            self._queue = []
            await self._close()

    async def _send_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            if self._queue:
                batch, self._queue = self._queue, []
                await self._send_batch(batch)

    async def _send_batch(self, batch: list[QueuedCall]) -> None:
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
                    reason = f"{type(error).__name__}: {error}"
                    self._failed(reason, self._fail(batch, reason, on_wire=self._on_wire))
                    await self._close()  # reconnect for the next batch
                else:
                    if self._failing:
                        self._failing = False
                        self._outage.recovered()
            if self._batch_scope.cancelled_caught:  # every caller left: drop the link
                await self._close()
        finally:
            self._batch_scope = None
            self._inflight = []
            # Cut short (the store closes): no caller may wait for a reply never read.
            self._fail(batch, "the store was closed", on_wire=self._on_wire)

    async def _exchange(self, batch: list[QueuedCall]) -> None:
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
            # _next_reply inlined for the common case (the reply is buffered already):
            # no coroutine per reply.
            try:
                value = reader.reply()
            except NeedMore:
                value = await _next_reply(stream, reader)
            for _ in range(item.replies - 1):
                later = await _next_reply(stream, reader)
                value = value if isinstance(value, BaseException) else later
            item.state = _DONE
            if not item.abandoned:  # else its caller was answered already
                item.value = value
                item.wake()

    async def _connect(self) -> None:
        stream = await trio.open_tcp_stream(*self._address)
        reader = new_reader()
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

    def _failed(self, reason: str, calls: int) -> None:
        """``calls`` calls failed because the server did not answer: the outage episode."""
        self._failing = True
        self._outage.failed(reason, calls)

    def _fail(self, batch: list[QueuedCall], reason: str, *, on_wire: bool) -> int:
        """Answer every item of ``batch`` still without a reply (idempotent); returns how
        many callers were answered."""
        if all(item.state == _DONE for item in batch):
            return 0
        sent = (f"the connection to Redis at {self._where} failed ({reason}) while this "
                "transaction was in flight; it may have run, re-read before retrying")
        unsent = (f"Redis at {self._where} failed ({reason}); the transaction did not "
                  "complete, retry once the store is reachable")
        answered = 0
        for item in batch:
            if item.state != _DONE:  # one exception per caller: each raises its own
                item.state = _DONE
                if not item.abandoned:
                    item.value = StoreUnavailable(sent if on_wire else unsent)
                    item.wake()
                    answered += 1
        return answered

    async def _close(self) -> None:
        stream, self._stream, self._reader = self._stream, None, new_reader()
        if stream is not None:
            with trio.CancelScope(shield=True):
                await stream.aclose()


class Pipelines:
    """The pipelines of one store, their senders running in :func:`open_pipelines`'s nursery."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._pipelines: list[Pipeline] = []
        self._closed = False
        #: One outage episode log per server (``where``), shared by its pipelines.
        self._outages: dict[str, Outage] = {}

    def open(self, *, host: str, port: int, db: int, username: str | None,
             password: str | None, timeout: float, where: str, name: str,
             reads: bool = False) -> Pipeline:
        """A new :class:`Pipeline` (the arguments are its own) with its sender started.

        Raises :class:`StoreUnavailable` once the block of :func:`open_pipelines` has
        ended (the store is closed).
        """
        if self._closed:
            raise StoreUnavailable(f"the Redis store at {where} is closed; nothing was "
                                   "written (open the store again)")
        outage = self._outages.get(where)
        if outage is None:
            outage = self._outages[where] = Outage(LOGGER, f"the Redis store at {where}")
        pipeline = Pipeline(host=host, port=port, db=db, username=username,
                            password=password, timeout=timeout, where=where, name=name,
                            reads=reads, outage=outage)
        self._pipelines.append(pipeline)
        self._nursery.start_soon(pipeline.run)
        return pipeline

    def close(self) -> None:
        """Close every pipeline (each answers the calls still waiting); idempotent."""
        self._closed = True
        for pipeline in self._pipelines:
            pipeline.close()


@asynccontextmanager
async def open_pipelines() -> AsyncIterator[Pipelines]:
    """The senders' nursery of one store; leaving the block closes every pipeline.

    An exception raised in the block comes out as raised, not wrapped in an
    ``ExceptionGroup`` (see "Where the senders run").
    """
    failure: Exception | None = None
    async with trio.open_nursery() as nursery:
        pipelines = Pipelines(nursery)
        try:
            yield pipelines
        except Exception as error:
            # Raised again below, once the senders stopped: crossing the nursery would
            # wrap it. Cancellations and other BaseExceptions cross it as Trio wants.
            failure = error
        finally:
            pipelines.close()
    if failure is not None:
        raise failure


def _may_have_run(where: str) -> str:
    return (f"Redis at {where} did not answer in time and the connection is shared with "
            "calls still waiting, so this transaction may have run; re-read before retrying")


async def _next_reply(stream: trio.SocketStream, reader: ReplyReader) -> Any:
    """The next reply on ``stream``, reading more bytes until ``reader`` has it whole."""
    while True:
        try:
            return reader.reply()
        except NeedMore:
            data = await stream.receive_some(65536)
            if not data:
                raise StoreUnavailable("Redis closed the connection") from None
            reader.feed(data)
