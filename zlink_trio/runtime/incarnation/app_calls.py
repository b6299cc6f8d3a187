"""Calling application code from the runtime: hooks, ``on_close``, replies, errors.

Theory of operation
-------------------
The runtime calls into a Spot's class at a few points: the factory and
``on_activate`` / ``on_create`` while it activates, handlers and timer callbacks as
turns, and ``on_close(reason)`` once at the end.  This module holds the rules those
calls share, so every caller applies them the same way:

* a hook may be sync or async (:func:`call_hook` awaits only an async one);
* an exception from application code never escapes as itself: it becomes
  :class:`HandlerError` with the exception chained as ``__cause__`` and a message
  saying what raised and what happened to the Spot (:func:`handler_error`);
* a reply must be exactly the handler's declared reply class (:func:`check_reply`);
* ``on_close`` runs bounded by :data:`CLEANUP_TIMEOUT` and its failures are logged,
  never raised (:func:`run_on_close`): cleanup always continues past it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import trio

from zlink_trio.core.errors import HandlerError, InvalidOperation
from zlink_trio.runtime.declaration.spot_types import ActorType, InstanceSpotType, UserSpotType
from zlink_trio.runtime.observe.logs import SPOTS as LOGGER

if TYPE_CHECKING:
    from zlink_trio.runtime.declaration.handlers import HandlerInfo
    from zlink_trio.runtime.declaration.policies import CloseReason
    from zlink_trio.runtime.declaration.spot_types import SpotType

__all__ = ("CLEANUP_TIMEOUT", "activate", "activates_synchronously", "call_hook",
           "check_reply", "construct", "handler_error", "run_on_close")

#: Bound on an ``on_close`` that runs while the node cleans up (shielded work).
CLEANUP_TIMEOUT: Final = 10.0


def construct(spot_type: SpotType, ctx: object, request: object | None) -> object:
    """Run the factory (``cls(ctx)``, or ``cls(ctx, request)`` for a User Spot).

    Raises :class:`HandlerError` (the exception chained) when it raises, and
    :class:`InvalidOperation` for a type that is neither User, Instance nor Actor.
    """
    try:
        if isinstance(spot_type, UserSpotType):
            return spot_type.construct(ctx, request)
        if isinstance(spot_type, InstanceSpotType | ActorType):
            return spot_type.construct(ctx)
    except Exception as exc:
        raise handler_error(f"the factory of {spot_type.stable_type!r}", exc,
                            activating=True) from exc
    raise InvalidOperation(f"{spot_type.stable_type!r} is not a User or Instance Spot type; "
                           "declare it with @zl.user_spot or @zl.instance_spot")


async def activate(spot_type: SpotType, instance: object, request: object | None, *,
                   create: bool) -> object:
    """``on_activate``, then (``create``) ``on_create(request)``; what ``on_create`` returned.

    Raises :class:`HandlerError` (the exception chained) when a hook raises.
    """
    hooks = spot_type.hooks
    try:
        if hooks.on_activate is not None:
            await call_hook(instance, "on_activate", hooks.on_activate.is_async)
        if create and hooks.on_create is not None:
            return await call_hook(instance, "on_create", hooks.on_create.is_async, request)
    except Exception as exc:
        raise handler_error(f"the activation hooks of {spot_type.stable_type!r}", exc,
                            activating=True) from exc
    return None


def activates_synchronously(spot_type: SpotType) -> bool:
    """Whether a cold activation of ``spot_type`` has nothing to await: it keeps no
    durable state (its load is a store read) and its ``on_activate`` and ``on_create``
    are absent or synchronous (then :func:`activate` ends without suspending)."""
    hooks = spot_type.hooks
    return (spot_type.state is None
            and (hooks.on_activate is None or not hooks.on_activate.is_async)
            and (hooks.on_create is None or not hooks.on_create.is_async))


async def call_hook(instance: object, hook_name: str, is_async: bool, *args: object) -> object:
    """Call a lifecycle hook, awaiting it when it is async."""
    result = getattr(instance, hook_name)(*args)
    if is_async:
        result = await result
    return result


def handler_error(what: str, exc: Exception, *, activating: bool = False) -> HandlerError:
    """A HandlerError for ``exc`` raised by application code, with ``exc`` as its cause."""
    outcome = ("nothing was created (the reservation was aborted)" if activating
               else "the Spot keeps running")
    error = HandlerError(
        f"{what} raised {type(exc).__qualname__}: {exc}; {outcome}. Fix the code or catch the "
        "condition there",
        error_type=type(exc).__qualname__,
    )
    error.__cause__ = exc
    return error


def check_reply(spot_type: SpotType, info: HandlerInfo, result: object) -> HandlerError | None:
    """``None`` if ``result`` is what the handler declares; else the HandlerError to report."""
    expected = info.reply_type
    if (expected is None and result is None) or (
            expected is not None and type(result) is expected):
        return None
    want = "None" if expected is None else expected.__qualname__
    return HandlerError(
        f"handler {spot_type.cls.__qualname__}.{info.name} is declared to return "
        f"{want} but returned {type(result).__qualname__}; return the declared type",
        error_type="TypeError",
    )


async def run_on_close(spot_type: SpotType, instance: object | None, spot_id: str,
                       reason: CloseReason) -> None:
    """``on_close(reason)`` if the type has one and ``instance`` exists; bounded, logged."""
    hook = spot_type.hooks.on_close
    if hook is None or instance is None:
        return
    with trio.move_on_after(CLEANUP_TIMEOUT) as scope:
        try:
            await call_hook(instance, "on_close", hook.is_async, reason)
        except Exception:
            LOGGER.exception("Spot %r: on_close(%s) raised", spot_id, reason.value)
    if scope.cancelled_caught:
        LOGGER.error("Spot %r: on_close(%s) did not finish within %s s; cleanup went on "
                     "without it -- make on_close shorter", spot_id, reason.value,
                     CLEANUP_TIMEOUT)
