"""SpotManager: explicit User Spot Create / GetOrCreate, Find and Close.

``node.spots.get_or_create(spot_id, type)`` and ``node.spots.create(type)`` return
builders with ``.in_mesh()``, ``.request(msg)`` and ``.timeout()``, each settable once,
awaitable once (else InvalidOperation); awaiting fixes one deadline across resolve,
reservation, factory and Ready and returns a :class:`CreateResult`.  There is no
Instance Spot create: Instance Spots are created by a call with Instance intent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from zlink_trio.core.errors import DeadlineExceeded, InvalidOperation
from zlink_trio.core.identity import (
    validate_mesh_name,
    validate_spot_id,
    validate_stable_type,
    validate_user_spot_id,
)
from zlink_trio.core.records import AuthorityState, SpotRef
from zlink_trio.runtime.calls.builders import TimedBuilder, option
from zlink_trio.runtime.calls.deadlines import deadline_after
from zlink_trio.runtime.coordinators.close import close_user_spot
from zlink_trio.runtime.coordinators.create import create_user_spot

if TYPE_CHECKING:
    from collections.abc import Generator
    from typing import Self

    from zlink_trio.runtime.coordinators.node_runtime import NodeRuntime
    from zlink_trio.runtime.results import CreateResult

__all__ = ("CreateCall", "GetOrCreateCall", "SpotManager")


class _CreateCall(TimedBuilder):
    def __init__(self, rt: NodeRuntime, spot_id: str | None, stable_type: str) -> None:
        super().__init__()
        self._rt = rt
        self._spot_id = spot_id
        self._type = stable_type
        self._mesh: str | None = None
        self._request: object | None = None

    def _describe(self) -> str:
        what = "create" if self._spot_id is None else f"get_or_create of {self._spot_id!r}"
        return f"the {what} ({self._type!r})"

    @option
    def in_mesh(self, mesh: str) -> Self:
        """Restrict the initial placement to ``mesh``."""
        self._option("in_mesh")
        self._mesh = validate_mesh_name(mesh)
        return self

    @option
    def request(self, request: object) -> Self:
        """The creation request (an attrs instance, <= 1 MiB encoded) for the factory."""
        self._option("request")
        if request is None:
            raise InvalidOperation(".request() needs an attrs instance; omit it to send none")
        self._request = request
        return self

    def __await__(self) -> Generator[Any, Any, CreateResult]:
        return self._run().__await__()

    async def _run(self) -> CreateResult:
        self._submit()
        rt = self._rt
        rt.check_usable()
        stable_type = validate_stable_type(self._type)
        create_only = self._spot_id is None
        spot_id = rt.new_uuid4() if create_only else validate_user_spot_id(self._spot_id)
        timeout = rt.options.default_timeout if self._timeout is None else self._timeout
        deadline = deadline_after(timeout)
        return await create_user_spot(rt, spot_id, stable_type, self._request, self._mesh,
                                      deadline, create_only=create_only)


class GetOrCreateCall(_CreateCall):
    """``spots.get_or_create(spot_id, type)``: EXISTING, CREATED or REJECTED."""


class CreateCall(_CreateCall):
    """``spots.create(type)``: CREATED or REJECTED with a fresh uuid4 ID, or AlreadyExists."""


class SpotManager:
    """Explicit User Spot lifecycle: ``node.spots``."""

    def __init__(self, rt: NodeRuntime) -> None:
        self._rt = rt

    def get_or_create(self, spot_id: str, stable_type: str) -> GetOrCreateCall:
        """Build a GetOrCreate of User Spot ``spot_id`` of ``stable_type``; await it.

        Invalid or reserved Entry-form IDs are InvalidOperation before any store call.
        """
        return GetOrCreateCall(self._rt, spot_id, stable_type)

    def create(self, stable_type: str) -> CreateCall:
        """Build a Create of a new User Spot of ``stable_type`` with a fresh uuid4 ID."""
        return CreateCall(self._rt, None, stable_type)

    async def find(self, spot_id: str) -> SpotRef | None:
        """The Ready authority's SpotRef of ``spot_id``, or ``None``; never creates."""
        spot_id = validate_spot_id(spot_id)
        self._rt.check_usable()
        record = None
        with trio.move_on_after(self._rt.options.default_timeout) as scope:
            record = await self._rt.store.location.find(spot_id)
        if scope.cancelled_caught:
            raise DeadlineExceeded(f"find({spot_id!r}) got no answer from the store within "
                                   f"{self._rt.options.default_timeout} s; check the store "
                                   "and retry")
        if record is None or record.state is not AuthorityState.READY:
            return None
        return record.ref()

    async def close(self, ref: SpotRef) -> bool:
        """Close the User Spot incarnation ``ref`` names.

        ``True`` when it (or a close merged with it) closed the incarnation; ``False``
        when that incarnation no longer exists. InvalidOperation for a ref of another
        generation than the current one, or of a non-User Spot. Bounded by the node's
        ``default_timeout``.
        """
        self._rt.check_usable()
        deadline = deadline_after(self._rt.options.default_timeout)
        return await close_user_spot(self._rt, ref, deadline)
