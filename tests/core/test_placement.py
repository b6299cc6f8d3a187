"""Mesh, type and node selection for new Spots (spec 06 §3.1, §4.1 steps 4-7; 09 §5)."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from zlink_trio.core.errors import (
    CapacityExceeded,
    InvalidOperation,
    NotConfigured,
    NotFound,
    TypeMismatch,
    Unavailable,
)
from zlink_trio.core.identity import NodeRid, SpotKind
from zlink_trio.core.placement import (
    PlacementCandidate,
    Role,
    check_local_activation,
    choose_node,
    eligible_nodes,
    place,
    select_instance_type,
    select_mesh,
    select_user_type,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

USER, INSTANCE = SpotKind.USER, SpotKind.INSTANCE
SERVER = {Role.OBJECT_SERVER}
CLIENT = {Role.OBJECT_CLIENT}
_rids = itertools.count(1)


def rid() -> NodeRid:
    return NodeRid(next(_rids).to_bytes(16, "big"))


def node(
    mesh: str = "world",
    *,
    roles: Iterable[Role] = frozenset(SERVER),
    types: Mapping[str, SpotKind] | None = None,
    active: int = 0,
    pending: int = 0,
    capacity: int = 100,
    ceiling: int | None = None,
    weight: float = 1.0,
    serving: bool = True,
) -> PlacementCandidate:
    return PlacementCandidate(
        mesh=mesh,
        node_rid=rid(),
        roles=roles,
        served_types={"counter": INSTANCE} if types is None else types,
        active=active,
        pending=pending,
        capacity=capacity,
        active_object_ceiling=ceiling,
        weight=weight,
        serving=serving,
    )


def fixed(value: float) -> Callable[[], float]:
    return lambda: value


# --- Mesh selection ----------------------------------------------------------------------


def test_in_mesh_given_is_used_when_it_has_an_object_role_node():
    candidates = [node("world"), node("commerce", roles=CLIENT)]
    assert select_mesh(candidates, "commerce") == "commerce"
    assert select_mesh(candidates, "world") == "world"


def test_in_mesh_naming_no_object_mesh_is_not_found():
    candidates = [node("world"), node("lobby", roles=frozenset())]
    with pytest.raises(NotFound, match="'nowhere'"):
        select_mesh(candidates, "nowhere")
    # A Mesh whose nodes have no object role does not count as existing for placement.
    with pytest.raises(NotFound, match="'lobby'"):
        select_mesh(candidates, "lobby")


def test_omitted_mesh_is_the_single_object_mesh():
    candidates = [node("world"), node("world", roles=CLIENT), node("lobby", roles=frozenset())]
    assert select_mesh(candidates, None) == "world"


def test_omitted_mesh_with_no_object_mesh_is_not_configured():
    with pytest.raises(NotConfigured, match="object-server role"):
        select_mesh([], None)
    with pytest.raises(NotConfigured):
        select_mesh([node("lobby", roles=frozenset())], None)


def test_omitted_mesh_with_several_object_meshes_is_invalid_operation():
    with pytest.raises(InvalidOperation, match=r"in_mesh") as refused:
        select_mesh([node("world"), node("commerce", roles=CLIENT)], None)
    assert type(refused.value) is InvalidOperation
    assert "'commerce'" in refused.value.message
    assert "'world'" in refused.value.message


# --- stable type selection ----------------------------------------------------------------


def test_given_instance_type_needs_a_serving_server_with_that_capability():
    candidates = [node(types={"counter": INSTANCE}), node(types={"cart": INSTANCE})]
    assert select_instance_type(candidates, "world", "cart") == "cart"
    with pytest.raises(NotFound, match="'Cart'"):  # case-sensitive
        select_instance_type(candidates, "world", "Cart")


@pytest.mark.parametrize(
    "unfit",
    [
        {"roles": CLIENT},
        {"mesh": "other"},
    ],
    ids=["client-only", "other-mesh"],
)
def test_type_served_only_by_unfit_nodes_is_not_found(unfit):
    candidates = [node(types={"counter": INSTANCE}),
                  node(**{"types": {"cart": INSTANCE}, **unfit})]
    with pytest.raises(NotFound, match="'cart'"):
        select_instance_type(candidates, "world", "cart")


def test_instance_intent_on_a_user_type_is_type_mismatch():
    candidates = [node(types={"room": USER})]
    with pytest.raises(TypeMismatch, match="User Spot type"):
        select_instance_type(candidates, "world", "room")


def test_a_type_served_only_by_draining_nodes_is_unavailable_and_says_so():
    candidates = [node(types={"cart": INSTANCE}, serving=False),
                  node(types={"room": USER}, serving=False), node(types={"other": INSTANCE})]
    with pytest.raises(Unavailable, match=r"every node of Mesh 'world' serving INSTANCE "
                                          r"type 'cart' \(1 node\(s\)\) is draining or "
                                          r"stopping") as cart:
        select_instance_type(candidates, "world", "cart")
    assert "zlink-trio undrain" in cart.value.message  # what to do
    assert type(cart.value) is Unavailable  # retryable, not NotFound "check the type name"
    with pytest.raises(Unavailable, match="USER type 'room'"):
        select_user_type(candidates, "world", "room")
    with pytest.raises(Unavailable, match="draining"):
        eligible_nodes(candidates, "world", "cart", INSTANCE)
    with pytest.raises(NotFound) as unknown:
        select_instance_type(candidates, "world", "nothing")
    assert "draining" not in unknown.value.message  # only said when it is the cause
    with pytest.raises(NotFound):  # a draining node serving it as the other kind: no help
        select_instance_type(candidates, "world", "room")


def test_the_unavailable_message_names_the_draining_nodes_by_node_id():
    candidates = [PlacementCandidate(mesh="world", node_rid=rid(), roles=SERVER,
                                     served_types={"cart": INSTANCE}, active=0, pending=0,
                                     capacity=1, serving=False, node_id=name)
                  for name in ("b", "a")]
    with pytest.raises(Unavailable, match=r"type 'cart' \(nodes 'a', 'b'\) is draining"):
        select_instance_type(candidates, "world", "cart")
    with pytest.raises(Unavailable, match=r"type 'cart' \(node 'b'\) is draining"):
        select_instance_type(candidates[:1], "world", "cart")


def test_an_omitted_type_when_only_draining_nodes_serve_one_is_unavailable():
    candidates = [node(types={"cart": INSTANCE}, serving=False), node(types={"room": USER})]
    with pytest.raises(Unavailable, match="serving an INSTANCE Spot type"):
        select_instance_type(candidates, "world", None)
    with pytest.raises(NotFound, match="any Instance Spot type"):
        select_instance_type([node(types={"room": USER}, serving=False)], "world", None)


def test_omitted_instance_type_is_the_single_distinct_instance_type():
    candidates = [
        node(types={"counter": INSTANCE, "room": USER}),
        node(types={"counter": INSTANCE}),
        node(types={"cart": INSTANCE}, serving=False),
        node("other", types={"cart": INSTANCE}),
    ]
    assert select_instance_type(candidates, "world", None) == "counter"


def test_omitted_instance_type_with_none_served_is_not_found():
    with pytest.raises(NotFound, match="any Instance Spot type"):
        select_instance_type([node(types={"room": USER})], "world", None)


def test_omitted_instance_type_with_several_is_invalid_operation():
    candidates = [node(types={"counter": INSTANCE}), node(types={"cart": INSTANCE})]
    with pytest.raises(InvalidOperation, match="instance_spot") as refused:
        select_instance_type(candidates, "world", None)
    assert "'cart'" in refused.value.message
    assert "'counter'" in refused.value.message


def test_user_create_needs_a_user_type_served_in_the_mesh():
    candidates = [node(types={"room": USER, "counter": INSTANCE})]
    assert select_user_type(candidates, "world", "room") == "room"
    with pytest.raises(TypeMismatch, match="Instance Spot type"):
        select_user_type(candidates, "world", "counter")
    with pytest.raises(NotFound, match="'lobby'"):
        select_user_type(candidates, "world", "lobby")


@pytest.mark.parametrize("bad", ["", "x" * 256, 7])
def test_malformed_stable_type_is_invalid_operation(bad):
    with pytest.raises(InvalidOperation):
        select_user_type([node(types={"room": USER})], "world", bad)
    with pytest.raises(InvalidOperation):
        select_instance_type([node()], "world", bad)


# --- capacity and ceiling filter ----------------------------------------------------------


def test_capacity_filter_counts_pending_and_excludes_nodes_near_the_ceiling():
    full = node(active=7, pending=3, capacity=10)
    near_ceiling = node(active=4, pending=1, ceiling=5)
    room = node(active=3, pending=1, capacity=5, ceiling=5)
    kept = eligible_nodes([full, near_ceiling, room], "world", "counter", INSTANCE)
    assert kept == (room,)


def test_no_node_with_room_is_capacity_exceeded_without_a_lane():
    candidates = [node(active=10, capacity=10), node(active=2, ceiling=2)]
    with pytest.raises(CapacityExceeded, match="capacity or active-object ceiling") as refused:
        eligible_nodes(candidates, "world", "counter", INSTANCE)
    assert refused.value.lane is None


def test_zero_weight_nodes_take_no_new_spots_even_when_alone():
    drained = node(weight=0.0)
    full = node(active=100)
    with pytest.raises(CapacityExceeded, match="weight 0") as refused:
        eligible_nodes([drained, full], "world", "counter", INSTANCE)
    assert refused.value.lane is None


def test_eligible_nodes_without_any_host_of_the_type_is_not_found():
    with pytest.raises(NotFound):
        eligible_nodes([node(types={"room": USER})], "world", "room", INSTANCE)


def test_local_activation_is_refused_at_the_ceiling():
    check_local_activation(active=4, pending=0, ceiling=5)
    check_local_activation(active=10**6, pending=0, ceiling=None)
    for active, pending in [(5, 0), (4, 1), (9, 0)]:
        with pytest.raises(CapacityExceeded, match="ceiling of 5") as refused:
            check_local_activation(active=active, pending=pending, ceiling=5)
        assert refused.value.lane is None
    with pytest.raises(InvalidOperation, match="active"):
        check_local_activation(active=-1, pending=0, ceiling=5)
    with pytest.raises(InvalidOperation, match="ceiling"):
        check_local_activation(active=0, pending=0, ceiling=-1)


# --- weighted choice ------------------------------------------------------------------------


def test_weighted_choice_maps_the_random_draw_onto_cumulative_weights():
    a, b, c = node(weight=1.0), node(weight=3.0), node(weight=0.0)
    d = node(weight=4.0)
    pool = [a, b, c, d]  # cumulative: a [0,1), b [1,4), d [4,8) of a total of 8
    assert choose_node(pool, fixed(0.0)) is a
    assert choose_node(pool, fixed(0.124)) is a
    assert choose_node(pool, fixed(0.125)) is b
    assert choose_node(pool, fixed(0.49)) is b
    assert choose_node(pool, fixed(0.5)) is d
    assert choose_node(pool, fixed(math.nextafter(1.0, 0.0))) is d


def test_weighted_choice_refuses_bad_random_and_weightless_pools():
    with pytest.raises(InvalidOperation, match=r"\[0, 1\)"):
        choose_node([node()], fixed(1.0))
    with pytest.raises(InvalidOperation, match=r"\[0, 1\)"):
        choose_node([node()], fixed(-0.1))
    with pytest.raises(InvalidOperation, match="positive weight"):
        choose_node([node(weight=0.0)], fixed(0.5))


def test_place_runs_every_step_in_order():
    candidates = [
        node("world", types={"room": USER, "counter": INSTANCE}, weight=1.0),
        node("world", types={"room": USER}, weight=1.0, active=100),
        node("world", roles=CLIENT),
    ]
    user = place(candidates, kind=USER, stable_type="room", in_mesh=None, random=fixed(0.9))
    assert (user.mesh, user.stable_type, user.node) == ("world", "room", candidates[0])
    inst = place(candidates, kind=INSTANCE, stable_type=None, in_mesh="world", random=fixed(0.0))
    assert (inst.stable_type, inst.node) == ("counter", candidates[0])
    with pytest.raises(InvalidOperation, match="stable type"):
        place(candidates, kind=USER, stable_type=None, in_mesh=None, random=fixed(0.0))
    with pytest.raises(InvalidOperation, match="ENTRY"):
        place(candidates, kind=SpotKind.ENTRY, stable_type="x", in_mesh=None, random=fixed(0.0))


# --- candidate validation ---------------------------------------------------------------


@pytest.mark.parametrize(
    "override",
    [
        {"mesh": ""},
        {"mesh": "\ud800"},
        {"roles": {"admin"}},
        {"served_types": {"counter": SpotKind.ENTRY}},
        {"served_types": {"": INSTANCE}},
        {"active": -1},
        {"capacity": 1.5},
        {"active_object_ceiling": -1},
        {"active_object_ceiling": 2.0},
        {"weight": -0.5},
        {"weight": math.inf},
        {"weight": math.nan},
        {"serving": "yes"},
        {"node_rid": b"\x01" * 16},
    ],
)
def test_malformed_candidate_is_invalid_operation(override):
    fields = {
        "mesh": "world", "node_rid": rid(), "roles": SERVER,
        "served_types": {"counter": INSTANCE}, "active": 0, "pending": 0, "capacity": 1,
    }
    with pytest.raises(InvalidOperation, match=next(iter(override))):
        PlacementCandidate(**{**fields, **override})


def test_served_types_are_a_read_only_copy():
    types = {"counter": INSTANCE}
    candidate = node(types=types)
    types["cart"] = INSTANCE
    assert dict(candidate.served_types) == {"counter": INSTANCE}
    with pytest.raises(TypeError):
        candidate.served_types["cart"] = INSTANCE  # type: ignore[index]


# --- properties -----------------------------------------------------------------------------

candidate_strategy = st.builds(
    node,
    mesh=st.sampled_from(["world", "commerce"]),
    roles=st.sampled_from([frozenset(SERVER), frozenset(CLIENT), frozenset(SERVER | CLIENT)]),
    types=st.dictionaries(st.sampled_from(["counter", "cart"]), st.just(INSTANCE), max_size=2),
    active=st.integers(0, 5),
    pending=st.integers(0, 2),
    capacity=st.integers(0, 6),
    ceiling=st.none() | st.integers(0, 6),
    weight=st.sampled_from([0.0, 0.5, 1.0, 7.0]),
    serving=st.booleans(),
)


@given(
    candidates=st.lists(candidate_strategy, max_size=8),
    in_mesh=st.none() | st.sampled_from(["world", "commerce"]),
    stable_type=st.none() | st.sampled_from(["counter", "cart"]),
    draw=st.floats(0.0, 1.0, exclude_max=True),
)
def test_placement_only_ever_chooses_an_eligible_positive_weight_node(
    candidates, in_mesh, stable_type, draw
):
    # An independent oracle of §3.1 / §4.1 steps 4-7: which (Mesh, type) would be picked,
    # and which nodes could take the Spot.
    object_meshes = {c.mesh for c in candidates if c.roles}
    mesh = in_mesh if in_mesh in object_meshes else None
    if in_mesh is None and len(object_meshes) == 1:
        mesh = next(iter(object_meshes))
    hosts = [c for c in candidates
             if c.mesh == mesh and c.serving and Role.OBJECT_SERVER in c.roles]
    served = {t for c in hosts for t in c.served_types}
    chosen_type = stable_type
    if stable_type is None and len(served) == 1:
        chosen_type = next(iter(served))
    fitting = [
        c for c in hosts
        if chosen_type in c.served_types and c.weight > 0
        and c.active + c.pending < c.capacity
        and (c.active_object_ceiling is None or c.active + c.pending < c.active_object_ceiling)
    ]
    if not fitting:
        with pytest.raises((NotFound, NotConfigured, InvalidOperation, CapacityExceeded,
                            Unavailable)):
            place(candidates, kind=INSTANCE, stable_type=stable_type, in_mesh=in_mesh,
                  random=fixed(draw))
        return
    chosen = place(
        candidates, kind=INSTANCE, stable_type=stable_type, in_mesh=in_mesh, random=fixed(draw)
    )
    assert chosen.node in fitting
    assert (chosen.mesh, chosen.stable_type) == (mesh, chosen_type)
    node_ = chosen.node
    assert node_ in candidates
    assert node_.mesh == chosen.mesh
    assert in_mesh is None or chosen.mesh == in_mesh
    assert node_.serving
    assert Role.OBJECT_SERVER in node_.roles
    assert node_.served_types.get(chosen.stable_type) is INSTANCE
    assert stable_type is None or chosen.stable_type == stable_type
    assert node_.has_room
    assert node_.weight > 0


@given(
    weights=st.lists(st.sampled_from([0.0, 0.0, 1e-9, 0.5, 1.0, 1e9]), min_size=1, max_size=8),
    draw=st.floats(0.0, 1.0, exclude_max=True),
)
def test_zero_weight_nodes_are_never_chosen_when_a_positive_one_exists(weights, draw):
    pool = [node(weight=w) for w in weights]
    if not any(w > 0 for w in weights):
        with pytest.raises(InvalidOperation):
            choose_node(pool, fixed(draw))
        return
    chosen = choose_node(pool, fixed(draw))
    assert chosen in pool
    assert chosen.weight > 0


# -- weighted rendezvous hashing by Spot ID (issue #13 item 4) ----------------------------------

def _never() -> float:
    raise AssertionError("placement by Spot ID draws no random number")


def test_placement_by_spot_id_is_the_same_for_every_caller_and_candidate_order():
    nodes = [node() for _ in range(5)]
    for i in range(200):
        chosen = choose_node(nodes, _never, spot_id=f"cart-{i}")
        assert choose_node(list(reversed(nodes)), _never, spot_id=f"cart-{i}") == chosen


def test_equal_weights_share_new_ids_evenly():
    nodes = [node() for _ in range(3)]
    counts = Counter(choose_node(nodes, _never, spot_id=f"id-{i}").node_rid
                     for i in range(3000))
    # deterministic (fixed IDs and NodeRids); 1000 each expected, sigma ~26
    assert all(900 <= counts[n.node_rid] <= 1100 for n in nodes), counts


def test_shares_follow_the_weights_and_zero_weight_takes_none():
    nodes = [node(weight=1.0), node(weight=2.0), node(weight=3.0), node(weight=0.0)]
    counts = Counter(choose_node(nodes, _never, spot_id=f"id-{i}").node_rid
                     for i in range(6000))
    assert 850 <= counts[nodes[0].node_rid] <= 1150, counts
    assert 1800 <= counts[nodes[1].node_rid] <= 2200, counts
    assert 2750 <= counts[nodes[2].node_rid] <= 3250, counts
    assert counts[nodes[3].node_rid] == 0


def test_a_node_leaving_moves_only_its_own_ids():
    nodes = [node() for _ in range(4)]
    before = {i: choose_node(nodes, _never, spot_id=f"id-{i}") for i in range(1000)}
    after = {i: choose_node(nodes[:3], _never, spot_id=f"id-{i}") for i in range(1000)}
    assert all(after[i] == before[i] for i in before if before[i] != nodes[3])
