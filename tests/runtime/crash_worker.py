"""A node process for the crash-recovery tests (run as a script by test_crash_recovery).

``python crash_worker.py MODE STORE_URL SIDE_FILE [MARKER]`` with MODE:

* ``first``   -- node ``n1`` (lease 1 s) sends ``Add(1)`` with Instance intent to ``c1``.
* ``first-short`` -- the same with a 0.25 s deadline (shorter than a third of the
  lease, so it has passed before a restarted ``n1`` may adopt anything).
* ``create``  -- node ``n1`` (lease 1 s) runs ``get_or_create("u1", "crashroom")``.
* ``restart`` -- node ``n1`` again (its startup scan recovers), waits until ``c1`` has
  no Creating record and no recovery pointer, then sends ``c1`` a plain ``Add(10)``.
* ``other``   -- node ``n2`` keeps sending ``Add(100)`` with Instance intent to ``c1``
  until it is Ready without a pointer; it must never create it. With MARKER, ``other``
  creates that file when it is done and ``restart`` keeps its node (and so ``c1``)
  open until the file exists, so ``n2`` never sees the Spot closed by the test's end.

``ZLINK_CRASH_AT`` (read by zlink_trio at import) kills the process at one step.
Every factory run and handled message appends one line to SIDE_FILE; the last
line of stdout is a JSON report. All waits are bounded.
"""

from __future__ import annotations

import json
import sys
import time

import attrs
import trio

import zlink_trio as zl
from zlink_trio.store import Store, open_store

NODE = ""
SIDE = ""
DEADLINE = 20.0
SHORT_DEADLINE = 0.25


def side(*words: object) -> None:
    with open(SIDE, "a", encoding="utf-8") as f:  # one write per line: survives SIGKILL
        f.write(" ".join(str(w) for w in words) + "\n")


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@attrs.frozen
class RoomSpec:
    name: str = "lobby"


@zl.instance_spot("crashcounter", relocation=zl.DisableRelocation())
class CrashCounter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0
        side("factory", NODE, ctx.spot_id, ctx.generation)

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        side("handle", NODE, self.ctx.spot_id, self.ctx.generation, msg.n)
        return Total(self.total)


@zl.user_spot("crashroom", relocation=zl.DisableRelocation())
class CrashRoom:
    def __init__(self, ctx: zl.SpotContext, request: RoomSpec) -> None:
        self.ctx = ctx
        side("factory", NODE, ctx.spot_id, ctx.generation)

    async def on_create(self, request: RoomSpec) -> None:
        side("create", NODE, self.ctx.spot_id, self.ctx.generation)

    @zl.handler
    async def add(self, msg: Add) -> Total:
        return Total(msg.n)


SPOTS = [CrashCounter, CrashRoom]


async def settled(store: Store, spot_id: str) -> bool:
    record = await store.location.find(spot_id)
    return record is None or (record.state.value != "creating"
                              and record.recovery_pointer is None)


async def wait_settled(store: Store, spot_id: str) -> None:
    """Poll another process's store writes (no event can cross processes); bounded."""
    with trio.fail_after(DEADLINE):
        for _ in range(int(DEADLINE / 0.05) + 1):
            if await settled(store, spot_id):
                return
            await trio.sleep(0.05)


async def report(store: Store, **extra: object) -> None:
    out: dict[str, object] = dict(extra)
    for spot_id in ("c1", "u1"):
        record = await store.location.find(spot_id)
        out[spot_id] = None if record is None else {
            "state": record.state.value, "pointer": record.recovery_pointer is not None,
            "generation": record.object_generation, "owner_generation": record.owner_generation}
    stats = await store.location.statistics()
    out["creating"] = stats.creating
    out["roots"] = (await store.relocation.statistics()).roots
    print(json.dumps(out), flush=True)


async def main(mode: str, url: str) -> None:
    global NODE
    NODE = "n2" if mode == "other" else "n1"
    lease = 1.0 if mode in ("first", "first-short", "create") else 5.0
    async with open_store(url) as store, zl.open_node(
            NODE, store=url, spots=SPOTS, lease=lease, default_timeout=DEADLINE) as node:
        if mode in ("first", "first-short"):
            reply = await node.client.request("c1", Add(1), reply=Total).instance_spot() \
                .timeout(DEADLINE if mode == "first" else SHORT_DEADLINE)
            side("reply", NODE, reply.value)
            await report(store, reply=reply.value)
        elif mode == "create":
            result = await node.spots.get_or_create("u1", "crashroom").request(RoomSpec()) \
                .timeout(DEADLINE)
            await report(store, result=result.state.value)
        elif mode == "restart":
            await wait_settled(store, "c1")
            await report(store, phase="recovered")  # before the plain request below
            reply_value = None
            if await store.location.find("c1") is not None:
                reply_value = (await node.client.request("c1", Add(10), reply=Total)
                               .timeout(DEADLINE)).value
                side("reply", NODE, reply_value)
            await report(store, reply=reply_value)
            if len(sys.argv) > 4:  # keep c1 (do not close the node) until n2 is done
                marker = trio.Path(sys.argv[4])
                with trio.fail_after(DEADLINE):
                    for _ in range(int(DEADLINE / 0.05) + 1):  # another process's file
                        if await marker.exists():
                            break
                        await trio.sleep(0.05)
        elif mode == "other":
            outcomes: list[str] = []
            end = time.monotonic() + DEADLINE
            while time.monotonic() < end:
                done = await settled(store, "c1") and await store.location.find("c1") is not None
                try:
                    await node.client.request("c1", Add(100), reply=Total).instance_spot() \
                        .timeout(0.5)
                    outcomes.append("replied")
                except zl.ZLinkError as exc:
                    outcomes.append(type(exc).__name__)
                if done:
                    break
                await trio.sleep(0.1)  # pacing between attempts (Unavailable is immediate)
            await report(store, outcomes=sorted(set(outcomes)))
            if len(sys.argv) > 4:
                await trio.Path(sys.argv[4]).write_text("done\n", encoding="utf-8")


if __name__ == "__main__":
    SIDE = sys.argv[3]
    trio.run(main, sys.argv[1], sys.argv[2])
