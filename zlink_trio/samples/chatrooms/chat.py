"""The chat's objects: a user is an Actor, a room a User Spot that fans posts out.

A ``ChatUser`` keeps its inbox (every post it received, in arrival order); it moves with
its state (``PreserveStateWith``: the inbox as JSON), so a drain loses nothing. A
``ChatRoom`` moves with its members (SpotWide, the default unit: one commit for the
room and its users); a ``ChatHall`` -- the same room for crowds -- is PerActor
(``unit=zl.RelocationUnit.PER_ACTOR``): when it moves it goes first and its members
follow it one by one. Neither keeps state (``RecreateOnRelocation``) -- its members are
read from the store at each post, and each post goes to each member as a ToActor
request the room waits for, in the room's order: a post is delivered when the member
has it, and the next one cannot overtake it, wherever either of them moves.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

import zlink_trio as zl

__all__ = (
    "HALL_TYPE",
    "ROOM_TYPE",
    "USER_TYPE",
    "ChatHall",
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
HALL_TYPE = "chat.hall"


@attrs.frozen
class Post:
    """A user's post to a room; ``post_id`` is the edge's, unique per post."""

    __zlink_type__ = "chat.Post"
    post_id: str
    user: str
    text: str


@attrs.frozen
class Posted:
    """The room took the post and handed it to ``members`` (their ActorIds); ``missed``
    are the members whose delivery was refused (each with its error's name)."""

    __zlink_type__ = "chat.Posted"
    post_id: str
    members: list[str]
    missed: list[str]


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
    """What a user received: post IDs in arrival order, and where it is now (its
    container and the NodeRid of its node)."""

    __zlink_type__ = "chat.Inbox"
    post_ids: list[str]
    room: str
    node_rid: str


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
        ref = self.ctx.actor_ref
        return Inbox(list(self.inbox), ref.container, str(ref.node_rid))


@zl.user_spot(ROOM_TYPE, relocation=zl.RecreateOnRelocation())
class ChatRoom:
    def __init__(self, ctx: zl.SpotContext, request: object | None) -> None:
        self.ctx = ctx

    @zl.handler
    async def post(self, msg: Post) -> Posted:
        members = await self.ctx.actors.members(self.ctx.ref)
        sent: list[str] = []
        missed: list[str] = []
        for member in members:
            try:
                await self.ctx.client.request_actor(
                    member.actor_id, Deliver(self.ctx.spot_id, msg.post_id, msg.user, msg.text))
            except zl.ZLinkError as exc:  # a member that closed meanwhile, ...
                missed.append(f"{member.actor_id}: {type(exc).__name__}")
            else:
                sent.append(member.actor_id)
        return Posted(msg.post_id, sent, missed)


@zl.user_spot(HALL_TYPE, relocation=zl.RecreateOnRelocation(),
              unit=zl.RelocationUnit.PER_ACTOR)
class ChatHall(ChatRoom):
    """A room for crowds: it moves first, and its members follow it one by one."""
