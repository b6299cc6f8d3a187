"""ShoppingMall's shared part (§8 "Shared/JSON Contracts"): what Client and Server both import.

- ``contracts`` -- every message and event of §6.1 as a frozen attrs class, camelCase on the
  wire through the framework's typed JSON codec, with pinned stable type names

It imports only ``attrs`` and the standard library, so the client, the CommerceApi and the
OrderWorkflow can all depend on it without depending on each other.
"""
