"""Who may be authenticating: ``max_unauthenticated`` slots shared fairly between sources.

Theory of operation
-------------------
Every accepted connection must hold a slot from the moment it is accepted
until its handshake ends. While slots are free, anyone gets one. When they
are all taken, a newcomer from source *S* takes the slot of the **oldest
pending handshake of the source holding the most slots**, provided that
source holds at least two more than *S* (so that afterwards it still holds at
least as many as *S*: an eviction never just swaps two sources); otherwise
the newcomer is closed unread. A handshake stops being pending -- evictable --
once its HELLO's MAC checked out (the peer knows the secret; only the store
check is left); a source whose handshakes are all past that point is passed
over for the next largest.

So one source can fill every slot only while nobody else wants one, and
whoever arrives then gets in at once (max-min fairness): a source idling on
16 connections no longer locks every new peer out until its handshakes time
out, and it cannot win its slots back by reconnecting, because it already
holds the most. A source holding one slot is never evicted. Peers that share
one address (every node of a loopback test cluster is ``127.0.0.1``; nodes
behind one NAT) are never refused for sharing it: there is no cap per
source, only eviction from the largest. A source is an IPv4 address, or the
/64 prefix of an IPv6 one (a single host usually owns a whole /64).

:class:`HandshakeSlots` holds the rule and no I/O; the transport cancels an
evicted handshake through its :class:`Slot`'s cancel scope.
"""

from __future__ import annotations

import ipaddress
from typing import Final

import trio

__all__ = ("HandshakeSlots", "Slot", "source_of")


class Slot:
    """One connection's place among the authenticating ones."""

    __slots__ = ("cancel_scope", "evicted", "seq", "source", "verified")

    def __init__(self, source: str, seq: int) -> None:
        self.source: Final = source
        #: Admission order: the smallest is the oldest.
        self.seq: Final = seq
        #: Cancelled when the slot is evicted; the handshake runs inside it.
        self.cancel_scope = trio.CancelScope()
        self.evicted = False
        #: The peer's MAC checked out: no longer evictable.
        self.verified = False

    def verify(self) -> None:
        """Mark the handshake as past the MAC check (it can no longer be evicted)."""
        self.verified = True


class HandshakeSlots:
    """``capacity`` handshake slots with eviction from the source holding the most."""

    __slots__ = ("_by_source", "_capacity", "_next", "_slots")

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity
        self._slots: dict[int, Slot] = {}
        self._by_source: dict[str, int] = {}
        self._next = 0

    def __len__(self) -> int:
        return len(self._slots)

    def held_by(self, source: str) -> int:
        """How many slots ``source`` holds now."""
        return self._by_source.get(source, 0)

    def admit(self, source: str) -> tuple[Slot | None, Slot | None]:
        """A slot for a newcomer from ``source``, and the slot evicted for it.

        ``(None, None)``: every slot is taken and no source with a pending
        handshake holds two more than ``source`` does: refuse.
        The evicted slot, if any, is already released and marked ``evicted``;
        the caller cancels its scope.
        """
        victim = None
        if len(self._slots) >= self._capacity:
            victim = self._victim(self.held_by(source))
            if victim is None:
                return None, None
            victim.evicted = True
            self.release(victim)
        slot = Slot(source, self._next)
        self._next += 1
        self._slots[slot.seq] = slot
        self._by_source[source] = self.held_by(source) + 1
        return slot, victim

    def release(self, slot: Slot) -> None:
        """Give ``slot`` back (idempotent)."""
        if self._slots.pop(slot.seq, None) is None:
            return
        left = self._by_source[slot.source] - 1
        if left:
            self._by_source[slot.source] = left
        else:
            del self._by_source[slot.source]

    def _victim(self, newcomer_holds: int) -> Slot | None:
        # Dicts keep insertion order, so the first match of a source is its oldest.
        best: Slot | None = None
        best_holds = newcomer_holds + 1  # a victim's source must hold more than this
        for slot in self._slots.values():
            holds = self._by_source[slot.source]
            if not slot.verified and holds > best_holds:
                best, best_holds = slot, holds
        return best


def source_of(stream: trio.abc.Stream) -> str:
    """The source a connection's slots are counted under ("?" when unknown)."""
    while isinstance(stream, trio.SSLStream):
        stream = stream.transport_stream
    if not isinstance(stream, trio.SocketStream):
        return "?"
    try:
        host = stream.socket.getpeername()[0]
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except (OSError, ValueError, IndexError, TypeError, AttributeError):
        return "?"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)
