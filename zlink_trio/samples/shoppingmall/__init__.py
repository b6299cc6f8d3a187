"""The ShoppingMall sample (spec ``shoppingmall-sample.txt``): Client, Shared, Server (§8).

- ``server`` -- CommerceApi and OrderWorkflow, their stores and external-effect stand-ins
"""
