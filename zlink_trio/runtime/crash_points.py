"""Crash hooks: ``ZLINK_CRASH_AT=<step>`` SIGKILLs the process; :func:`arm` is the API.

Theory of operation
-------------------
The environment variable is read once, at import. When it is unset (production)
:data:`ARMED` is ``False`` and every call site is one module-attribute truth test:
``if crash_points.ARMED: crash_points.point("cold", "after_reserve", rt.node_id)``.
When it names a step, the process kills itself with SIGKILL at that step -- no ``finally`` block, no
atexit handler, no flush runs, exactly like a power cut of the process (the store
keeps only what it committed).  In one process, :func:`arm` installs a :data:`HOOK`
that every step calls with the NodeId that reached it (``zlink_trio.testing``'s
``Faults.crash_at`` kills that node there); every call site passes ``rt.node_id``.

The value is either a bare step (fires in whichever flow reaches it first) or
``<flow>:<step>`` with flow ``cold`` (cold activation) or ``create`` (User Spot
creation). The steps:

=========================================  ====  ======  ================================
step                                       cold  create  where
=========================================  ====  ======  ================================
``after_reserve``                           x     x      Reserve committed (Creating)
``in_factory``                              x     x      the Spot class was constructed,
                                                         hooks not run
``after_factory_before_commit``             x     x      factory + hooks done (cold: first
                                                         inbox record appended), no Commit
``after_ready_before_restore``              x            CommitReady done, the first record
                                                         is not on the local queue
``after_first_handler_before_completion``   x            the first handler returned, its
                                                         completion not recorded
=========================================  ====  ======  ================================

A planned relocation (flow ``relocation``) has steps on both nodes:

=====================================  ======  =============================================
step                                   node    where
=====================================  ======  =============================================
``before_seal``                        source  BeginRelocation done (Relocating), not sealed
``sealed``                             source  sealed in the store and the host, no capture
``captured``                           source  the payload root stored, command 60 not sent
``target_reserved``                    target  the Sealed record checked, no shell built
``restored``                           target  the shell built and restored, no relay-ready
``relay_ready``                        target  relay-ready recorded, not committed
``target_committed``                   target  the authority committed, the host not open
``committed``                          source  the target's answer in, no Message Follow
                                               route, the source not disposed
``relaying``                           source  disposed, the hold not relayed yet
=====================================  ======  =============================================

Cold activation writes through the store's combined transactions (``store.combined``:
one transaction each on every built-in backend): the root and Reserve, the first inbox
record and CommitReady, and the cursor, pointer and root cleanup are one call each, so
no step falls inside a group, and the cold ``after_factory_before_commit`` falls before
the first inbox record is written.
"""

from __future__ import annotations

import os
import signal
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ("ARMED", "COLD_STEPS", "CREATE_STEPS", "HOOK", "RELOCATION_STEPS", "CrashPointReached",
           "arm", "point")

COLD_STEPS: Final = frozenset({
    "after_reserve", "in_factory", "after_factory_before_commit",
    "after_ready_before_restore", "after_first_handler_before_completion",
})
CREATE_STEPS: Final = frozenset({"after_reserve", "in_factory", "after_factory_before_commit"})
RELOCATION_STEPS: Final = frozenset({
    "before_seal", "sealed", "captured", "target_reserved", "restored", "relay_ready",
    "target_committed", "committed", "relaying",
})

_AT: Final = os.environ.get("ZLINK_CRASH_AT") or None


class CrashPointReached(Exception):
    """What a :data:`HOOK` raises to stop the task at its step as a crash would.

    Code that cleans up after a fault of its own (a relocation that aborts its move and
    serves again) lets it pass untouched: a crashed process cleans nothing up.
    ``zlink_trio.testing``'s ``SimulatedCrash`` is one.
    """


#: Called with ``(flow, step, node_id)`` at every step while set (the in-process API the
#: test kit's ``Faults.crash_at`` installs through :func:`arm`); it may raise.
HOOK: Callable[[str, str, str], None] | None = None
#: Whether a crash step is configured (the variable, read once at import, or a :data:`HOOK`).
ARMED: bool = _AT is not None


def arm(hook: Callable[[str, str, str], None] | None) -> None:
    """Install ``hook`` as :data:`HOOK` (``None`` removes it); keeps :data:`ARMED` right."""
    global HOOK, ARMED
    HOOK = hook
    ARMED = _AT is not None or hook is not None


def point(flow: str, step: str, node_id: str) -> None:
    """SIGKILL this process if ``ZLINK_CRASH_AT`` names ``step`` (or ``flow:step``); then
    call :data:`HOOK`, if any, with the step and the node that reached it."""
    if _AT is not None and _AT in (step, f"{flow}:{step}"):
        os.kill(os.getpid(), signal.SIGKILL)
    if HOOK is not None:
        HOOK(flow, step, node_id)
