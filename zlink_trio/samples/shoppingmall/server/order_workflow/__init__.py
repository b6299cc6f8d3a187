"""OrderWorkflow (§8): domain, application and infrastructure of the order owner.

- ``infrastructure`` -- OrderEventStore, OrderReadModelStore, the Inventory and Payment modules
"""
