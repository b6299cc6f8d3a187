"""The ShoppingMall sample (spec ``shoppingmall-sample.txt``): Client, Shared, Server (§8).

- ``shared`` -- the JSON contracts every role speaks (§6.1)
- ``server`` -- CommerceApi and OrderWorkflow, their stores and external-effect stand-ins
- ``client`` -- the §9 self-check through the public order API (httpx)
- ``runner`` -- ``serve``, the §10 ``smoke`` runner, the node processes and their hooks
- ``seeds`` -- carts, stock and payment methods derived from a cart ID's prefix
- ``__main__`` -- ``python -m zlink_trio.samples.shoppingmall serve | smoke | client | node``
"""
