"""``lowlevel.pooled_random``: pieces handed out once each, never repeated by a forked child."""

from __future__ import annotations

import os
import sys

import pytest

from zlink_trio.lowlevel.pooled_random import READ_BYTES, SYSTEM, PooledRandom


def test_pieces_have_the_asked_size_and_are_never_handed_out_twice() -> None:
    pool = PooledRandom()
    keys = [pool.take(4) for _ in range(3 * READ_BYTES // 4)]
    assert {len(key) for key in keys} == {4}
    ids = [pool.take(16) for _ in range(1000)]
    assert len(set(ids)) == len(ids)  # 128 random bits: a repeat is a bug, not luck
    numbers = [pool.number64() for _ in range(2000)]
    assert len(set(numbers)) == len(numbers)
    assert all(0 < n < 2**64 for n in numbers)


def test_a_piece_larger_than_a_read_comes_straight_from_the_system() -> None:
    assert len(PooledRandom().take(READ_BYTES)) == READ_BYTES


@pytest.mark.skipif(sys.platform == "win32", reason="fork is POSIX")
def test_a_forked_child_does_not_repeat_what_its_parent_draws_next() -> None:
    SYSTEM.take(16), SYSTEM.number64(), SYSTEM.take(4)  # the pools hold unread pieces now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report what it draws, then leave at once
        try:
            os.close(read)
            os.write(write, SYSTEM.take(16) + SYSTEM.number64().to_bytes(8) + SYSTEM.take(4))
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        child = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    parent = SYSTEM.take(16) + SYSTEM.number64().to_bytes(8) + SYSTEM.take(4)
    assert len(child) == len(parent) == 28
    assert child[:16] != parent[:16]
    assert child[16:24] != parent[16:24]
    assert child[24:] != parent[24:]
