"""A split store: ``open_store(url, relocation=url2)``, each half in its own backend.

The Location Store comes from the first URL and the Relocation Store from the
second (spec 06: the Relocation Store "may share a Redis deployment, but not a
keyspace"); no transaction spans two backends, so ``combined`` is
:class:`SeparateSteps`. The ``store`` fixture below yields split stores over
pairs of backends -- two schemes, or one scheme with another file or key prefix --
and the combined-transaction conformance tests that hold for
:class:`SeparateSteps` are imported from ``test_combined_conformance`` to run
against them (pytest collects them here, with this module's fixtures), and so are
two ClosePlacement tests, which the split store passes to its Location Store. Every test
runs under an absolute ``trio.fail_after``; Redis halves get a fresh key prefix,
deleted afterwards, and fail (CI) or skip (locally) when Redis is absent.
"""

from __future__ import annotations

import uuid
from contextlib import AsyncExitStack

import pytest
import trio
from redis_helpers import delete_prefix, fresh_prefix, unreachable, url_with
from store_helpers import claim, ready
from test_claim_placement_conformance import (  # noqa: F401 -- collected here, on split stores
    test_close_placement_is_fenced_by_lifecycle,
    test_the_mark_survives_renew,
)
from test_combined_conformance import (  # noqa: F401 -- collected here, on split stores
    ENVELOPE,
    test_commit_ready_with_first_record_appends_and_commits,
    test_commit_ready_with_first_record_retry_separate_steps,
    test_every_backend_offers_the_combined_transactions,
    test_finish_first_record_after_release_still_cleans_up,
    test_finish_first_record_moves_cursor_removes_pointer_deletes_root,
    test_refused_commit_ready_with_first_record_separate_steps,
    test_refused_finish_first_record_separate_steps,
    test_refused_reserve_with_root_writes_nothing,
    test_reserve_with_root_stores_root_and_pointer_together,
)

from zlink_trio.core.errors import InvalidConfiguration, Unavailable
from zlink_trio.core.identity import SpotKind
from zlink_trio.store import MemoryStore, SeparateSteps, SplitStore, open_store

TIMEOUT = 10
#: (Location Store backend, Relocation Store backend).
PAIRS = [("memory", "sqlite"), ("sqlite", "redis"), ("redis", "sqlite"),
         ("sqlite", "sqlite"), ("redis", "redis")]


class Urls:
    """Fresh URLs of each kind for one test; deletes the Redis keys it handed out."""

    def __init__(self, tmp_path) -> None:
        self.tmp_path = tmp_path
        self.prefixes: list[str] = []

    def make(self, kind: str, role: str) -> str:
        if kind == "memory":  # named, so a test can open the same store again
            return f"memory://split-{role}-{uuid.uuid4().hex[:8]}"
        if kind == "sqlite":
            return f"sqlite://{self.tmp_path / role}.db?busy_timeout=1"
        prefix = fresh_prefix()
        self.prefixes.append(prefix)
        return url_with(prefix)

    async def cleanup(self) -> None:
        for prefix in self.prefixes:
            await delete_prefix(prefix)


async def _open_split(stack: AsyncExitStack, location_url: str, relocation_url: str):
    """The split store, or fail/skip when a Redis half cannot be reached."""
    problem = ""
    try:
        return await stack.enter_async_context(
            open_store(location_url, relocation=relocation_url))
    except Unavailable as error:
        problem = error.message
    unreachable(problem)
    return None


@pytest.fixture(params=PAIRS, ids=lambda p: f"{p[0]}+{p[1]}")
async def split(request, tmp_path):
    """``(store, location_url, relocation_url)`` of a split store over one pair."""
    urls = Urls(tmp_path)
    location_url = urls.make(request.param[0], "location")
    relocation_url = urls.make(request.param[1], "relocation")
    try:
        async with AsyncExitStack() as stack:
            store = await _open_split(stack, location_url, relocation_url)
            yield store, location_url, relocation_url
    finally:
        await urls.cleanup()


@pytest.fixture
def store(split):
    """The split store (overrides conftest's per-backend ``store`` in this module)."""
    return split[0]


@pytest.fixture
def combined(store):
    """The combined transactions the split store offers: always the separate steps."""
    return store.combined


async def test_a_split_store_combines_by_separate_steps(store):
    with trio.fail_after(TIMEOUT):
        await trio.lowlevel.checkpoint()
        assert isinstance(store, SplitStore)
        assert isinstance(store.combined, SeparateSteps)
        assert store.combined.location is store.location
        assert store.combined.relocation is store.relocation


async def test_each_half_keeps_its_data_in_its_own_backend(split):
    store, location_url, relocation_url = split
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        record = await ready(store, node)
        receipt = await store.relocation.put_root(ENVELOPE)
        await store.relocation.inbox_append("r-1", record.object_generation, b"first")
        # Each backend opened on its own: the root and inbox only where the Relocation
        # Store lives, the authority only where the Location Store lives.
        async with open_store(location_url) as located, open_store(relocation_url) as relocated:
            assert await located.location.find("r-1") == record
            assert await relocated.location.find("r-1") is None
            assert (await relocated.location.statistics()).claims == 0
            assert await relocated.relocation.get_root(receipt) == ENVELOPE
            assert (await located.relocation.statistics()).roots == 0
            assert (await relocated.relocation.statistics()).inboxes == 1
            assert (await located.relocation.statistics()).inboxes == 0


async def test_a_cold_activation_through_a_split_store(split):
    store, location_url, relocation_url = split
    with trio.fail_after(TIMEOUT):
        node = await claim(store)
        fence, receipt = await store.combined.reserve_with_root(
            "c-1", ENVELOPE, kind=SpotKind.INSTANCE, stable_type="counter", mesh="world",
            owner=node.owner(), now=0.0)
        ready_record, seq = await store.combined.commit_ready_with_first_record(
            fence, ENVELOPE, now=1.0)
        await store.combined.finish_first_record(
            "c-1", fence.object_generation, seq=seq,
            expected_version=ready_record.store_version, root=receipt)
        async with open_store(location_url) as located, open_store(relocation_url) as relocated:
            found = await located.location.find("c-1")
            assert (found.state, found.recovery_pointer) == (ready_record.state, None)
            assert await relocated.relocation.inbox_cursor("c-1", fence.object_generation) == 1
            assert (await relocated.relocation.statistics()).roots == 0


async def test_leaving_the_block_closes_both_halves(tmp_path):
    with trio.fail_after(TIMEOUT):
        location_url = f"sqlite://{tmp_path / 'location'}.db?busy_timeout=1"
        relocation_url = f"sqlite://{tmp_path / 'relocation'}.db?busy_timeout=1"
        async with open_store(location_url, relocation=relocation_url) as store:
            await store.relocation.put_root(b"x")
        with pytest.raises(Unavailable):
            await store.location.statistics()
        with pytest.raises(Unavailable):
            await store.relocation.statistics()


async def test_the_same_url_twice_is_one_store(tmp_path):
    with trio.fail_after(TIMEOUT):
        async with open_store("memory://once", relocation="memory://once") as store:
            assert isinstance(store, MemoryStore)
        url = f"sqlite://{tmp_path / 'one'}.db?busy_timeout=1"
        async with open_store(url, relocation=url) as store:
            assert not isinstance(store, SplitStore)
            assert not isinstance(store.combined, SeparateSteps)


@pytest.mark.parametrize(("location", "relocation"), [
    ("sqlite://{tmp}/a.db", "redis://127.0.0.1:6379/x"),
    ("sqlite://{tmp}/a.db", "postgres://h/db?prefix=Not-A-Schema"),
    ("sqlite://{tmp}/a.db", ""),
    ("sqlite://{tmp}/a.db", "memory://name/path"),
    ("redis://127.0.0.1:6379/0?colour=blue", "sqlite://{tmp}/a.db"),
    ("sqlite://{tmp}/a.db", "sqlite://host{tmp}/b.db"),
    ("nope", "sqlite://{tmp}/a.db"),
])
async def test_bad_urls_are_refused_before_anything_is_opened(tmp_path, location, relocation):
    with trio.fail_after(TIMEOUT):
        with pytest.raises(InvalidConfiguration):
            async with open_store(location.format(tmp=tmp_path),
                                  relocation=relocation.format(tmp=tmp_path)):
                pass
        assert list(tmp_path.iterdir()) == []  # no SQLite file was created


async def test_relocation_must_be_a_url():
    with trio.fail_after(TIMEOUT):
        with pytest.raises(InvalidConfiguration, match="relocation must be a store URL"):
            async with open_store("memory://", relocation=MemoryStore()):
                pass
