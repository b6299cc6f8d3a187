"""Who may talk to a live node process (issue #5 item 7): wrong secrets and garbage bytes.

Admission does not depend on the store backend, so these run on one SQLite file only
(the backends are covered by ``test_mesh_calls.py`` and ``test_mesh_crash.py``). Real
processes and sockets: the real clock, bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import random

import trio
from mesh_node_procs import factory_runs, launch, running, start_nodes

TEST_TIMEOUT = 60
UPGRADE = (b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
           b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
           b"Sec-WebSocket-Version: 13\r\n\r\n")


def masked_frame(opcode: int, payload: bytes, rng: random.Random) -> bytes:
    """One final, client-masked websocket frame (payload < 126 bytes)."""
    mask = rng.randbytes(4)
    return (bytes([0x80 | opcode, 0x80 | len(payload)]) + mask
            + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


async def poke(host: str, port: int, payload: bytes) -> None:
    """Send ``payload`` on a fresh TCP connection; read until the node closes it (<= 2 s)."""
    async with await trio.open_tcp_stream(host, port) as stream:
        try:
            await stream.send_all(payload)
            with trio.move_on_after(2):
                while await stream.receive_some(4096):
                    pass
        except trio.BrokenResourceError:
            pass  # the node reset the connection: refusing garbage is allowed
SECRET = "mesh-test-secret-0123456789abcdefghij"
WRONG = "not-the-mesh-secret-9876543210zyxwvu"


async def test_peer_with_a_wrong_secret_is_refused(tmp_path):
    """Item 7: a peer with a wrong secret is refused.

    ``a0`` and ``a1`` share the secret; ``intruder`` shares the store but not the secret
    and takes no new Spots. Its direct call to ``a0``'s Spot and its first message
    (placed on ``a0``) are refused -- Unavailable, nothing run or created -- while the
    peer with the right secret is answered by the same Spot.
    """
    url = f"sqlite://{tmp_path / 'mesh.db'}"
    with trio.fail_after(TEST_TIMEOUT):
        # a1 and the intruder take no new Spots: cold activations land on a0.
        async with start_nodes(["a0"], url, tmp_path, secret=SECRET), start_nodes(
                ["a1"], url, tmp_path, secret=SECRET, weight=0) as (friend,), running(
                await launch("intruder", url, tmp_path, secret=WRONG, weight=0)) as intruder:
            assert (await friend.call(op="request", spot="sec-1", n=1, intent=True))["ok"]
            refused = await intruder.call(op="request", spot="sec-1", n=100, timeout=5)
            placed = await intruder.call(op="request", spot="sec-2", n=1, intent=True,
                                         timeout=5)
            answer = await friend.call(op="request", spot="sec-1", n=1)
    assert refused.get("error") == "Unavailable", refused
    assert placed.get("error") == "Unavailable", placed
    assert answer == {"ok": True, "value": 2, "node": "a0"}  # the intruder's Add(100) never ran
    assert [spot for spot, _, _ in factory_runs(tmp_path)] == ["sec-1"]


async def test_garbage_against_a_live_node_leaves_it_serving(tmp_path):
    """Item 7: fuzzed frames against a live node leave it serving.

    Against ``f0``'s published endpoint: raw TCP garbage, a truncated HTTP upgrade, and
    websocket upgrades followed by random bytes or by frames of random content in place
    of the mesh handshake (sent over plain TCP, so the client side leaks nothing), all
    at once. ``f0`` drops those connections, and afterwards still answers a peer's calls
    to its Spot and still activates new ones.
    """
    url = f"sqlite://{tmp_path / 'mesh.db'}"
    rng = random.Random(5)
    with trio.fail_after(TEST_TIMEOUT):
        async with start_nodes(["f0"], url, tmp_path) as (target,), start_nodes(
                ["f1"], url, tmp_path, weight=0) as (peer,):
            assert (await peer.call(op="request", spot="fuzz-1", n=1, intent=True))["ok"]
            host, port = target.endpoint.removeprefix("ws://").rsplit(":", 1)
            payloads = [rng.randbytes(4096), b"GET / HTTP/1.1\r\nHost: x\r\nUpgr",
                        b"\x00" * 100, b"\r\n\r\n" * 50]
            for round_ in range(20):  # a real upgrade, then frames of random content
                frames = b"".join(masked_frame(rng.choice((1, 2)), rng.randbytes(
                    rng.randrange(0, 126)), rng) for _ in range(5))
                payloads.append(UPGRADE + (frames if round_ % 2 else rng.randbytes(300)))
            async with trio.open_nursery() as nursery:  # all at once: a live node's load
                for payload in payloads:
                    nursery.start_soon(poke, host, int(port), payload)
            answer = await peer.call(op="request", spot="fuzz-1", n=1)
            fresh = await peer.call(op="request", spot="fuzz-2", n=1, intent=True)
    assert answer == {"ok": True, "value": 2, "node": "f0"}
    assert fresh == {"ok": True, "value": 1, "node": "f0"}
