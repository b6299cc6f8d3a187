"""A separate process for ``test_stores.py``: concurrent identical starts and appends.

``python stores_worker.py URL WORKER N`` opens the CommerceStateStore and the
OrderEventStore on URL, then runs N concurrent ``reserve_order`` calls with
one IdempotencyKey and N concurrent appends at expected version 0 to one
stream, and prints one JSON object: the reserved order ids it won, the mapped
order ids it saw, and how many appends it won. Bounded by ``trio.fail_after``.
"""

from __future__ import annotations

import json
import sys

import trio

from zlink_trio.samples.shoppingmall.server.order_workflow.infrastructure.event_store import (
    ExpectedVersionConflict,
    NewEvent,
    open_order_event_store,
)
from zlink_trio.samples.shoppingmall.server.storage.commerce_state_store import (
    open_commerce_state_store,
)


async def main(url: str, worker: str, n: int) -> None:
    won: list[str] = []
    seen: set[str] = set()
    appended = 0
    with trio.fail_after(30):
        async with open_commerce_state_store(url) as state, open_order_event_store(url) as events:
            async def start(i: int) -> None:
                result = await state.reserve_order("idem-mp", f"order-{worker}-{i}")
                seen.add(result.mapping.order_id)
                if result.reserved:
                    won.append(result.mapping.order_id)

            async def append(i: int) -> None:
                nonlocal appended
                try:
                    await events.append("o-mp", 0, [NewEvent(event_type="OrderStartedEvent",
                                                             payload="{}")],
                                        source_command_id=f"{worker}-{i}")
                except ExpectedVersionConflict:
                    return
                appended += 1

            async with trio.open_nursery() as nursery:
                for i in range(n):
                    nursery.start_soon(start, i)
                    nursery.start_soon(append, i)
    print(json.dumps({"won": won, "seen": sorted(seen), "appended": appended}))


if __name__ == "__main__":
    trio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]))
