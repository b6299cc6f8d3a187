"""OrderWorkflow: domain, application and infrastructure of the order owner.

- ``domain``         -- the pure order rules: events, fold, next step, deterministic IDs
- ``application``    -- the use cases: replay, start, step, continue, rebuild, projection order
- ``infrastructure`` -- OrderWorkflowSpot (the framework adapter), the stores and modules, their
  adapters, the evidence lines and the runner's fixture control
- ``process``        -- ``run_workflow_node``: one Workflow node serving the Spot until cancelled
"""
