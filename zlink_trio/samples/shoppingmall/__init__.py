"""The ShoppingMall sample (spec ``shoppingmall-sample.txt``): Client, Shared, Server (§8).

- ``shared`` -- the JSON contracts every role speaks (§6.1)
- ``server`` -- CommerceApi and OrderWorkflow, their stores and external-effect stand-ins
"""
