"""Location Store conformance: every authority state change is a step of the SpotAuthority chart.

For every state of the chart (a record brought there through the store) and every store
transaction that is a chart event, on every backend: when the chart defines the step, the
transaction takes the record to the chart's target (``missing``: the record is gone);
when it does not, the transaction is refused or writes nothing (an idempotent repeat).

Then, on the backends that run ``store.rules`` (memory and SQLite), each defined step is
dropped from the compiled chart in turn: the transaction that would take it is refused
with :class:`InvalidOperation` and writes nothing -- the rules take their transitions
from the chart, not from a state they spell themselves.
"""

from __future__ import annotations

import pytest
import trio
from store_helpers import LEASE, claim, reserve

from statecharts import SpotAuthority, compile
from zlink_trio.core.errors import InvalidOperation, ZLinkError
from zlink_trio.core.records import AuthorityState
from zlink_trio.store import open_store
from zlink_trio.store.rules import authority

TIMEOUT = 60
LATE = LEASE + 1.0  # every lease of claims made at 0 has expired
CHART = compile(SpotAuthority)
#: Chart events no store transaction of its own takes: idle eviction is BeginClose's
#: transaction (the event only names the reason), stepped as ``begin_close``.
NO_TRANSACTION = {"begin_idle_eviction"}
EVENTS = [e for e in CHART.event_order if e not in NO_TRANSACTION]
#: How the store brings a record to each state: the chart events taken from ``missing``.
PATHS = {
    "missing": ("reserve", "abort_creating"),  # an incarnation that ended: its fences remain
    "creating": ("reserve",),
    "ready": ("reserve", "commit_ready"),
    "closing": ("reserve", "commit_ready", "begin_close"),
    "relocating": ("reserve", "commit_ready", "begin_relocation"),
    "sealed": ("reserve", "commit_ready", "begin_relocation", "seal"),
    "relay_ready": ("reserve", "commit_ready", "begin_relocation", "seal",
                    "accept_relay_ready"),
}


class Case:
    """One Spot ID on its way through the chart: its reservation fence and last record."""

    def __init__(self, store, spot_id, a, b) -> None:
        self.store, self.spot_id, self.a, self.b = store, spot_id, a, b
        self.fence = None
        self.record = None

    async def take(self, event):
        """Run the store transaction that is ``event`` (the chart's names)."""
        loc, record = self.store.location, self.record
        if event == "reserve":
            self.fence = await reserve(self.store, self.a, self.spot_id)
        elif event == "commit_ready":
            await loc.commit_ready(self.fence, now=0.0)
        elif event == "abort_creating":
            await loc.abort_creating(self.fence)
        elif event == "begin_close":
            await loc.begin_close(self.spot_id, object_generation=record.object_generation,
                                  owner=record.owner, now=0.0)
        elif event == "release":
            await loc.release(record.fence())
        elif event == "begin_relocation":
            await loc.begin_relocation(record.fence(), target=self.b.owner(), now=0.0)
        elif event == "seal":
            await loc.seal_relocation(record.fence(), now=0.0)
        elif event == "accept_relay_ready":
            await loc.accept_relay_ready(record.fence(), target=self.b.owner(), now=0.0)
        elif event == "commit_relocation":
            await loc.commit_relocation(record.fence(), now=0.0)
        elif event == "abort_relocation":
            await loc.abort_relocation(record.fence())
        elif event == "release_relay_ready":  # the target's lease is over at LATE
            await loc.release_relay_ready(record.fence(), target=self.b.owner(), now=LATE)
        elif event == "release_expired":
            await loc.release_expired(self.spot_id, object_generation=record.object_generation,
                                      owner_generation=record.owner_generation, now=LATE)
        else:  # pragma: no cover - a new chart event needs its transaction here
            raise AssertionError(f"no store transaction for chart event {event!r}")
        self.record = await loc.find(self.spot_id) or self.record

    async def bring(self, state):
        for event in PATHS[state]:
            await self.take(event)

    async def state(self):
        found = await self.store.location.find(self.spot_id)
        return "missing" if found is None else found.state.value


async def _nodes(store):
    return (await claim(store, "node-a", capacity=200), await claim(store, "node-b",
                                                                      capacity=200))


def test_every_state_has_a_path_and_every_event_a_transaction():
    assert set(PATHS) == CHART.states
    for state, path in PATHS.items():
        reached = CHART.initial
        for event in path:
            reached = CHART.step(reached, event)
        assert reached == state
    assert set(EVENTS) | NO_TRANSACTION == CHART.events


async def test_every_transaction_takes_the_charts_step_and_no_other(store):
    with trio.fail_after(TIMEOUT):
        a, b = await _nodes(store)
        for state in CHART.state_order:
            for event in EVENTS:
                case = Case(store, f"{state}.{event}", a, b)
                await case.bring(state)
                before = await store.location.find(case.spot_id)
                try:
                    await case.take(event)
                except ZLinkError as error:
                    refused = error
                else:
                    refused = None
                after = await store.location.find(case.spot_id)
                where = f"{event} from {state}"
                if CHART.allows(state, event):
                    assert refused is None, f"{where}: {refused!r}"
                    assert await case.state() == CHART.step(state, event), where
                else:
                    assert refused is not None or after == before, where


@pytest.fixture(params=["memory://", "sqlite://?dispatch=inline", "sqlite://?dispatch=thread"])
async def rules_store(request, tmp_path):
    """A backend that runs ``store.rules`` in Python: memory and SQLite."""
    url = request.param
    if url.startswith("sqlite://?"):
        url = f"sqlite://{tmp_path / 'store.db'}?busy_timeout=1&{url.partition('?')[2]}"
    async with open_store(url) as opened:
        yield opened


async def test_a_transition_the_chart_does_not_define_is_refused(rules_store, monkeypatch):
    store = rules_store
    with trio.fail_after(TIMEOUT):
        a, b = await _nodes(store)
        for state, event in sorted(CHART.transitions):
            if event in NO_TRANSACTION:
                continue
            case = Case(store, f"{state}.{event}", a, b)
            await case.bring(state)
            before = (await store.location.find(case.spot_id),
                      await store.location.statistics())
            with monkeypatch.context() as patch:
                dropped = {s: {e: t for e, t in steps.items() if (s, e) != (state, event)}
                           for s, steps in authority._STEPS.items()}
                patch.setattr(authority, "_STEPS", dropped)
                with pytest.raises(InvalidOperation, match="SpotAuthority chart has no"):
                    await case.take(event)
            after = (await store.location.find(case.spot_id),
                     await store.location.statistics())
            assert after == before, f"{event} from {state} wrote"
            # The whole chart back, the same transaction takes the step.
            await case.take(event)
            assert await case.state() == CHART.step(state, event)


def test_the_rules_step_is_the_compiled_chart():
    for state in CHART.state_order:
        for event in CHART.event_order:
            stored = AuthorityState(state)
            if CHART.allows(state, event):
                assert authority.step(stored, event) == CHART.step(state, event)
            else:
                with pytest.raises(InvalidOperation, match=f"no transition '{event}'"):
                    authority.step(stored, event)


def test_the_rules_step_to_missing_ends_only_the_record():
    for state, event in sorted(CHART.transitions):
        stored = AuthorityState(state)
        if CHART.step(state, event) == "missing":
            assert authority.step_to_missing(stored, event) is None
        else:  # a step to a stored state: the record stays, so nothing may delete it
            with pytest.raises(InvalidOperation, match="not to missing"):
                authority.step_to_missing(stored, event)
