"""The builder rule shared by every call builder: each option once, awaited once.

Spec 06 §3: Create / GetOrCreate and the direct-call builders are fluent calls
that "can only be submitted once"; setting the same option twice, or running
the terminal submit twice, is :class:`InvalidOperation`. Call builders inherit
:class:`OnceBuilder` and call :meth:`_option` in each option method and
:meth:`_submit` where the awaited operation starts.
"""

from __future__ import annotations

from zlink_trio.core.errors import InvalidOperation

__all__ = ("OnceBuilder",)


class OnceBuilder:
    """Tracks which options a call builder has set and whether it was awaited."""

    def __init__(self) -> None:
        self._set: set[str] = set()
        self._awaited = False

    def _option(self, name: str) -> None:
        """Record option ``name``; InvalidOperation if set before or after the await."""
        if self._awaited:
            raise InvalidOperation(f".{name}() after the call was awaited; build a new call")
        if name in self._set:
            raise InvalidOperation(f".{name}() was already set on this call; set it once")
        self._set.add(name)

    def _submit(self) -> None:
        """Mark the call submitted; InvalidOperation if it already was."""
        if self._awaited:
            raise InvalidOperation("this call was already awaited; build a new call")
        self._awaited = True
