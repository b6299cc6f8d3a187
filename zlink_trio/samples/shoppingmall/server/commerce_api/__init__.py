"""CommerceApi: input validation, idempotency mapping, workflow requests, lookups.

The HTTP edge of the sample: a stateless Starlette app served by Hypercorn on
Trio, on a node that is an object client of the ``shoppingmall.workflow``
Mesh. Its CommerceStateStore (IdempotencyKey -> OrderId, pending then started,
and the cart snapshots) is in ``server/storage/``, which the OrderWorkflow uses too.
Modules, bottom up:

- ``inputs``         -- ``ValidationError``, the 64 KiB bounded body read, the identifier rule
- ``cart``           -- ``CartSnapshot``: the cart JSON the runner seeds and a start reads
- ``markers``        -- the evidence lines an API node prints, verbatim
- ``workflow_calls`` -- the Spot requests to OrderWorkflowSpot: OrderId, Instance intent, Mesh,
  deadline
- ``orders``         -- ``OrderService``: start (mapping, workflow, started), lookup,
  continue, rebuild
- ``http_errors``    -- the error JSON and the status of each outcome (400/404/409/503/504)
- ``app``            -- ``build_app``: the public order API's four routes (Starlette)
- ``readiness``      -- the passive object-route readiness watcher (the Mesh's claims)
- ``process``        -- ``run_api_node``: node, stores, Hypercorn, the readiness lines
"""
