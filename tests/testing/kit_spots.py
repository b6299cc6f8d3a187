"""Spots and messages the test kit's own tests serve (as a user's tests would)."""

from __future__ import annotations

import attrs

import zlink_trio as zl


@attrs.frozen
class Add:
    n: int


@attrs.frozen
class Total:
    value: int


@attrs.frozen
class Spec:
    name: str = "lobby"


@zl.instance_spot("kit-counter", relocation=zl.RecreateOnRelocation())
class Counter:
    def __init__(self, ctx: zl.SpotContext) -> None:
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)


@zl.user_spot("kit-room", relocation=zl.DisableRelocation())
class Room:
    def __init__(self, ctx: zl.SpotContext, request: Spec | None) -> None:
        self.total = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)


@attrs.frozen
class Kept:
    """The durable state of :class:`KeptCounter` and :class:`KeptRoom`."""

    total: int = 0


@zl.instance_spot("kit-kept", relocation=zl.RecreateOnRelocation(), state=Kept)
class KeptCounter:
    """A counter that keeps its total in the store (``ctx.state``) after every message."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = (ctx.state.load() or Kept()).total

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        await self.ctx.state.save(Kept(self.total))
        return Total(self.total)


@zl.user_spot("kit-kept-room", relocation=zl.RecreateOnRelocation(), state=Kept)
class KeptRoom(KeptCounter):
    def __init__(self, ctx: zl.SpotContext, request: Spec | None) -> None:
        super().__init__(ctx)


@zl.instance_spot("kit-reminded", relocation=zl.RecreateOnRelocation())
class RemindedCounter:
    """A counter its reminders wake (a handler for ``zl.Reminder``: it may set them)."""

    def __init__(self, ctx: zl.SpotContext) -> None:
        self.ctx = ctx
        self.total = 0
        self.woken = 0

    @zl.handler
    async def add(self, msg: Add) -> Total:
        self.total += msg.n
        return Total(self.total)

    @zl.handler
    async def woken_by(self, msg: zl.Reminder) -> None:
        self.woken += 1


@zl.user_spot("kit-reminded-room", relocation=zl.RecreateOnRelocation())
class RemindedRoom(RemindedCounter):
    def __init__(self, ctx: zl.SpotContext, request: Spec | None) -> None:
        super().__init__(ctx)
