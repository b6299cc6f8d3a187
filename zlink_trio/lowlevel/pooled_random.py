"""Random values from ``os.urandom``, read many per system call, never repeated by a fork.

Theory of operation
-------------------
The runtime draws random values on hot paths: a uuid4 operation ID per cold
activation, a 64-bit wire operation number per remote call without one, a 4-byte
masking key per websocket frame a dialling side sends. One ``os.urandom`` call per
value would be a system call each; :class:`PooledRandom` reads
:data:`READ_BYTES` bytes at once and hands out pieces of them, each piece once.

Two rules make the pool safe to share:

* **Threads.** Pieces of one size wait in a list and are taken with ``list.pop``,
  which is atomic, so two threads never get the same piece.
* **fork.** A child process starts with a copy of its parent's memory, pool
  included; drawing from it would repeat the values the parent draws next (two
  processes with the same operation IDs and masking keys). :data:`SYSTEM` is
  emptied in the child by ``os.register_at_fork``, so the child reads fresh bytes.

Nodes given an injected ``random.Random`` (tests) draw from it instead; this
module is only the system's randomness.
"""

from __future__ import annotations

import os
from typing import Final

__all__ = ("READ_BYTES", "SYSTEM", "PooledRandom")

#: Bytes read from the system per refill of one piece size.
READ_BYTES: Final = 4096


class PooledRandom:
    """Pieces of ``os.urandom`` reads, handed out once each (see the module docstring)."""

    __slots__ = ("_numbers", "_pieces")

    def __init__(self) -> None:
        #: Per piece size, the pieces not handed out yet.
        self._pieces: dict[int, list[bytes]] = {}
        self._numbers: list[int] = []

    def take(self, size: int) -> bytes:
        """``size`` random bytes that this pool never hands out again."""
        pieces = self._pieces.get(size)
        if pieces is None:
            pieces = self._pieces.setdefault(size, [])
        try:
            return pieces.pop()
        except IndexError:
            if size * 2 > READ_BYTES:
                return os.urandom(size)
            raw = os.urandom(READ_BYTES - READ_BYTES % size)
            pieces.extend(raw[i:i + size] for i in range(size, len(raw), size))
            return raw[:size]

    def number64(self) -> int:
        """A random integer in ``1 .. 2**64 - 1`` (zero, one chance in 2**64, becomes 1)."""
        numbers = self._numbers
        try:
            return numbers.pop()
        except IndexError:
            raw = os.urandom(READ_BYTES)
            numbers.extend(int.from_bytes(raw[i:i + 8]) or 1 for i in range(8, READ_BYTES, 8))
            return int.from_bytes(raw[:8]) or 1

    def forget(self) -> None:
        """Drop every piece not handed out yet (in a forked child: the parent's)."""
        self._pieces.clear()
        self._numbers.clear()


#: The process's pool of the system's randomness.
SYSTEM: Final = PooledRandom()
os.register_at_fork(after_in_child=SYSTEM.forget)
