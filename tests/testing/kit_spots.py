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
