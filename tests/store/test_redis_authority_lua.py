"""The Redis scripts' SpotAuthority chart: generated from the compiled chart, never spelled.

``store.redis.lua.authority`` writes the chart as Lua (state and event names, tags, the
step table) and every script of both Redis backends starts with it. These tests are its
drift check: the fragment is the one built from the chart, every script carries it and
names no state by a literal of its own, and on a real Redis its ``step`` answers every
``(state, event)`` exactly as the compiled chart does (``UNDEFINED`` where the chart has
no transition, which ``codec.raise_status`` raises as :class:`InvalidOperation`).
"""

from __future__ import annotations

import re

import pytest
import trio
from redis_helpers import raw_client, redis_test_store

from statecharts import SpotAuthority, compile
from zlink_trio.core.errors import InvalidOperation
from zlink_trio.store.redis.codec import raise_status
from zlink_trio.store.redis.lua import SCRIPTS
from zlink_trio.store.redis.lua.authority import AUTHORITY_LUA, authority_lua
from zlink_trio.store.redis_cluster.lua import BUCKET_SCRIPTS, NODE_SCRIPTS
from zlink_trio.store.redis_cluster.sweep import LISTING, STATISTICS, TOTALS

TIMEOUT = 20
CHART = compile(SpotAuthority)
#: A state or event id of the chart as a Lua string literal.
LITERAL = re.compile("'({})'".format("|".join(sorted(CHART.states | CHART.events))))


def test_the_fragment_is_built_from_the_compiled_chart():
    assert authority_lua(CHART) == AUTHORITY_LUA
    for state in CHART.states:
        assert f"local ST_{state.upper()} = '{state}'\n" in AUTHORITY_LUA
    for event in CHART.events:
        assert f"local EV_{event.upper()} = '{event}'\n" in AUTHORITY_LUA


@pytest.mark.parametrize("family", ["redis", "redis_cluster_bucket", "redis_cluster_sweep"])
def test_every_script_starts_from_the_chart_and_spells_no_state(family):
    scripts = {"redis": SCRIPTS, "redis_cluster_bucket": BUCKET_SCRIPTS,
               "redis_cluster_sweep": {"statistics": STATISTICS, "totals": TOTALS}}[family]
    for name, source in scripts.items():
        assert source.count(AUTHORITY_LUA) == 1, name
        found = LITERAL.findall(source.replace(AUTHORITY_LUA, ""))
        assert not found, f"script {name} spells {found}: use the ST_/EV_ names"


def test_node_scripts_and_the_listing_never_see_a_record_state():
    for name, source in {**NODE_SCRIPTS, "listing": LISTING}.items():
        assert not LITERAL.findall(source), name


async def test_lua_step_is_the_charts_step():
    body = ("local to, err = step(ARGV[1], ARGV[2])\n"
            "if err then return err end\n"
            "return {'OK', to}\n")
    missing = ("local err = step_to_missing(ARGV[1], ARGV[2])\n"
               "if err then return err end\n"
               "return {'OK'}\n")
    with trio.fail_after(TIMEOUT):
        async with redis_test_store(), raw_client() as client:
            for state in CHART.state_order:
                for event in CHART.event_order:
                    reply = await client.command(["EVAL", AUTHORITY_LUA + body, 0, state, event])
                    ends = await client.command(["EVAL", AUTHORITY_LUA + missing, 0, state, event])
                    where = f"{event} from {state}"
                    if CHART.allows(state, event):
                        target = CHART.step(state, event)
                        assert reply == [b"OK", target.encode()], where
                        assert (ends == [b"OK"]) == (target == "missing"), where
                    else:
                        assert reply == [b"UNDEFINED", state.encode(), event.encode()], where
                        with pytest.raises(InvalidOperation, match="has no transition"):
                            raise_status(reply, where)
                        assert ends[0] == b"UNDEFINED", where
