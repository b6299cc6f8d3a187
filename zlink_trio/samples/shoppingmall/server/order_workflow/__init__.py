"""OrderWorkflow (§8): domain, application and infrastructure of the order owner.

- ``domain``         -- the pure order rules: events, fold, next step, deterministic IDs
- ``infrastructure`` -- OrderEventStore, OrderReadModelStore, the Inventory and Payment modules
"""
