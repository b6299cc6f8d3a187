"""The runner's pure parts: seeds by cart prefix, the deployment layout, the Client's config."""

from __future__ import annotations

import json

import pytest

from zlink_trio.samples.shoppingmall.client.config import (
    CART_ROLES,
    ORDER_ROLES,
    ClientConfig,
    config_names_and_values,
    forbidden_names,
)
from zlink_trio.samples.shoppingmall.client.program import first_failure
from zlink_trio.samples.shoppingmall.client.reports import parse_fields
from zlink_trio.samples.shoppingmall.client.scenario import ScenarioFailure
from zlink_trio.samples.shoppingmall.runner.smoke import cart_ids
from zlink_trio.samples.shoppingmall.runner.topology import (
    FIXTURE_NODE,
    NODES,
    Deployment,
    plan_deployment,
    store_urls,
)
from zlink_trio.samples.shoppingmall.seeds import cart_document, derive_cart, seed_plan


@pytest.mark.parametrize(("cart_id", "sku", "method", "branch"), [
    ("cart-ok-1", "sku-ok", "pm-ok", "success"),
    ("cart-no-stock-x", "sku-no-stock", "pm-ok", "inventory-failure"),
    ("cart-pay-reject-anything-at-all", "sku-ok", "pm-reject", "payment-failure"),
])
def test_a_cart_prefix_decides_the_branch(cart_id, sku, method, branch):
    cart = derive_cart(cart_id)
    assert cart is not None
    assert (cart.sku, cart.payment_method_id, cart.branch) == (sku, method, branch)


def test_one_cart_id_always_derives_one_cart():
    assert derive_cart("cart-ok-42") == derive_cart("cart-ok-42")
    cart = derive_cart("cart-ok-42")
    assert cart is not None
    assert 1 <= cart.quantity <= 3
    assert 5 <= cart.unit_price <= 24
    assert cart.amount == cart.quantity * cart.unit_price


def test_a_cart_without_a_known_prefix_has_no_seed():
    assert derive_cart("cart-unknown-1") is None
    with pytest.raises(ValueError, match="prefixes"):
        seed_plan(["cart-unknown-1"])


def test_the_cart_document_is_what_commerce_api_reads():
    cart = derive_cart("cart-ok-7")
    assert cart is not None
    document = json.loads(cart_document(cart))
    assert document == {"lines": [{"sku": "sku-ok", "quantity": cart.quantity}],
                        "amount": cart.amount, "currency": "EUR", "paymentMethodId": "pm-ok"}


def test_the_plan_seeds_stock_methods_and_each_cart():
    plan = seed_plan(["cart-ok-1", "cart-no-stock-1"])
    assert plan.stock == {"sku-ok": 1_000_000_000, "sku-no-stock": 0}
    assert plan.payment_methods == {"pm-ok": True, "pm-reject": False}
    assert sorted(plan.carts) == ["cart-no-stock-1", "cart-ok-1"]


def test_sqlite_keeps_each_resource_in_its_own_file(tmp_path):
    urls = store_urls(None, tmp_path, "sm-1")
    files = [urls.location, urls.relocation, urls.events, urls.read_model, urls.commerce]
    assert len(set(files)) == 5
    assert all(u.startswith(f"sqlite:///{tmp_path}") for u in files)


def test_redis_keeps_location_and_relocation_in_separate_keyspaces(tmp_path):
    urls = store_urls("redis://127.0.0.1:6379/0?prefix=ignored", tmp_path, "sm-1")
    assert urls.location == "redis://127.0.0.1:6379/0?prefix=sm-1-loc"
    assert urls.relocation == "redis://127.0.0.1:6379/0?prefix=sm-1-rel"
    assert urls.events == urls.read_model == urls.commerce == \
        "redis://127.0.0.1:6379/0?prefix=sm-1-app"


def test_an_unknown_store_scheme_is_refused(tmp_path):
    with pytest.raises(ValueError, match="--store"):
        store_urls("postgres://x", tmp_path, "sm-1")


def test_the_base_port_numbers_the_nodes_and_the_file_round_trips(tmp_path):
    deployment = plan_deployment(run_id="sm-1", stores=store_urls(None, tmp_path, "sm-1"),
                                 base_port=9000, runner_mode=True)
    assert [n.node_id for n in deployment.nodes] == [*NODES, FIXTURE_NODE]
    assert [deployment.node(n).http_port for n in ("api-a", "api-b")] == [9000, 9001]
    assert [deployment.node(n).hooks_port for n in ("workflow-a", "workflow-b")] == [9002, 9003]
    assert Deployment.from_json(deployment.to_json()) == deployment


def test_the_runners_fixture_node_takes_no_placements(tmp_path):
    deployment = plan_deployment(run_id="sm-1", stores=store_urls(None, tmp_path, "sm-1"),
                                 base_port=9000, runner_mode=True)
    fixture = deployment.node(FIXTURE_NODE)
    assert (fixture.role, fixture.placement_weight, fixture.hooks_port) == ("workflow", 0, 9004)
    assert all(deployment.node(n).placement_weight is None for n in NODES)


def test_serve_mode_opens_no_hooks_and_has_no_fixture_node(tmp_path):
    deployment = plan_deployment(run_id="sm-1", stores=store_urls(None, tmp_path, "sm-1"),
                                 base_port=0, runner_mode=False)
    assert [n.node_id for n in deployment.nodes] == list(NODES)
    assert [n.hooks_port for n in deployment.nodes] == [0, 0, 0, 0]


def _config(orders: dict[str, str] | None = None) -> ClientConfig:
    carts, concurrent = cart_ids("sm-1")
    return ClientConfig(apis=("http://127.0.0.1:1", "http://127.0.0.1:2"), carts=carts,
                        concurrent_carts=concurrent,
                        orders={role: f"order-{i}" for i, role in enumerate(ORDER_ROLES)}
                        if orders is None else orders)


def test_the_client_config_names_no_node_rid_or_endpoint():
    config = _config()
    assert set(config.carts) == set(CART_ROLES)
    assert forbidden_names(*config_names_and_values(config)) == []
    assert ClientConfig.from_json(config.to_json()) == config


def test_the_client_config_carries_every_prepared_order():
    with pytest.raises(ValueError, match="prepared orders"):
        ClientConfig.from_json(_config(orders={"rebuild": "order-1"}).to_json())


def test_an_owner_named_in_a_prepared_order_would_be_found():
    config = _config(orders={"failureBoundary": "workflow-a"})
    assert forbidden_names(*config_names_and_values(config)) == ["workflow-a"]


def test_forbidden_names_are_whole_camel_case_words():
    assert forbidden_names(["orderId", "nodeRid", "targetRid", "ownerNode", "updatedAtUnixMs"],
                           ["http://127.0.0.1:1", "ws://127.0.0.1:2"]) == \
        ["nodeRid", "targetRid", "ownerNode", "ws://127.0.0.1:2"]


def test_a_report_line_parses_back():
    line = "shoppingmall-client passed item=9.2-6 order=order-1"
    assert parse_fields(line) == {"item": "9.2-6", "order": "order-1"}


def test_a_failure_in_a_concurrent_step_is_the_cause():
    failure = ScenarioFailure("9.2-1: two OrderIds")
    group = ExceptionGroup("nursery", [ExceptionGroup("inner", [failure])])
    assert first_failure(group) is failure


def test_a_bug_in_a_concurrent_step_is_not_hidden():
    group = ExceptionGroup("nursery", [KeyError("x")])
    with pytest.raises(ExceptionGroup):
        first_failure(group)
