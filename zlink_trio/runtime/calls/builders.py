"""The builder rule shared by every call builder: each option once, awaited once.

Create / GetOrCreate and the direct-call builders are fluent calls that can be
submitted only once; setting the same option twice, or running
the terminal submit twice, is :class:`InvalidOperation`. Call builders inherit
:class:`OnceBuilder` and call :meth:`_option` in each option method and
:meth:`_submit` where the awaited operation starts.
"""

from __future__ import annotations

import functools
import warnings
from typing import TYPE_CHECKING, Any, TypeVar, cast

from zlink_trio.core.errors import InvalidOperation
from zlink_trio.runtime.options import check_timeout

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Self

__all__ = ("OnceBuilder", "TimedBuilder", "option")

F = TypeVar("F", bound="Callable[..., Any]")


def option(method: F) -> F:
    """An option method of a builder: if it raises (a refused value, an option set twice),
    the builder is spent -- the error said what was wrong, so no never-awaited warning."""
    @functools.wraps(method)
    def wrapper(self: OnceBuilder, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            self._awaited = True
            raise

    return cast("F", wrapper)


class OnceBuilder:
    """Tracks which options a call builder has set and whether it was awaited.

    A builder dropped without being awaited did nothing; like a coroutine that was never
    awaited it warns (``RuntimeWarning``) when it is collected, naming the call
    (:meth:`_describe`) -- unless one of its options was refused (:func:`option`), which
    already said so.
    """

    #: The options set so far: a shared empty set until the first one (most calls set
    #: none, and every call builds a builder).
    _set: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._awaited = False

    def __del__(self) -> None:
        if not getattr(self, "_awaited", True):  # (an __init__ that raised: no call)
            warnings.warn(f"{self._describe()} was never awaited, so it did nothing; "
                          "await it (a call runs only when awaited)",
                          RuntimeWarning, stacklevel=2)

    def _describe(self) -> str:
        """What the call is, for the never-awaited warning (builders override it)."""
        return f"a {type(self).__name__}"

    def _option(self, name: str) -> None:
        """Record option ``name``; InvalidOperation if set before or after the await."""
        if self._awaited:
            raise InvalidOperation(f".{name}() after the call was awaited; build a new call")
        if name in self._set:
            raise InvalidOperation(f".{name}() was already set on this call; set it once")
        self._set = self._set | {name}

    def _submit(self) -> None:
        """Mark the call submitted; InvalidOperation if it already was."""
        if self._awaited:
            raise InvalidOperation("this call was already awaited; build a new call")
        self._awaited = True


class TimedBuilder(OnceBuilder):
    """A builder with the ``.timeout(seconds)`` option every awaited operation takes: its
    one end-to-end deadline, fixed when it is awaited (``None``: the node's
    ``default_timeout``)."""

    _timeout: float | None = None

    @option
    def timeout(self, seconds: float) -> Self:
        """The one end-to-end deadline, ``seconds`` from when the call is awaited."""
        self._option("timeout")
        self._timeout = check_timeout(seconds)
        return self
