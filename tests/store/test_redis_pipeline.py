"""Redis auto-pipelining: concurrent calls share a connection, and the timeout rule holds.

Writes queued in one scheduling tick go to Redis as one batch on a connection of
their own (``zlink_trio/store/redis/pipeline.py``). On a shared connection a caller
whose time ran out is told "nothing written" only when that is certain (its call was
never sent, or every call on the connection was abandoned and the connection was
closed); otherwise its transaction "may have run" and a re-read decides. Every call is
answered: when the connection breaks, when the store closes (and at once after it),
and while the scope around the store is cancelled but the caller is shielded (a node's
shutdown; this once hung CI). Waits are event-driven: a probe write on a second
connection returns exactly when a ``CLIENT PAUSE`` ends.
"""

from __future__ import annotations

import enum
import itertools
import os

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st
from redis_helpers import own_server, raw_client, redis_test_store, url_with
from store_helpers import claim, reserve

from zlink_trio.core.errors import DeadlineExceeded, Unavailable
from zlink_trio.store import open_store
from zlink_trio.store.redis import resp

#: Under CI hiredis is installed (the test extra): its tests never skip there.
CI = bool(os.environ.get("CI"))

TIMEOUT = 10
PAUSE_MS = 500
SHORT = 0.1


async def _probe_after_pause(store: object, admin: object) -> None:
    prefix = store.config.prefix  # type: ignore[attr-defined]
    await admin.command(["SET", f"{prefix}:rel:probe", "after-pause"])  # type: ignore[attr-defined]


def _reserve_each(nursery: trio.Nursery, store: object, c: object, spot_ids: tuple[str, ...],
                  failures: list[Unavailable]) -> None:
    """Start one Reserve per ID in ``nursery``; each Unavailable lands in ``failures``."""

    async def one(spot_id: str) -> None:
        try:
            await reserve(store, c, spot_id)
        except Unavailable as error:
            failures.append(error)

    for spot_id in spot_ids:
        nursery.start_soon(one, spot_id)


async def test_concurrent_writes_all_land_in_fewer_round_trips():
    with trio.fail_after(TIMEOUT):
        async with redis_test_store() as store:
            c = await claim(store, capacity=200)
            writes = store._location._run.writes  # the batch counters are the evidence
            batches, items = writes.batches, writes.items
            fences = {}

            async def one(i: int) -> None:
                fences[i] = await reserve(store, c, f"p-{i}")

            async with trio.open_nursery() as nursery:
                for i in range(100):
                    nursery.start_soon(one, i)
            generations = {f.object_generation for f in fences.values()}
            assert len(generations) == 100  # every Reserve ran once, atomically
            assert (await store.location.statistics()).creating == 100
            assert writes.items - items == 100
            assert writes.batches - batches < 100


async def test_a_write_that_timed_out_while_queued_was_never_sent():
    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server) as store,
                    raw_client(server) as admin):
            c = await claim(store)
            await admin.command(["CLIENT", "PAUSE", PAUSE_MS, "WRITE"])
            outcome: dict[str, object] = {}

            async def first() -> None:  # on the wire, held by the pause
                outcome["first"] = await reserve(store, c, "q-1")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(first)
                # Every task blocked: the first batch is on the wire, held by the pause.
                await trio.testing.wait_all_tasks_blocked()
                with (trio.CancelScope(deadline=trio.current_time() + SHORT),
                      pytest.raises(DeadlineExceeded)):
                    await reserve(store, c, "q-2")  # queued behind it, then abandoned
            assert outcome["first"] is not None  # the first write ran after the pause
            assert await store.location.find("q-1") is not None
            assert await store.location.find("q-2") is None  # never sent: nothing written


async def test_a_timed_out_write_on_a_shared_connection_may_have_run():
    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server) as store,
                    raw_client(server) as admin):
            c = await claim(store)
            # The server knows the script (its own server is fresh): the paused call is
            # the script's EVALSHA alone, not a NOSCRIPT reload after the pause.
            await reserve(store, c, "s-0")
            await admin.command(["CLIENT", "PAUSE", PAUSE_MS, "WRITE"])
            errors: list[Unavailable] = []

            async def short() -> None:
                with trio.CancelScope(deadline=trio.current_time() + SHORT):
                    try:
                        await reserve(store, c, "s-1")
                    except Unavailable as error:
                        errors.append(error)

            async def long() -> None:  # same batch, still waiting: keeps the connection
                await reserve(store, c, "s-2")

            async with trio.open_nursery() as nursery:  # both queue in the same tick
                nursery.start_soon(short)
                nursery.start_soon(long)
            assert len(errors) == 1
            assert "may have run" in str(errors[0])
            # The re-read decides: here the paused script ran once the pause ended.
            assert await store.location.find("s-1") is not None
            assert await store.location.find("s-2") is not None


async def test_writes_abandoned_together_close_the_connection_and_write_nothing():
    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server, timeout=SHORT) as store,
                    raw_client(server) as admin):
            c = await claim(store)
            await admin.command(["CLIENT", "PAUSE", PAUSE_MS, "WRITE"])
            failures: list[Unavailable] = []
            async with trio.open_nursery() as nursery:
                _reserve_each(nursery, store, c, ("t-1", "t-2", "t-3"), failures)
            assert len(failures) == 3
            await _probe_after_pause(store, admin)
            for spot_id in ("t-1", "t-2", "t-3"):
                assert await store.location.find(spot_id) is None
            assert await reserve(store, c, "t-1") is not None  # a new connection serves


async def test_closing_the_store_answers_every_call_still_waiting():
    failures: list[Unavailable] = []
    with trio.fail_after(TIMEOUT):
        # A second store on the guard's prefix, closed while the pause still holds.
        async with (own_server() as server, redis_test_store(server) as guard,
                    raw_client(server) as admin):
            url = url_with(guard.config.prefix, server)
            async with trio.open_nursery() as nursery, open_store(url) as store:
                c = await claim(store)
                await admin.command(["CLIENT", "PAUSE", PAUSE_MS, "WRITE"])

                async def one(spot_id: str) -> None:
                    try:
                        await reserve(store, c, spot_id)
                    except Unavailable as error:
                        failures.append(error)

                for spot_id in ("c-1", "c-2", "c-3"):
                    nursery.start_soon(one, spot_id)
                # Every task blocked: the batch is on the wire, held by the pause; the
                # store then closes with three calls waiting: each is answered.
                await trio.testing.wait_all_tasks_blocked()
            assert len(failures) == 3
            assert all("closed" in str(error) for error in failures)
            await _probe_after_pause(guard, admin)
            for spot_id in ("c-1", "c-2", "c-3"):  # dropped with the connection
                assert await guard.location.find(spot_id) is None


async def test_a_call_after_the_store_closed_fails_at_once():
    with trio.fail_after(TIMEOUT):
        async with redis_test_store() as store:
            c = await claim(store)
        with pytest.raises(Unavailable, match="closed"):
            await reserve(store, c, "late")


async def test_a_shielded_call_is_answered_while_the_scope_around_the_store_is_cancelled():
    # A node's shutdown removes its claim from a shielded scope while the scope around
    # the store is cancelled; the senders must keep serving it (this once hung CI).
    with trio.fail_after(TIMEOUT):
        with trio.CancelScope() as outer:
            async with redis_test_store() as store:
                c = await claim(store)
                outer.cancel()
                with trio.CancelScope(shield=True):
                    fence = await reserve(store, c, "shielded")
                    found = await store.location.find("shielded")
    assert fence is not None
    assert found is not None


async def test_a_broken_connection_answers_every_call_and_the_next_call_reconnects():
    import socket

    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server) as store,
                    raw_client(server) as admin):
            c = await claim(store)
            writes = store._location._run.writes  # the connection to break
            await admin.command(["CLIENT", "PAUSE", PAUSE_MS, "WRITE"])
            failures: list[Unavailable] = []
            async with trio.open_nursery() as nursery:
                _reserve_each(nursery, store, c, ("b-1", "b-2", "b-3"), failures)
                await trio.testing.wait_all_tasks_blocked()
                writes._stream.socket.shutdown(socket.SHUT_RDWR)  # the link breaks
            assert len(failures) == 3
            assert all("may have run" in str(error) for error in failures)
            await _probe_after_pause(store, admin)
            # Redis dropped the postponed scripts of the client that went away.
            for spot_id in ("b-1", "b-2", "b-3"):
                assert await store.location.find(spot_id) is None
            assert await reserve(store, c, "b-1") is not None  # a new connection serves


@pytest.mark.parametrize("parser", ["python", "hiredis"])
async def test_a_flushed_script_is_loaded_again_on_the_pipeline(parser, monkeypatch):
    # With hiredis and without it (resp): the pure-Python parser and encoder are what
    # run without hiredis.
    if parser == "python":
        monkeypatch.setattr(resp, "hiredis", None)
        monkeypatch.setattr(resp, "_pack", None)
    elif resp.hiredis is None and not CI:
        pytest.skip("hiredis is not installed")
    with trio.fail_after(TIMEOUT):
        async with (own_server() as server, redis_test_store(server) as store,
                    raw_client(server) as admin):
            expected = resp.Reader if parser == "python" else resp.HiredisReader
            assert type(store._location._run.writes._reader) is expected
            c = await claim(store, capacity=10)
            await admin.command(["SCRIPT", "FLUSH"])
            fences = []

            async def one(i: int) -> None:
                fences.append(await reserve(store, c, f"n-{i}"))

            async with trio.open_nursery() as nursery:  # several NOSCRIPT in one batch
                for i in range(5):
                    nursery.start_soon(one, i)
            assert len({f.object_generation for f in fences}) == 5
            assert (await store.location.statistics()).creating == 5


READERS = [pytest.param(resp.Reader, id="python"),
           pytest.param(resp.HiredisReader, id="hiredis",
                        marks=pytest.mark.skipif(resp.hiredis is None and not CI,
                                                 reason="hiredis is not installed"))]


def _read_all(reader: resp.ReplyReader, chunks: list[bytes]) -> list[object]:
    replies: list[object] = []
    for chunk in chunks:
        reader.feed(chunk)
        while True:
            try:
                replies.append(reader.reply())
            except resp.NeedMore:
                break
    return replies


@pytest.mark.parametrize("reader", READERS)
def test_replies_split_anywhere_on_the_wire_decode_whole(reader):
    wire = b"*3\r\n$3\r\nabc\r\n:12\r\n*2\r\n$-1\r\n+OK\r\n-NOSCRIPT gone\r\n$0\r\n\r\n"
    for cut in range(len(wire) + 1):
        replies = _read_all(reader(), [wire[:cut], wire[cut:]])
        assert replies[0] == [b"abc", 12, [None, b"OK"]]
        assert isinstance(replies[1], resp.NoScriptError)
        assert replies[2:] == [b""]


@pytest.mark.parametrize("reader", READERS)
def test_a_reply_that_is_not_resp2_is_store_unavailable(reader):
    opened = reader()
    opened.feed(b"?what\r\n")
    with pytest.raises(Unavailable):
        opened.reply()


class _Status(bytes):
    """A status reply's text (``+OK``), apart from a bulk string's."""


_TEXT = st.binary(max_size=12).filter(lambda b: b"\r" not in b and b"\n" not in b)
_REPLIES = st.recursive(
    st.none() | st.binary(max_size=40) | st.integers(-(2**63), 2**63 - 1)
    | _TEXT.map(_Status)
    | st.sampled_from(["ERR wrong", "NOSCRIPT No matching script", "MOVED 12 h:1",
                       "TRYAGAIN later"]).map(resp.ReplyError),
    lambda inner: st.lists(inner, max_size=5), max_leaves=20)


def _encode(value: object) -> bytes:
    if value is None:
        return b"$-1\r\n"
    if isinstance(value, _Status):
        return b"+" + value + b"\r\n"
    if isinstance(value, bytes):
        return b"$%d\r\n%b\r\n" % (len(value), value)
    if isinstance(value, int):
        return b":%d\r\n" % value
    if isinstance(value, resp.ReplyError):
        return b"-" + str(value).encode() + b"\r\n"
    assert isinstance(value, list)
    return b"*%d\r\n" % len(value) + b"".join(_encode(v) for v in value)


def _comparable(value: object) -> object:
    if isinstance(value, resp.ReplyError):
        return (type(value), str(value))
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return bytes(value) if isinstance(value, bytes) else value


@pytest.mark.skipif(resp.hiredis is None and not CI, reason="hiredis is not installed")
@given(replies=st.lists(_REPLIES, min_size=1, max_size=6), cuts=st.lists(st.integers(0, 400)))
def test_hiredis_reads_every_reply_as_the_python_reader_does(replies, cuts):
    # The pure-Python Reader is the parser's rule; hiredis (the redis extra) must return
    # exactly its replies, however the bytes arrive.
    wire = b"".join(_encode(r) for r in replies)
    bounds = sorted({0, len(wire), *(c for c in cuts if c < len(wire))})
    chunks = [wire[a:b] for a, b in itertools.pairwise(bounds)]
    python = _read_all(resp.Reader(), chunks)
    assert [_comparable(r) for r in python] == [_comparable(r) for r in replies]
    assert [_comparable(r) for r in _read_all(resp.HiredisReader(), chunks)] == [
        _comparable(r) for r in python]


class _Kind(enum.IntEnum):
    ROOM = 3


_ARGS = st.one_of(st.text(), st.binary(), st.integers(), st.booleans(),
                  st.sampled_from(list(_Kind)))


@pytest.mark.skipif(resp.hiredis is None and not CI, reason="hiredis is not installed")
@given(args=st.lists(_ARGS, min_size=1, max_size=30) | st.tuples(_ARGS, _ARGS))
def test_hiredis_packs_every_command_as_the_python_encoder_does(args):
    # python_encode_command is the encoding's rule; encode_command packs with hiredis
    # (the redis extra) and must send exactly its bytes, for an argument hiredis does
    # not take too (an IntEnum, a bool: the rule encodes those).
    assert resp._pack is not None
    assert resp.encode_command(args) == resp.python_encode_command(args)


def test_a_command_without_hiredis_is_encoded_by_the_rule(monkeypatch):
    monkeypatch.setattr(resp, "_pack", None)
    assert resp.encode_command(["EVALSHA", "ab", 2, b"k\r\n", "\u00e9"]) == (
        b"*5\r\n$7\r\nEVALSHA\r\n$2\r\nab\r\n$1\r\n2\r\n$3\r\nk\r\n\r\n$2\r\n\xc3\xa9\r\n")
