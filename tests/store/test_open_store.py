"""``open_store`` URL dispatch and memory-store sharing."""

from __future__ import annotations

import pytest
import trio

from zlink_trio.core.errors import InvalidConfiguration
from zlink_trio.store import MemoryStore, open_store

TIMEOUT = 5


async def test_memory_url_opens_a_fresh_private_store():
    with trio.fail_after(TIMEOUT):
        async with open_store("memory://") as a, open_store("memory://") as b:
            await a.relocation.put_root(b"x")
            assert (await b.relocation.statistics()).roots == 0


async def test_named_memory_store_is_shared_while_open():
    with trio.fail_after(TIMEOUT):
        async with open_store("memory://world") as a:
            async with open_store("memory://world") as b:
                assert a is b
            async with open_store("memory://world") as c:
                assert c is a
        async with open_store("memory://world") as d:
            assert d is not a  # forgotten after the last opener left


async def test_memory_store_instance_is_passed_through():
    with trio.fail_after(TIMEOUT):
        shared = MemoryStore()
        async with open_store(shared) as a:
            assert a is shared


@pytest.mark.parametrize("url", ["mysql://x", "memory", "", "http://h/"])
async def test_unknown_scheme_lists_the_schemes(url):
    with pytest.raises(InvalidConfiguration, match=r"memory://, sqlite://, redis://"):
        async with open_store(url):
            pass


@pytest.mark.parametrize("url", [
    "redis://127.0.0.1:6379/x", "redis://127.0.0.1:6379/0?prefix={a}",
    "redis://127.0.0.1:6379/0?timeout=0", "redis://127.0.0.1:6379/0?colour=blue",
])
async def test_malformed_redis_url_is_refused_before_connecting(url):
    with pytest.raises(InvalidConfiguration):
        async with open_store(url):
            pass


@pytest.mark.parametrize("url", [
    "postgresql://u@127.0.0.1/db?prefix=Bad-Name", "postgresql://u@127.0.0.1/db?prefix=1x",
    "postgresql://u@127.0.0.1/db?timeout=0", "postgresql://u@127.0.0.1/db?timeout=soon",
    "postgresql://u@127.0.0.1/db?connections=0", "postgres://u@127.0.0.1/db#frag",
])
async def test_malformed_postgres_url_is_refused_before_connecting(url):
    with pytest.raises(InvalidConfiguration):
        async with open_store(url):
            pass


async def test_malformed_memory_url_is_refused():
    with pytest.raises(InvalidConfiguration):
        async with open_store("memory://name/path"):
            pass
