"""Typed references (``node.client.ref``): a Spot called through its class.

``ref.call.<handler>(msg)`` is ``client.request(spot_id, msg, reply=<the handler's reply
class>)``: the same replies and errors, with fluent options (Instance intent, Mesh,
timeout, one-way send); a name that is no handler, or a message of another class, is
refused before anything is sent. On MockClock over every backend.
"""

from __future__ import annotations

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.testing import open_test_node


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@attrs.frozen
class Reset:
    pass


@attrs.frozen
class Spec:
    name: str = "r"


@zl.instance_spot("ref-counter", relocation=zl.RecreateOnRelocation())
class Counter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)

    @zl.handler
    async def reset(self, msg: Reset) -> None:
        self.total = 0

    def helper(self) -> int:
        return self.total


@zl.user_spot("ref-room", relocation=zl.RecreateOnRelocation())
class Room(Counter):
    def __init__(self, ctx: zl.SpotContext, request: Spec | None) -> None:
        super().__init__(ctx)


SPOTS = [Counter, Room]


async def test_a_typed_call_is_a_request_with_the_handlers_reply(autojump_clock, store_url):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=SPOTS) as node:
            counter = node.client.ref(Counter, "c-1")
            with pytest.raises(zl.NotFound):  # no intent: a Missing Spot is NotFound
                await counter.call.add(Add(1))
            counter = counter.instance_spot().timeout(5)
            assert await counter.call.add(Add(2)) == Total(2)
            assert await counter.call.add(Add(3)) == Total(5)
            await counter.send(Add(10))  # one way: completes at admission
            assert await counter.call.reset(Reset()) is None  # a handler -> None
            assert await node.client.request("c-1", Add(1), reply=Total) == Total(1)
            # A User Spot: created by the manager, then called through its class.
            await node.spots.get_or_create("r-1", "ref-room")
            room = node.client.ref(Room, "r-1")
            assert await room.call.add(Add(4)) == Total(4)
            assert room.spot_id == "r-1"


async def test_a_typed_call_refuses_what_the_class_does_not_handle(autojump_clock,
                                                                   store_url):
    with trio.fail_after(100):
        async with open_test_node("node-a", store=store_url, spots=SPOTS) as node:
            counter = node.client.ref(Counter, "c-2").instance_spot()
            with pytest.raises(zl.InvalidOperation, match="add takes Add"):
                await counter.call.add(Reset())  # type: ignore[arg-type]
            with pytest.raises(zl.InvalidOperation, match="helper is not a handler"):
                await counter.call.helper()  # type: ignore[call-arg]
            with pytest.raises(zl.InvalidOperation, match="has no handler for Spec"):
                await counter.send(Spec())
            assert await node.spots.find("c-2") is None  # nothing was sent
            with pytest.raises(zl.InvalidOperation, match="User Spot type"):
                node.client.ref(Room, "r-2").instance_spot()
            with pytest.raises(zl.InvalidOperation, match=r"needs \.instance_spot"):
                node.client.ref(Counter, "c-2").in_mesh("world")
            with pytest.raises(zl.InvalidOperation, match="not a Spot type"):
                node.client.ref(Add, "c-2")
            with pytest.raises(zl.InvalidOperation):
                node.client.ref(Counter, "")
