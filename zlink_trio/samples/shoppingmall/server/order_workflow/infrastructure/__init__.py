"""OrderWorkflow's infrastructure: the Spot, the stores, the modules, and their adapters.

Every store opens by URL (``sqlite:///path.db`` or ``redis://host:port/db?prefix=P``)
as ``async with open_<store>(url) as store``. Modules, one concept each:

- ``event_store``      -- OrderEventStore: streams, expected version, SourceCommandId dedupe
- ``event_records``    -- its values (NewEvent, StoredEvent, AppendResult) and conflict error
- ``read_model_store`` -- OrderReadModelStore: a JSON document per OrderId, version-guarded
- ``inventory``        -- the Inventory module stand-in: first result per ReservationId
- ``payment``          -- the Payment module stand-in: first result per PaymentId
- ``effect_calls``     -- the evidence both modules record for every call (for the runner)
- ``effect_scripts``   -- the modules' Redis Lua scripts and their refusal reasons

They open through ``server/storage/`` (``app_store.open_app_store``: the URL, the SQLite
or Redis connection, closed with the block), like the CommerceStateStore.

The framework adapter and the application's ports:

- ``order_workflow_spot`` -- OrderWorkflowSpot (``shoppingmall.order-workflow``): handlers and
  the background continuation
- ``workflow_calls``      -- how CommerceApi and triggers call the Spot (start, continue, rebuild)
- ``services``            -- a node's stores opened by URL and adapted to the ports
- ``stream_adapter``      -- OrderEventStore as OrderStream (domain events <-> contract JSON)
- ``projection_adapter``  -- OrderReadModelStore as Projection; ``read_order_state`` for lookups
- ``effects_adapter``     -- Inventory and Payment as Effects, with the repeated-effect check
- ``commerce_adapter``    -- the idempotency mapping's started mark; the payment method lookup
  (on ``storage.commerce_state_store``)
- ``evidence``            -- the evidence lines the runner counts, spelled once
- ``fixture_control``     -- the runner-only fixtures (self-check items 9.2-2, 9.2-3, 9.2-6)
"""
