"""ShoppingMall's server side (§8).

- ``commerce_api``   -- the HTTP edge's roles; ``state_store``: the CommerceStateStore
- ``order_workflow`` -- the order owner; ``infrastructure``: its stores and module stand-ins
"""
