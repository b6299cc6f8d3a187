"""The runtime layer: everything that awaits on behalf of a node (docs/architecture.md).

Users import what they need from :mod:`zlink_trio`; this map is for those who read
the code.  Imports point one way, and a test fails on any import cycle:
``declaration`` <- ``state`` <- ``incarnation`` / ``mesh.peers`` <-
``coordinators.node_runtime`` <- the coordinators and the mesh handlers <- ``node``.

=====================  ==================================================================
``node``               ``open_node``: one node lifecycle -- claim, serve, drain, remove
``node_handle``        ``Node`` (what ``open_node`` yields)
``inspection``         ``NodeInspection`` (``node.inspection``): hosted Spots, links, idle
                       sweep, and the test hooks the test kit and benchmark use
``sampling``           :func:`~.sampling.sample_node`: a node's gauges, read at scrape time
``results``            what the public API hands back: ``CreateResult``,
                       ``RelocationResult``, ``DrainResult``, ``NodeStatistics``,
                       ``HostedSpot``
``options``            ``open_node``'s option groups (``TimingOptions``, ``CapacityOptions``,
                       ``InjectedOptions``), their keyword shortcuts, ``NodeOptions``
``charts``             the compiled, typed lifecycle charts and ``step()``
``observers``          what a node tells the test kit about its Spots (factory runs,
                       handler turns, closes); empty in production
``crash_points``       ``ZLINK_CRASH_AT``: named steps where a test may kill the process
``state``              ``NodeState``: identity, options, store, caches, lease -- what every
                       part of the runtime reads; the ``zlink_trio`` logger
``declaration/``       what a node serves: Spot types, handlers, policies, the registry
``calls/``             ``node.client`` and ``node.spots``: builders, the delivery a call
                       becomes, completions and their deadlines
``incarnation/``       one Spot on this node: its host task, timers, context; the catalog
``coordinators/``      the operations that change authority: routing, placement, cold
                       activation, create, close, recovery, lease
``mesh/``              this node's side of the links: peers, commands 39/47/48, retained
                       results
``observe/``           structured log fields and the logger tree, metrics (a no-op
                       recorder unless ``open_node(metrics=...)``), the /metrics server
=====================  ==================================================================
"""
