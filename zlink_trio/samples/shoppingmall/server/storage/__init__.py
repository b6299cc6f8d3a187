"""ShoppingMall's server storage: what both server parts open by URL.

- ``store_url``            -- which backend an application store URL names (SQLite or Redis)
- ``sqlite_db``            -- one SQLite connection: WAL, whole transactions off the Trio thread
- ``redis_db``             -- one coredis client: Lua scripts, bounded calls, typed errors;
  coredis's failed connection set-ups logged in one line, not pages of traceback
- ``app_store``            -- ``open_app_store``: the one place a store's connection opens and
  closes (every store of the sample opens through it)
- ``commerce_state_store`` -- CommerceStateStore: IdempotencyKey -> OrderId, pending then
  started, and the cart snapshots; the CommerceApi and the OrderWorkflow both use it

It imports neither ``commerce_api`` nor ``order_workflow``.
"""
