"""OrderWorkflow's infrastructure (§8): the stores and external-module adapters it uses.

Every store opens by URL (``sqlite:///path.db`` or ``redis://host:port/db?prefix=P``)
as ``async with open_<store>(url) as store``. Modules, one concept each:

- ``event_store``      -- OrderEventStore: streams, expected version, SourceCommandId dedupe
- ``event_records``    -- its values (NewEvent, StoredEvent, AppendResult) and conflict error
- ``read_model_store`` -- OrderReadModelStore: a JSON document per OrderId, version-guarded
- ``inventory``        -- the Inventory module stand-in: first result per ReservationId
- ``payment``          -- the Payment module stand-in: first result per PaymentId
- ``effect_calls``     -- the evidence both modules record for every call (for the runner)
- ``effect_scripts``   -- the modules' Redis Lua scripts and their refusal reasons
- ``store_url``        -- which backend a URL names
- ``sqlite_db``        -- one SQLite connection: WAL, whole transactions off the Trio thread
- ``redis_db``         -- one coredis client: Lua scripts, bounded calls, typed errors
"""
