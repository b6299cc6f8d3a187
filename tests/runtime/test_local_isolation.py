"""A local call is isolated like a remote one: a Spot and its caller never share an object.

A handler that changes the message it received must not change the caller's object,
and a caller that changes the reply it received must not change the Spot's state --
whether the Spot runs on the caller's node or on another one. A message or reply whose
class is deeply immutable (frozen attrs, only scalars, strings, enums and tuples of
those) is passed as it is on the caller's node: nobody can change it.

Each test runs once with the Spot on the caller's node (``local``) and once with the
Spot on another node of the same store, reached over a real loopback link
(``remote``). Real clock; every test is bounded by ``trio.fail_after``.
"""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

import attrs
import pytest
import trio

import zlink_trio as zl
from zlink_trio.store import MemoryStore
from zlink_trio.wire.codec import deeply_immutable

if TYPE_CHECKING:
    from zlink_trio.runtime.node_handle import Node

#: Real seconds a test may take.
LIMIT = 30


@attrs.frozen
class Basket:
    """Frozen, but its list can still be changed: not deeply immutable."""

    items: list[str]


@attrs.frozen
class Sealed:
    """Deeply immutable: a frozen class of a tuple of strings."""

    items: tuple[str, ...]


@attrs.frozen
class Show:
    """Asks the Spot for what it keeps."""


@zl.instance_spot("isolation-keeper", relocation=zl.RecreateOnRelocation())
class Keeper:
    """Keeps the basket it last replied with, and hands out what it keeps."""

    #: The last message each handler received (the object itself), per Spot ID.
    received: dict[str, object] = {}  # noqa: RUF012 -- a probe shared by the test

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.spot_id = ctx.spot_id
        self.kept = Basket(["kept"])
        self.sealed = Sealed(("kept",))

    @zl.handler
    async def put(self, msg: Basket) -> Basket:
        type(self).received[self.spot_id] = msg
        msg.items.append("added by the handler")
        return self.kept

    @zl.handler
    async def put_sealed(self, msg: Sealed) -> Sealed:
        type(self).received[self.spot_id] = msg
        return self.sealed

    @zl.handler
    async def show(self, msg: Show) -> Basket:
        return Basket(list(self.kept.items))


@zl.user_spot("isolation-room", relocation=zl.DisableRelocation())
class Room:
    """A User Spot whose factory changes its request and whose on_create replies with
    what it keeps."""

    def __init__(self, ctx: zl.SpotContext, request: Basket | None) -> None:
        if request is not None:
            request.items.append("added by the factory")
        self.kept = Basket(["kept"])

    async def on_create(self, request: Basket | None) -> Basket:
        return self.kept

    @zl.handler
    async def show(self, msg: Show) -> Basket:
        return Basket(list(self.kept.items))


async def _caller_and_owner(stack: AsyncExitStack, where: str) -> tuple[Node, str]:
    """The node to call from, and a Spot ID the Keeper serves (on it, or on another)."""
    store = MemoryStore()
    owner = await stack.enter_async_context(
        zl.open_node("owner", store=store, spots=[Keeper, Room]))
    spot_id = f"keeper-{where}"
    # The first call from the owner itself places the Spot there.
    await owner.client.request(spot_id, Show(), reply=Basket).instance_spot(
        "isolation-keeper").timeout(10)
    if where == "local":
        return owner, spot_id
    caller = await stack.enter_async_context(
        zl.open_node("caller", store=store, spots=[], placement_weight=0))
    return caller, spot_id


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_a_handler_that_changes_its_message_leaves_the_callers_unchanged(
        where: str) -> None:
    with trio.fail_after(LIMIT):
        async with AsyncExitStack() as stack:
            caller, spot_id = await _caller_and_owner(stack, where)
            sent = Basket(["sent by the caller"])
            await caller.client.request(spot_id, sent, reply=Basket).timeout(10)
            assert sent.items == ["sent by the caller"]
            assert Keeper.received[spot_id] is not sent
            assert Keeper.received[spot_id] == Basket(
                ["sent by the caller", "added by the handler"])


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_a_caller_that_changes_the_reply_leaves_the_spot_unchanged(where: str) -> None:
    with trio.fail_after(LIMIT):
        async with AsyncExitStack() as stack:
            caller, spot_id = await _caller_and_owner(stack, where)
            reply = await caller.client.request(spot_id, Basket([]), reply=Basket).timeout(10)
            assert reply == Basket(["kept"])
            reply.items.append("added by the caller")
            shown = await caller.client.request(spot_id, Show(), reply=Basket).timeout(10)
            assert shown == Basket(["kept"])


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_a_one_way_send_is_isolated_too(where: str) -> None:
    with trio.fail_after(LIMIT):
        async with AsyncExitStack() as stack:
            caller, spot_id = await _caller_and_owner(stack, where)
            sent = Basket(["sent"])
            await caller.client.send(spot_id, sent)
            # A request behind the send on the same Spot: the send has run by its reply.
            await caller.client.request(spot_id, Show(), reply=Basket).timeout(10)
            assert sent.items == ["sent"]
            assert Keeper.received[spot_id] == Basket(["sent", "added by the handler"])


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_deeply_immutable_messages_and_replies_are_equal_and_shared_only_locally(
        where: str) -> None:
    with trio.fail_after(LIMIT):
        async with AsyncExitStack() as stack:
            caller, spot_id = await _caller_and_owner(stack, where)
            sent = Sealed(("sent",))
            reply = await caller.client.request(spot_id, sent, reply=Sealed).timeout(10)
            assert reply == Sealed(("kept",))
            assert Keeper.received[spot_id] == sent
            # Nobody can change a deeply immutable value, so a local call skips the copy.
            assert (Keeper.received[spot_id] is sent) is (where == "local")


def test_which_classes_are_deeply_immutable() -> None:
    assert deeply_immutable(Sealed)
    assert deeply_immutable(Show)
    assert not deeply_immutable(Basket)

    @attrs.define
    class Unfrozen:
        n: int

    @attrs.frozen
    class Nested:
        inner: Sealed
        maybe: int | None = None

    @attrs.frozen
    class NestedMutable:
        inner: Basket

    assert not deeply_immutable(Unfrozen)
    assert deeply_immutable(Nested)
    assert not deeply_immutable(NestedMutable)


async def test_the_message_that_activates_a_spot_is_isolated_too() -> None:
    with trio.fail_after(LIMIT):
        async with zl.open_node("owner", store="memory://", spots=[Keeper]) as node:
            sent = Basket(["first"])
            reply = await node.client.request("keeper-cold", sent, reply=Basket).instance_spot(
                "isolation-keeper").timeout(10)
            assert sent.items == ["first"]
            assert Keeper.received["keeper-cold"] == Basket(["first", "added by the handler"])
            reply.items.append("added by the caller")
            shown = await node.client.request("keeper-cold", Show(), reply=Basket).timeout(10)
            assert shown == Basket(["kept"])


@pytest.mark.parametrize("where", ["local", "remote"])
async def test_a_created_spot_and_its_creator_share_neither_request_nor_reply(
        where: str) -> None:
    with trio.fail_after(LIMIT):
        async with AsyncExitStack() as stack:
            caller, _ = await _caller_and_owner(stack, where)
            request = Basket(["sent"])
            result = await caller.spots.get_or_create(f"room-{where}", "isolation-room").request(
                request).timeout(10)
            assert result.state is zl.CreateState.CREATED
            assert request.items == ["sent"]
            assert result.reply == Basket(["kept"])
            result.reply.items.append("added by the caller")
            shown = await caller.client.request(f"room-{where}", Show(), reply=Basket).timeout(10)
            assert shown == Basket(["kept"])
