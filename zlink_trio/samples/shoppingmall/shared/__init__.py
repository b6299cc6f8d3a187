"""ShoppingMall's shared part, the JSON contracts: what Client and Server both import.

- ``contracts`` -- every message and event (``docs/shoppingmall.md``, "JSON contracts") as a
  frozen attrs class, camelCase on the
  wire through the framework's typed JSON codec, with pinned stable type names

It imports only ``attrs`` and the standard library, so the client, the CommerceApi and the
OrderWorkflow can all depend on it without depending on each other.
"""
