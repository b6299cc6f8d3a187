"""The raw Trio baseline of a cold activation: spawn a task with its own channel.

Theory of operation
-------------------
A cold activation on ``memory://`` ends with what a bare Trio program does to bring an
object up: a new task that owns its queue, the first message sent to it, its reply
awaited, and the task left resident for the next one. :func:`raw_spawn_rate` does
exactly that and nothing else -- no store, no placement, no lifecycle -- with the same
number of activations in flight as ``bench.cold``, so ``cold_activations_per_s.memory``
divided by it (``cold_activation_spawn_ratio``) compares across machines where the
absolute rate does not: issue #15 quotes this baseline at 29k/s on the machine its peer
figures came from.

Each spawned task waits on a memory channel with the application lane's count bound
(1,024 items) and answers every ``(value, reply channel)`` it receives; the tasks stay
resident until the measurement ends (as the activated Spots do), then the nursery is
cancelled.
"""

from __future__ import annotations

import gc

import trio

from zlink_trio.bench.local import rate

__all__ = ("raw_spawn_rate",)

#: The spawned task's channel bound: the application lane's default count bound.
QUEUE_ITEMS = 1_024

_Request = tuple[int, trio.MemorySendChannel[int]]


async def _resident(receive: trio.MemoryReceiveChannel[_Request]) -> None:
    async for value, reply in receive:
        await reply.send(value)


async def raw_spawn_rate(count: int, in_flight: int) -> float:
    """Spawn ``count`` resident tasks, each with its own channel and one round trip to it,
    ``in_flight`` at a time; spawns per second."""
    kept: list[trio.MemorySendChannel[_Request]] = []
    async with trio.open_nursery() as nursery:

        async def one(value: int) -> None:
            send, receive = trio.open_memory_channel[_Request](QUEUE_ITEMS)
            nursery.start_soon(_resident, receive)
            reply_send, reply_receive = trio.open_memory_channel[int](1)
            await send.send((value, reply_send))
            await reply_receive.receive()
            kept.append(send)  # the task stays resident, waiting on its channel

        gc.collect()
        result = await rate(count, one, in_flight)
        nursery.cancel_scope.cancel()
    return result
