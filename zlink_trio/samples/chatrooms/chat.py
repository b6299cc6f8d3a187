"""The chat's objects: a user is an Actor, a room a User Spot that fans posts out.

A ``ChatUser`` keeps its inbox (every post it received, in arrival order); it moves with
its state (``PreserveStateWith``: the inbox as JSON), so a drain loses nothing. A
``ChatRoom`` is PerActor (``unit=zl.RelocationUnit.PER_ACTOR``): when it moves it goes
first and its members follow it one by one; it keeps no state (``RecreateOnRelocation``)
-- its members are read from the store at each post, and each post is sent to each
member as a one-way ToActor message, in the room's order.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

import zlink_trio as zl

__all__ = (
    "ROOM_TYPE",
    "USER_TYPE",
    "ChatRoom",
    "ChatUser",
    "Deliver",
    "Inbox",
    "Post",
    "Posted",
    "ReadInbox",
)

USER_TYPE = "chat.user"
ROOM_TYPE = "chat.room"


@attrs.frozen
class Post:
    """A user's post to a room; ``post_id`` is the edge's, unique per post."""

    __zlink_type__ = "chat.Post"
    post_id: str
    user: str
    text: str


@attrs.frozen
class Posted:
    """The room took the post and handed it to ``members`` members."""

    __zlink_type__ = "chat.Posted"
    post_id: str
    members: int


@attrs.frozen
class Deliver:
    """A post, on its way from a room to one of its members."""

    __zlink_type__ = "chat.Deliver"
    room: str
    post_id: str
    user: str
    text: str


@attrs.frozen
class ReadInbox:
    __zlink_type__ = "chat.ReadInbox"


@attrs.frozen
class Inbox:
    """What a user received: post IDs in arrival order, and where it lives now."""

    __zlink_type__ = "chat.Inbox"
    post_ids: list[str]
    room: str


class InboxState:
    """``zl.PreserveStateWith``'s adapter: a user's inbox as JSON, and back."""

    def capture(self, spot: Any) -> bytes:
        return json.dumps({"v": 1, "inbox": spot.inbox}).encode()

    def restore(self, spot: Any, data: bytes) -> None:
        spot.inbox = json.loads(data)["inbox"]


@zl.actor(USER_TYPE, relocation=zl.PreserveStateWith(InboxState()))
class ChatUser:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.inbox: list[str] = []

    @zl.handler
    async def deliver(self, msg: Deliver) -> None:
        self.inbox.append(msg.post_id)

    @zl.handler
    async def read(self, msg: ReadInbox) -> Inbox:
        return Inbox(list(self.inbox), self.ctx.actor_ref.container)


@zl.user_spot(ROOM_TYPE, relocation=zl.RecreateOnRelocation(),
              unit=zl.RelocationUnit.PER_ACTOR)
class ChatRoom:
    def __init__(self, ctx: zl.SpotContext, request: object | None) -> None:
        self.ctx = ctx

    @zl.handler
    async def post(self, msg: Post) -> Posted:
        members = await self.ctx.actors.members(self.ctx.ref)
        for member in members:
            await self.ctx.client.send_actor(
                member.actor_id, Deliver(self.ctx.spot_id, msg.post_id, msg.user, msg.text))
        return Posted(msg.post_id, len(members))
