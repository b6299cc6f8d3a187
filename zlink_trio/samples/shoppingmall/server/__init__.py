"""ShoppingMall's server side (``docs/shoppingmall.md``, "Where each part lives").

- ``storage``        -- what both parts open by URL: the SQLite / Redis plumbing
  (``app_store``, ``store_url``, ``sqlite_db``, ``redis_db``) and the CommerceStateStore
- ``order_workflow`` -- the order owner; ``domain``: its rules, ``infrastructure``: its stores
  and module stand-ins
- ``commerce_api``   -- the HTTP edge's roles; it calls the order owner and reads its
  projection

Imports point one way: ``commerce_api`` -> ``order_workflow`` -> ``storage`` (and
``commerce_api`` -> ``storage``); nothing else in ``server/`` imports ``commerce_api``.
"""
