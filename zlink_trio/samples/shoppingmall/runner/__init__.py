"""The process runner: ``serve``, the ``smoke`` command, and the node processes.

- ``topology`` -- the four nodes (and the smoke's fixture node), their ports and the five
  store URLs of one deployment
- ``parts`` -- the one place the roles' entry points are looked up (``run_api_node``,
  ``run_workflow_node``, ``FixtureControl``)
- ``processes`` -- start the node processes, report them, stop them (SIGTERM, then kill)
- ``node_main`` -- one node process; in runner mode a Workflow node also serves the hooks
- ``hooks_app`` -- the runner-only ``/self-check/*`` hooks (fixtures, seeds, evidence)
- ``hooks_client`` -- the runner's calls to those hooks
- ``seeding`` -- write a seed plan (``..seeds``) into the CommerceStateStore and modules
- ``load`` -- ``load``: orders/s through both APIs and StartOrder latency
- ``serve`` -- ``serve``: the default seeds and the four processes until interrupted
- ``evidence`` -- the evidence rows verbatim, and counting them in one node log
- ``log_wait`` -- bounded log waits (100 ms x 300), over one log or several, with marks
- ``prepare`` -- the orders the runner prepares before the Client starts (relocation,
  deleted projection, release, terminated owner)
- ``verify`` -- event streams, external effects and evidence rows after the Client
- ``smoke`` -- the smoke's steps as one command, and its two markers
"""
