"""Relocation between node processes with listening links (issue #11): the spec items.

One test per item of 06 §10, 09 §8 and 06 §9 that a relocation decides, named after it
(the item's sentence is the docstring), each on a SQLite file and on Redis with one
node process per node (``mesh_node_worker.py``), and on ``memory://`` with the nodes in
the test's process, still talking over real loopback links (``relocation_url``,
``mesh_node_procs.open_mesh``).

The nodes: ``s`` takes every new Spot (the only placement weight), ``t`` is the target
every move names, ``c`` a third node that only calls. The Spot is a ``MeshMover``
(``PreserveStateWith``): every ``Step(seq)`` it handles is logged with the handling node
(``handled_steps``), and its reply carries the seq, how many steps the Spot has handled
(the moved state included) and the node that handled it.

Nothing sleeps to wait for something. A move is held at a chosen moment by a gate in
the source process: a ``Hold`` turn that runs at the seal keeps the Spot sealed (the
move waits for the running turn), and a gate in front of the store's SealRelocation
keeps it Relocating, not yet sealed. The tests learn that a move sealed from the
source's chart trace (``wait_step``) and that a message reached the relocation hold
from the hold itself (``wait_held``); every wait is bounded.
"""

from __future__ import annotations

import collections

import trio
from mesh_node_procs import handled_operations, handled_steps, open_mesh

from zlink_trio.core.records import AuthorityState
from zlink_trio.store import open_store

TEST_TIMEOUT = 40
SPOT = "mover-1"
#: The source's application lane takes this many items (queued + running) ...
LANE = 4
#: ... and this many messages wait in its relocation hold at once.
HELD = 3 * LANE

NODES = [{"name": "s", "lane_items": LANE},
         {"name": "t", "weight": 0},
         {"name": "c", "weight": 0}]


def handled_at(tmp_path) -> dict[int, list[str]]:
    """seq -> the nodes that handled it (a list: a seq handled twice shows up twice)."""
    by_seq: dict[int, list[str]] = collections.defaultdict(list)
    for spot_id, seq, node in handled_steps(tmp_path):
        assert spot_id == SPOT
        by_seq[seq].append(node)
    return dict(by_seq)


async def sealed_with_running_turn(s, c, relocate_tag: str, seal_count: int) -> None:
    """``c`` sends a ``Hold`` that blocks at ``s``; ``s`` starts moving the Spot to ``t``
    and seals it (the move then waits for the held turn until ``gate_open``)."""
    assert (await s.call(op="gate_close"))["ok"]
    await c.call(op="spawn", tag=f"hold-{relocate_tag}", cmd={"op": "hold", "spot": SPOT})
    await s.call(op="wait_holding")
    await s.call(op="spawn", tag=relocate_tag,
                 cmd={"op": "relocate", "spot": SPOT, "to": "t", "timeout": 20})
    await s.call(op="wait_step", chart="PlannedRelocation", event="seal", count=seal_count)


async def test_message_follow_only_uses_a_committed_route_has_no_relocation_bound_and_preserves_operation_identity(  # noqa: E501
        relocation_url, tmp_path):
    """06 §10: Message Follow only uses a committed route. Its relay queue has no
    relocation-specific item-count or byte bound, and it preserves operation identity.

    * Before a commit nothing follows: a move that aborts (the target's restore fails)
      hands what its hold took in back to the source, which runs it -- nothing went to
      the target -- and ``c``'s next call is still handled at the source.
    * While a move is sealed, ``c`` sends ``3 * LANE`` requests to the source, whose
      application lane takes ``LANE`` items: the hold takes every one in (none is
      refused, none runs anywhere, none is sent on) and, after the commit, relays them
      all to the target, which runs each once and answers ``c`` -- the original caller,
      through the source -- with its own seq: reply route preserved.
    * After the commit ``c``'s cached route still names the source: the source sends
      the call on along its committed route and the target handles it (never the
      source), with the state the Spot had.
    * Operation identity: the turn that ran each of ``c``'s requests -- at the source
      after the abort, at the target after the hold's relay or a follow -- carried the
      operation ID ``c``'s own frame did (each node logs the ID of every turn it ran).
    """
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(relocation_url) as store, open_mesh(
                relocation_url, tmp_path, NODES) as (s, t, c):
            first = await c.call(op="step", spot=SPOT, seq=1, intent=True)
            assert (first["ok"], first["node"]) == (True, "s"), first  # c's route: s

            # A move that aborts before relay-ready: nothing follows.
            await t.call(op="knob", name="fail_restore", value=True)
            await sealed_with_running_turn(s, c, "abort", seal_count=1)
            await c.call(op="spawn", tag="during-abort",
                         cmd={"op": "steps", "spot": SPOT, "seqs": [2, 3, 4]})
            await s.call(op="wait_held", spot=SPOT, count=3)
            await s.call(op="gate_open")
            aborted = await s.call(op="join", tag="abort")
            assert aborted["outcome"] == "aborted", aborted
            assert "restore" in aborted["reason"], aborted
            during_abort = (await c.call(op="join", tag="during-abort"))["results"]
            assert [(r["ok"], r["seq"], r["node"]) for r in during_abort] == [
                (True, seq, "s") for seq in (2, 3, 4)]
            assert (await c.call(op="join", tag="hold-abort"))["ok"]
            after_abort = await c.call(op="step", spot=SPOT, seq=5)
            assert (after_abort["node"], after_abort["count"]) == ("s", 5), after_abort
            await t.call(op="knob", name="fail_restore", value=False)

            # A committed move: the hold (more than the lane bound) follows the Spot.
            await sealed_with_running_turn(s, c, "commit", seal_count=2)
            held = list(range(10, 10 + HELD))
            await c.call(op="spawn", tag="during-commit",
                         cmd={"op": "steps", "spot": SPOT, "seqs": held})
            assert (await s.call(op="wait_held", spot=SPOT, count=HELD))["held"] == HELD
            sealed = await store.location.find(SPOT)
            assert sealed is not None
            assert sealed.state is AuthorityState.SEALED
            ran_while_sealed = set(handled_at(tmp_path))
            await s.call(op="gate_open")
            committed = await s.call(op="join", tag="commit")
            assert committed["outcome"] == "committed", committed
            assert committed["node_rid"] == t.node_rid
            relayed = (await c.call(op="join", tag="during-commit"))["results"]
            assert (await c.call(op="join", tag="hold-commit"))["node"] == "s"

            # c's route still names s: Message Follow along the committed route.
            cached = await c.call(op="cached_route", spot=SPOT)
            followed = await c.call(op="step", spot=SPOT, seq=100)
            from_t = await t.call(op="step", spot=SPOT, seq=101)
            hosts = {node.name: (await node.call(op="hosts"))["hosts"] for node in (s, t)}
            record = await store.location.find(SPOT)
            sent = {int(seq): op for seq, op in
                    (await c.call(op="operations"))["operations"].items()}
    assert ran_while_sealed == {1, 2, 3, 4, 5}  # a held message runs nowhere while sealed
    assert cached["node_rid"] == s.node_rid  # so the call below took the source's route
    assert [(r["ok"], r["seq"], r["node"]) for r in relayed] == [(True, seq, "t") for seq in held]
    assert sorted(r["count"] for r in relayed) == list(range(6, 6 + HELD))  # each ran once
    assert (followed["ok"], followed["node"], followed["count"]) == (True, "t", 6 + HELD)
    assert (from_t["node"], from_t["count"]) == ("t", 7 + HELD)
    assert hosts == {"s": [], "t": [SPOT]}
    assert record is not None
    assert (record.state, str(record.owner.node_rid)) == (AuthorityState.READY, t.node_rid)
    by_seq = handled_at(tmp_path)
    assert by_seq == {**{seq: ["s"] for seq in (1, 2, 3, 4, 5)},
                      **{seq: ["t"] for seq in [*held, 100]}, 101: ["t"]}
    # Every call of c ran once, under the operation ID c's frame carried: held and
    # returned to the queue (2-4), held and relayed (held), followed (100).
    from_c = [2, 3, 4, *held, 100]
    assert len({sent[seq] for seq in from_c}) == len(from_c)
    assert 0 not in sent.values()
    operations = handled_operations(tmp_path)
    assert {seq: operations[seq] for seq in from_c} == {seq: [sent[seq]] for seq in from_c}


async def test_entry_spot_is_not_in_the_relocation_candidate_list(relocation_url, tmp_path):
    """09 §8: Entry Spot isn't in the relocation candidate list (and an Actor that was on
    an Entry Spot is included in the relocation candidates -- this runtime has no
    Actors yet, so only the first half is tested).

    ``relocate(entry_spot_id)`` is REFUSED, named target or not, and changes nothing;
    ``drain()`` moves the movable Spot, lists the ``DisableRelocation`` one as not
    moved, and never lists or moves the Entry Spot, whose authority stays with its node.
    """
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(relocation_url) as store, open_mesh(
                relocation_url, tmp_path, NODES[:1]) as (s,):
            entry = s.info["entry_spot_id"]
            assert (await s.call(op="step", spot=SPOT, seq=1, intent=True))["node"] == "s"
            pinned = await s.call(op="request", spot="pinned-1", n=1, intent=True)
            assert pinned["ok"], pinned  # a meshcounter: DisableRelocation
            before = await store.location.find(entry)
            # t joins now, with a placement weight: drain's placement may choose it.
            async with open_mesh(relocation_url, tmp_path, [{"name": "t"}]) as (t,):
                named = await s.call(op="relocate", spot=entry, to="t")
                placed = await s.call(op="relocate", spot=entry, to=None)
                drained = await s.call(op="drain", timeout=20)
                after = await store.location.find(entry)
                hosts = {node.name: (await node.call(op="hosts"))["hosts"] for node in (s, t)}
                moved = await t.call(op="step", spot=SPOT, seq=2)
    for refused in (named, placed):
        assert refused["outcome"] == "refused", refused
        assert "Entry Spot" in refused["reason"], refused
    assert drained["moved"] == [[SPOT, t.node_rid]], drained
    assert [(spot, outcome) for spot, outcome, _ in drained["not_moved"]] == [
        ("pinned-1", "refused")]
    listed = {spot for spot, _ in drained["moved"]} | {n[0] for n in drained["not_moved"]}
    assert entry not in listed
    assert before is not None
    assert after == before  # the Entry Spot's authority did not change at all
    assert str(after.owner.node_rid) == s.node_rid
    assert hosts == {"s": ["pinned-1"], "t": [SPOT]}
    assert (moved["node"], moved["count"]) == ("t", 2)


async def test_ingress_after_the_seal_is_retained_in_the_relocation_hold(relocation_url,
                                                                         tmp_path):
    """06 §9: Ingress arrives on the source route after a relocation seal -> Not rejected
    -- retained in the relocation hold.

    With the move sealed (a running turn keeps it there), requests from a third node
    (``c``), from the target itself (``t``, which resolves the Sealed record to the
    source) and from the source's own client all reach the hold: none is refused and no
    handler runs for any of them while sealed; after the commit each runs once, at the
    target, and answers its caller.
    """
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(relocation_url) as store, open_mesh(
                relocation_url, tmp_path, NODES) as (s, t, c):
            assert (await c.call(op="step", spot=SPOT, seq=1, intent=True))["node"] == "s"
            await sealed_with_running_turn(s, c, "move", seal_count=1)
            sealed = await store.location.find(SPOT)
            callers = {"c": (c, [2, 3, 4]), "t": (t, [5]), "s": (s, [6])}
            total = 0
            for name, (node, seqs) in callers.items():
                await node.call(op="spawn", tag=f"from-{name}",
                                cmd={"op": "steps", "spot": SPOT, "seqs": seqs})
                total += len(seqs)
                await s.call(op="wait_held", spot=SPOT, count=total)
            ran_while_sealed = set(handled_at(tmp_path))
            await s.call(op="gate_open")
            moved = await s.call(op="join", tag="move")
            answers = {name: (await node.call(op="join", tag=f"from-{name}"))["results"]
                       for name, (node, _) in callers.items()}
    assert sealed is not None
    assert sealed.state is AuthorityState.SEALED
    assert ran_while_sealed == {1}
    assert moved["outcome"] == "committed", moved
    for name, (_, seqs) in callers.items():
        assert [(r["ok"], r["seq"], r["node"]) for r in answers[name]] == [
            (True, seq, "t") for seq in seqs], (name, answers[name])
    assert handled_at(tmp_path) == {1: ["s"], **{seq: ["t"] for seq in range(2, 7)}}


async def test_a_relocating_unit_not_yet_sealed_keeps_accepting_messages(relocation_url,
                                                                         tmp_path):
    """06 §9: A message arrives at a Relocating unit not yet sealed -> Accepted, keeping
    existing owner admission.

    The move has begun (the store says Relocating toward ``t``) and is held before its
    seal: requests from ``c``, from ``t`` and from ``s`` itself are admitted and run at
    the existing owner ``s`` at once, and the move then commits with them in the state.
    """
    with trio.fail_after(TEST_TIMEOUT):
        async with open_store(relocation_url) as store, open_mesh(
                relocation_url, tmp_path, NODES) as (s, t, c):
            assert (await c.call(op="step", spot=SPOT, seq=1, intent=True))["node"] == "s"
            await s.call(op="seal_gate_close")
            await s.call(op="spawn", tag="move",
                         cmd={"op": "relocate", "spot": SPOT, "to": "t", "timeout": 20})
            await s.call(op="wait_seal_gated")
            relocating = await store.location.find(SPOT)
            accepted = [await c.call(op="step", spot=SPOT, seq=2),
                        await t.call(op="step", spot=SPOT, seq=3),
                        await s.call(op="step", spot=SPOT, seq=4)]
            await s.call(op="seal_gate_open")
            moved = await s.call(op="join", tag="move")
            after = await c.call(op="step", spot=SPOT, seq=5)
    assert relocating is not None
    assert relocating.state is AuthorityState.RELOCATING
    assert relocating.relocation_target is not None
    assert str(relocating.relocation_target.node_rid) == t.node_rid
    assert [(r["ok"], r["node"], r["count"]) for r in accepted] == [
        (True, "s", 2), (True, "s", 3), (True, "s", 4)]
    assert moved["outcome"] == "committed", moved
    assert (after["node"], after["count"]) == ("t", 5)
    assert handled_at(tmp_path) == {1: ["s"], 2: ["s"], 3: ["s"], 4: ["s"], 5: ["t"]}
