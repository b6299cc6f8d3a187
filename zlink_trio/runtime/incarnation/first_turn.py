"""The restored first record of a cold activation on its host: its turn's cleanup.

Theory of operation
-------------------
A cold activation's host opens with the durable first record at the head of its
application lane (``Host.open``).  After that record's turn, :func:`first_handled`
records its completion (cursor, recovery pointer, root: 06 §4.1 step 12,
:func:`~zlink_trio.runtime.coordinators.first_record.record_first_completion`) --
unless the node lost its lease, which leaves the records as evidence -- and wakes
whoever waits for it (:func:`wait_first_record`: a relocation must not move a Spot
whose first record is not settled).  On a store whose transactions never suspend
(``memory://``) it ends without suspending.

Most cold activations have nobody waiting: the pending cleanup is then marked by
:data:`NO_WAITER`, and only the first waiter builds an Event.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, Protocol

import trio

from zlink_trio.runtime.coordinators import crash_points
from zlink_trio.runtime.coordinators.first_record import record_first_completion
from zlink_trio.runtime.incarnation.handler_turn import TurnHost

if TYPE_CHECKING:
    from zlink_trio.runtime.coordinators.first_record import FirstRecord

__all__ = ("NO_WAITER", "FirstRecordHost", "NoWaiter", "first_handled", "wait_first_record")


class NoWaiter:
    """``Host.first_cleanup`` while the first record's cleanup is pending and nobody
    waits for it -- most cold activations: no Event is built, and ``set`` wakes nobody.
    The first :func:`wait_first_record` replaces it with an Event."""

    __slots__ = ()

    def set(self) -> None:
        """Nobody to wake."""


NO_WAITER: Final = NoWaiter()


class FirstRecordHost(TurnHost, Protocol):
    """What the first record's cleanup reads and changes of its host (``.host.Host``)."""

    ownership_lost: bool
    first_record: FirstRecord | None
    #: ``None``: no cleanup pending; else what to wake when it ran.
    first_cleanup: trio.Event | NoWaiter | None


async def first_handled(host: FirstRecordHost, first: FirstRecord) -> None:
    """After the restored first record's turn: record its completion (06 §4.1)."""
    if host.ownership_lost:
        return
    if crash_points.ARMED:
        crash_points.point("cold", "after_first_handler_before_completion", host.rt.node_id)
    await record_first_completion(host.rt, host.spot_id, host.generation, first)
    _settled(host, first)


def _settled(host: FirstRecordHost, first: FirstRecord) -> None:
    if first.done and host.first_record is first:
        host.first_record = None  # nothing left to clean up at close (``drop_recovery``)
    if host.first_cleanup is not None:
        host.first_cleanup.set()
        host.first_cleanup = None


async def wait_first_record(host: FirstRecordHost) -> None:
    """Wait until the first record's cleanup ran (done or failed); the caller bounds it."""
    cleanup = host.first_cleanup
    if isinstance(cleanup, NoWaiter):
        cleanup = host.first_cleanup = trio.Event()
    if cleanup is not None:
        await cleanup.wait()
