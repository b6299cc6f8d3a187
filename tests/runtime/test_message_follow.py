"""Message Follow's checks on the old owner, one rule each (06 §6; issue #11 point 4).

:func:`~zlink_trio.runtime.mesh.message_follow.next_hop` is the check the old owner
runs on a command 39 before it forwards it along its committed route; it reads no
clock and no store, so the rules are tested on plain frames here. What a caller sees
end to end (a forwarded call served at the target, several moves, a route switched
off) is in ``test_relocation.py``.
"""

from __future__ import annotations

import pytest

from zlink_trio.core.errors import InvalidOperation, Unavailable
from zlink_trio.core.identity import NodeRid
from zlink_trio.core.records import OwnerFence
from zlink_trio.runtime.mesh.follow_routes import FollowRoute, FollowRoutes
from zlink_trio.runtime.mesh.message_follow import MAX_HOPS, next_hop, superseded
from zlink_trio.wire.codec import EncodedMessage
from zlink_trio.wire.frames import ActivationRoute, ReadyRoute, Route, SpotMessage
from zlink_trio.wire.frames import FollowRoute as FollowFrameRoute

SOURCE = OwnerFence(NodeRid.generate(), 1)
TARGET = OwnerFence(NodeRid.generate(), 1)
ELSEWHERE = OwnerFence(NodeRid.generate(), 1)

#: The old owner held the Spot at owner generation 3; the move made it 4 at TARGET.
ROUTE = FollowRoute(spot_id="cart-1", object_generation=2, source_owner_generation=3,
                    target=TARGET, target_owner_generation=4, expires_at=30.0)


def message(route: Route) -> SpotMessage:
    return SpotMessage(route=route, operation_id=7, reply_correlation=1,
                       deadline_ms=1_000, source=ELSEWHERE, source_spot_id=None,
                       metadata=None, payload=EncodedMessage("Put", b"{}"))


def ready(object_generation: int = 2, owner_generation: int = 3) -> SpotMessage:
    return message(ReadyRoute(spot_id="cart-1", object_generation=object_generation,
                              owner_generation=owner_generation, target=SOURCE))


def followed(hops: int, *, source_gen: int = 2, target_gen: int = 3) -> SpotMessage:
    return message(FollowFrameRoute(
        spot_id="cart-1", object_generation=2, source_owner_generation=source_gen,
        target_owner_generation=target_gen, target=SOURCE, hops=hops))


def test_a_message_on_the_committed_route_takes_its_first_hop():
    assert next_hop(ROUTE, ready()) == 1


def test_a_message_already_followed_counts_one_more_hop():
    assert next_hop(ROUTE, followed(3)) == 4


def test_a_route_that_predates_several_moves_still_follows():
    # The caller's route names owner generation 1: the Spot was here then, came back
    # and left again; the route installed last covers it.
    assert next_hop(ROUTE, ready(owner_generation=1)) == 1


def test_another_object_generation_is_invalid_operation():
    with pytest.raises(InvalidOperation, match="ObjectGeneration 5"):
        next_hop(ROUTE, ready(object_generation=5))


def test_a_newer_owner_generation_than_the_route_is_unavailable():
    with pytest.raises(Unavailable, match="owner generation 4, newer"):
        next_hop(ROUTE, ready(owner_generation=4))


def test_a_route_older_than_the_owner_generation_addressed_is_superseded():
    # The Spot came back here at owner generation 5 (after the move the route is for)
    # and closed here: the route no longer applies; the one it is for, or older, does.
    assert superseded(ROUTE, ready(owner_generation=5))
    assert superseded(ROUTE, followed(2, source_gen=4, target_gen=5))
    assert not superseded(ROUTE, ready(owner_generation=3))
    assert not superseded(ROUTE, ready(owner_generation=1))

def test_a_direct_message_to_another_object_generation_is_superseded():
    # It was sent to an incarnation that closed here; the route is a later one's.
    assert superseded(ROUTE, ready(object_generation=1, owner_generation=1))
    assert superseded(ROUTE, ready(object_generation=5, owner_generation=9))
    followed_other = message(FollowFrameRoute(
        spot_id="cart-1", object_generation=5, source_owner_generation=2,
        target_owner_generation=3, target=SOURCE, hops=1))
    assert not superseded(ROUTE, followed_other)  # next_hop refuses it: InvalidOperation


def test_the_ninth_hop_is_refused_with_unavailable():
    assert next_hop(ROUTE, followed(MAX_HOPS - 1)) == MAX_HOPS
    with pytest.raises(Unavailable, match=f"followed {MAX_HOPS} relocations"):
        next_hop(ROUTE, followed(MAX_HOPS))


def test_an_activation_envelope_is_never_followed():
    envelope = message(ActivationRoute(target_mesh="default", target=SOURCE,
                                       spot_id="cart-1", stable_type="cart",
                                       descriptor_version=1))
    with pytest.raises(InvalidOperation, match="nothing was created"):
        next_hop(ROUTE, envelope)


def test_a_route_is_gone_once_its_message_follow_duration_ran_out():
    routes = FollowRoutes()
    routes.install(ROUTE)
    assert routes.get("cart-1", 29.9) == ROUTE
    assert routes.get("cart-1", 30.0) is None
    assert len(routes) == 0  # dropped, not only hidden


def test_sweep_drops_only_expired_routes():
    routes = FollowRoutes()
    routes.install(ROUTE)
    later = FollowRoute(spot_id="cart-2", object_generation=1, source_owner_generation=1,
                        target=TARGET, target_owner_generation=2, expires_at=60.0)
    routes.install(later)
    routes.sweep(45.0)
    assert len(routes) == 1
    assert routes.get("cart-2", 45.0) == later
