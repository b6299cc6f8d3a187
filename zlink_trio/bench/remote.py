"""Remote figures: Spot requests between two processes, beside raw websocket and TCP echoes.

Theory of operation
-------------------
:func:`measure_remote` starts one helper process, ``python -m
zlink_trio.bench.peer``, which serves three things on 127.0.0.1: a raw
trio-websocket echo server (the physical baseline,
:mod:`zlink_trio.bench.raw_ws`), a raw Trio TCP echo server of length-prefixed
frames (the floor, :mod:`zlink_trio.bench.raw_tcp`) and a zlink node owning the
benchmark Spots.
Both processes share one SQLite store file in a temporary
directory. This process runs a node with ``placement_weight=0``, so every cold
activation it asks for lands on the peer; the Spot answering the request
figures is activated once and then reached by direct calls (command 39, route
kind 1) over one mesh link.

Raw and remote figures are measured in the same run with the same payload: a
~100-byte JSON body (:data:`PAYLOAD`), echoed back. The raw echo sends those
bytes as one websocket binary message and waits for the echo, the raw TCP echo
as one frame (4-byte length, then the bytes); the remote
request sends them as the body of a :class:`Blob` message, and the Spot replies
with the same :class:`Blob`. Each figure is measured for a fixed time in every
round, rounds alternate raw and remote so that a burst of load from other
processes hits both, and the best round of each figure is reported (load on a
shared machine only ever lowers a rate). Ratios are best remote / best raw
(``remote_*_ratio`` to the websocket echo, ``remote_*_tcp_ratio`` to TCP).

Cold activations are timed one at a time: a request with Instance intent to a
new ID, placed on the peer (route kind 2), activated there on SQLite and
answered; p50 and p99 in milliseconds.

The raw echo needs trio-websocket, an optional dependency (the ``bench``
extra). Without it the Spot and raw TCP figures are still measured; the raw
websocket figures and their ratios are ``null`` and ``unavailable`` says why (the peer is started
with ``--no-raw``).

Nothing here is asserted; the benchmark runs on the real clock. ``python -m
zlink_trio.bench.remote --json`` runs it alone; ``--profile-dir DIR`` writes
cProfile files of both processes (``measuring.prof``, ``peer.prof``).
"""

from __future__ import annotations

import argparse
import cProfile
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack, asynccontextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Final

import attrs
import trio

import zlink_trio as zl
from zlink_trio.bench import raw_tcp
from zlink_trio.bench.output import print_figures

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Awaitable, Callable

__all__ = ("PAYLOAD", "RAW_WS_MISSING", "Blob", "RemoteEcho", "main", "measure_remote",
           "raw_ws_unavailable")

#: Requests in flight for the pipelined figures.
IN_FLIGHT: Final = 100
#: Mesh and stable type shared with the peer process.
MESH: Final = "bench-remote"
ECHO_TYPE: Final = "bench-remote-echo"
#: Seconds the peer may take to start, and to stop once told to.
START_TIMEOUT: Final = 30.0
STOP_TIMEOUT: Final = 10.0
#: Deadline of one benchmark call (generous: the machine may be loaded).
CALL_TIMEOUT: Final = 30.0


@attrs.frozen
class Blob:
    """The benchmark message and its reply: ``{"n": ..., "text": ...}``, ~100 bytes of JSON."""

    # Pinned: ``python -m zlink_trio.bench.remote`` runs this module as ``__main__``.
    __zlink_type__: ClassVar[str] = "bench-remote:Blob"
    n: int
    text: str


@attrs.frozen
class Where:
    """Asks a Spot which process it runs in (a check that placement went to the peer)."""

    __zlink_type__: ClassVar[str] = "bench-remote:Where"


@attrs.frozen
class Here:
    """The process id of the Spot's node."""

    __zlink_type__: ClassVar[str] = "bench-remote:Here"
    pid: int


@zl.instance_spot(ECHO_TYPE, relocation=zl.RecreateOnRelocation())
class RemoteEcho:
    """An Instance Spot that echoes its message: the cheapest possible handler."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx

    @zl.handler
    async def echo(self, msg: Blob) -> Blob:
        return msg

    @zl.handler
    async def where(self, msg: Where) -> Here:
        return Here(os.getpid())


def _payload() -> bytes:
    return json.dumps({"n": 1234567, "text": "x" * 77}, separators=(",", ":")).encode()


#: The JSON body both the raw echo and the remote request carry (100 bytes).
PAYLOAD: Final = _payload()
_TEXT: Final = json.loads(PAYLOAD)["text"]

#: Why the raw echo cannot run when trio-websocket is not installed.
RAW_WS_MISSING: Final = ("trio-websocket is not installed, so the raw websocket echo baseline "
                         "cannot run; install the bench extra: pip install 'zlink-trio[bench]'")


def raw_ws_unavailable() -> str | None:
    """``None`` when the raw echo can run (trio-websocket is installed), else the reason.

    Looks the package up without importing it.
    """
    try:
        found = importlib.util.find_spec("trio_websocket") is not None
    except ValueError:  # imported already, without a spec
        found = True
    return None if found else RAW_WS_MISSING


# --------------------------------------------------------------------------- timing


async def _rate(seconds: float, one: Callable[[int], Awaitable[object]], in_flight: int) -> float:
    """Calls of ``one`` per second with ``in_flight`` workers, each looping for ``seconds``."""
    done = 0
    stop = trio.current_time() + seconds

    async def worker(base: int) -> None:
        nonlocal done
        i = base
        while trio.current_time() < stop:
            await one(i)
            i += in_flight
            done += 1

    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for w in range(in_flight):
            nursery.start_soon(worker, w)
    return done / (time.perf_counter() - start)


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# --------------------------------------------------------------------------- the peer


@attrs.frozen
class _PeerInfo:
    raw_url: str | None
    tcp_port: int
    pid: int


async def _read_line(stream: trio.abc.ReceiveStream) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = await stream.receive_some(4096)
        if not chunk:
            raise zl.Unavailable(
                "the benchmark peer process (python -m zlink_trio.bench.peer) exited before "
                "it was ready; its error is on stderr above"
            )
        data += chunk
    return data


@asynccontextmanager
async def _peer(store_url: str, profile: Path | None, *, raw: bool) -> AsyncIterator[_PeerInfo]:
    """Run the peer process for the block; it stops when its stdin closes."""
    command = [sys.executable, "-m", "zlink_trio.bench.peer", "--store", store_url]
    if profile is not None:
        command += ["--profile", str(profile)]
    if not raw:
        command.append("--no-raw")
    process = await trio.lowlevel.open_process(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        with trio.fail_after(START_TIMEOUT):
            ready = json.loads(await _read_line(process.stdout))
        yield _PeerInfo(raw_url=ready["raw"], tcp_port=ready["tcp"], pid=process.pid)
    finally:
        with trio.CancelScope(shield=True):
            await process.stdin.aclose()  # the peer's signal to stop
            with trio.move_on_after(STOP_TIMEOUT):
                await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            await process.stdout.aclose()


# --------------------------------------------------------------------------- figures


async def _raw_rate(round_trip: Callable[[], Awaitable[None]], seconds: float,
                    in_flight: int) -> float:
    async def one(_: int) -> None:
        await round_trip()

    return await _rate(seconds, one, in_flight)


async def _remote_rate(node: zl.Node, spot_id: str, seconds: float, in_flight: int) -> float:
    async def one(n: int) -> None:
        await node.client.request(spot_id, Blob(n, _TEXT), reply=Blob).timeout(CALL_TIMEOUT)

    return await _rate(seconds, one, in_flight)


async def _cold_ms(node: zl.Node, prefix: str, seconds: float) -> list[float]:
    """Cold activations on the peer, one at a time, for ``seconds``; each one's ms."""
    samples: list[float] = []
    stop = trio.current_time() + seconds
    while trio.current_time() < stop or not samples:
        start = time.perf_counter()
        await node.client.request(f"{prefix}-{len(samples)}", Blob(len(samples), _TEXT),
                                  reply=Blob).instance_spot(ECHO_TYPE).timeout(CALL_TIMEOUT)
        samples.append((time.perf_counter() - start) * 1000)
    return samples


async def _measure(*, rounds: int, seconds: float, profile_dir: Path | None = None
                   ) -> dict[str, object]:
    best: dict[str, float] = {"raw_seq": 0.0, "remote_seq": 0.0, "raw_par": 0.0,
                              "remote_par": 0.0, "tcp_seq": 0.0, "tcp_par": 0.0}
    cold: list[float] = []
    missing = raw_ws_unavailable()
    round_trip: Callable[[], Awaitable[None]] | None = None
    # CPU time, not wall time: on a shared machine wall time is mostly waiting for a core.
    profiler = cProfile.Profile(time.process_time) if profile_dir is not None else None
    with tempfile.TemporaryDirectory(prefix="zlink-bench-remote-") as tmp:
        store_url = f"sqlite://{Path(tmp) / 'mesh.db'}"
        peer_profile = profile_dir / "peer.prof" if profile_dir is not None else None
        async with AsyncExitStack() as stack:
            peer = await stack.enter_async_context(
                _peer(store_url, peer_profile, raw=missing is None))
            node = await stack.enter_async_context(zl.open_node(
                "bench-client", store=store_url, mesh=MESH, spots=[RemoteEcho],
                placement_weight=0, instance_idle_timeout=0))
            if peer.raw_url is not None:
                from zlink_trio.bench import raw_ws  # the bench extra: only once it is found

                round_trip = await stack.enter_async_context(
                    raw_ws.open_echo(peer.raw_url, PAYLOAD))
            tcp_round_trip = await stack.enter_async_context(
                raw_tcp.open_echo(peer.tcp_port, PAYLOAD))

            async def raw_rate(in_flight: int) -> float:
                if round_trip is None:
                    return 0.0
                return await _raw_rate(round_trip, seconds, in_flight)

            spot_id = "bench-remote-echo-1"
            here = await node.client.request(spot_id, Where(), reply=Here).instance_spot(
                ECHO_TYPE).timeout(CALL_TIMEOUT)
            if here.pid != peer.pid:
                raise zl.Unavailable(f"Spot {spot_id!r} was placed in process {here.pid}, "
                                     f"not on the peer ({peer.pid}): placement_weight=0 was "
                                     "ignored, so the figures would not be remote ones")
            for _ in range(20):  # warm both paths (route cache, link, allocator)
                if round_trip is not None:
                    await round_trip()
                await tcp_round_trip()
                await node.client.request(spot_id, Blob(0, _TEXT), reply=Blob)
            for r in range(rounds):
                with profiler or nullcontext():
                    best["tcp_seq"] = max(best["tcp_seq"],
                                          await _raw_rate(tcp_round_trip, seconds, 1))
                    best["raw_seq"] = max(best["raw_seq"], await raw_rate(1))
                    best["remote_seq"] = max(best["remote_seq"],
                                             await _remote_rate(node, spot_id, seconds, 1))
                    best["tcp_par"] = max(best["tcp_par"],
                                          await _raw_rate(tcp_round_trip, seconds, IN_FLIGHT))
                    best["raw_par"] = max(best["raw_par"], await raw_rate(IN_FLIGHT))
                    best["remote_par"] = max(
                        best["remote_par"], await _remote_rate(node, spot_id, seconds, IN_FLIGHT))
                    cold += await _cold_ms(node, f"bench-remote-cold-{r}", seconds)
    if profiler is not None and profile_dir is not None:
        profiler.dump_stats(profile_dir / "measuring.prof")
    raw = round_trip is not None  # else the raw figures and the ratios are null
    figures: dict[str, object] = {
        "raw_ws_echo_per_s": round(best["raw_seq"]) if raw else None,
        "remote_requests_per_s": round(best["remote_seq"]),
        "remote_request_ratio": round(best["remote_seq"] / best["raw_seq"], 3) if raw else None,
        "raw_ws_echo_pipelined_per_s": round(best["raw_par"]) if raw else None,
        "remote_pipelined_per_s": round(best["remote_par"]),
        "remote_pipelined_ratio": round(best["remote_par"] / best["raw_par"], 3) if raw else None,
        "raw_tcp_echo_per_s": round(best["tcp_seq"]),
        "remote_sequential_tcp_ratio": round(best["remote_seq"] / best["tcp_seq"], 3),
        "raw_tcp_pipelined_per_s": round(best["tcp_par"]),
        "remote_pipelined_tcp_ratio": round(best["remote_par"] / best["tcp_par"], 3),
        "remote_cold_activation_ms": {
            "p50": round(statistics.median(cold), 3),
            "p99": round(_percentile(cold, 0.99), 3),
        },
    }
    if missing is not None:
        figures["unavailable"] = {"raw_ws_echo": missing}
    return figures


async def measure_remote(*, quick: bool) -> dict[str, object]:
    """Measure the remote figures against a fresh peer process; a JSON-ready dict.

    Keys: ``raw_ws_echo_per_s``, ``remote_requests_per_s``, ``remote_request_ratio``,
    ``raw_ws_echo_pipelined_per_s``, ``remote_pipelined_per_s``,
    ``remote_pipelined_ratio``, ``raw_tcp_echo_per_s``, ``remote_sequential_tcp_ratio``,
    ``raw_tcp_pipelined_per_s``, ``remote_pipelined_tcp_ratio`` and
    ``remote_cold_activation_ms`` (``{"p50", "p99"}``); without trio-websocket the two
    raw websocket figures and the two ratios are ``None`` and
    ``unavailable`` is ``{"raw_ws_echo": reason}``.
    ``quick`` measures one round of ~0.2 s per figure (a smoke run); otherwise three
    alternating rounds of 2 s per figure (about 50 s). Raises :class:`~zlink_trio.Unavailable`
    if the peer process cannot start (or the Spot was not placed on it), and what the
    node raises if a call fails; the peer process is stopped on every outcome.
    """
    if quick:
        return await _measure(rounds=1, seconds=0.2)
    return await _measure(rounds=3, seconds=2.0)


def main(argv: list[str] | None = None) -> int:
    """``python -m zlink_trio.bench.remote``: print the remote figures."""
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.bench.remote",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object, on the last line of stdout")
    parser.add_argument("--quick", action="store_true", help="one short round (smoke run)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (3)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="seconds per figure and round (2.0)")
    parser.add_argument("--profile-dir", type=Path, default=None,
                        help="write cProfile stats of both processes here")
    args = parser.parse_args(argv)
    if args.profile_dir is not None:
        args.profile_dir.mkdir(parents=True, exist_ok=True)
    rounds = args.rounds or (1 if args.quick else 3)
    seconds = args.seconds or (0.2 if args.quick else 2.0)
    figures = trio.run(lambda: _measure(rounds=rounds, seconds=seconds,
                                        profile_dir=args.profile_dir))
    print_figures(figures, as_json=args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
