"""The ShoppingMall sample (``docs/shoppingmall.md``): Client, Shared, Server.

- ``shared`` -- the JSON contracts every role speaks
- ``server`` -- CommerceApi and OrderWorkflow, their stores and external-effect stand-ins
- ``client`` -- the Client's 15-item self-check through the public order API (httpx)
- ``runner`` -- ``serve``, the ``smoke`` runner, the node processes and their hooks
- ``seeds`` -- carts, stock and payment methods derived from a cart ID's prefix
- ``__main__`` -- ``python -m zlink_trio.samples.shoppingmall serve | smoke | client | node``

Section names in quotes in this package's docstrings ("Topology", "Evidence rows") are
those of ``docs/shoppingmall.md``, and an item number (9.2-4) is an item of its
self-check.
"""
