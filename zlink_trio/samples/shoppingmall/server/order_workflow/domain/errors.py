"""The two ways the order rules refuse: a stream they cannot fold, a command they do not take.

Plain exceptions: the domain knows nothing of the framework, so the
application maps them at its edge (a corrupt stream is a fault to report, an
invalid command the caller's error to return).
"""

from __future__ import annotations

__all__ = ("CorruptStream", "InvalidCommand", "OrderRuleError")


class OrderRuleError(Exception):
    """Root of the order rules' refusals."""


class CorruptStream(OrderRuleError):
    """Raised by the fold when the stream is not a prefix of one of the three event orders.

    A version gap, an event of another order, an event the current phase
    cannot follow with (a payment before a reservation, anything after a
    terminal event). Nothing is decided from such a stream: replaying it again
    gives the same error, so it is a fault to report, not to retry.
    """


class InvalidCommand(OrderRuleError):
    """Raised when a command or a step result does not fit the order as folded.

    A start whose lines are empty or whose amount is negative, a step that is
    not the one the current fold asks for (a stale decision), a step recorded
    without its external module's result. Nothing is recorded.
    """
