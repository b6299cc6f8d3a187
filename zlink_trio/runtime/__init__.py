"""The runtime layer: everything that awaits on behalf of a node (docs/architecture.md).

Users import what they need from :mod:`zlink_trio`; this map is for those who read
the code.  The wings and the top-level modules are in one order, and each imports only
parts before it (``tests/test_import_cycles.py`` fails on anything else, type-only
imports included): ``declaration``, ``charts``, ``options``, ``results``,
``observers``, ``crash_points``, ``observe``, ``collector``, ``calls``, ``state``,
``incarnation``,
``mesh``, ``coordinators``, ``actors``, ``sampling``, ``inspection``, ``stopping``, ``node_handle``,
``node``.
The table below follows that order.

=====================  ==================================================================
``declaration/``       what a node serves: Spot types, handlers, policies, the registry
``charts``             the compiled, typed lifecycle charts and ``step()``
``options``            ``open_node``'s option groups (``TimingOptions``, ``CapacityOptions``,
                       ``InjectedOptions``), their keyword shortcuts, ``NodeOptions``
``results``            what the public API hands back: ``CreateResult``,
                       ``RelocationResult``, ``DrainResult``, ``NodeStatistics``,
                       ``HostedSpot``
``observers``          what a node tells the test kit about its Spots (factory runs,
                       handler turns, closes); empty in production
``crash_points``       ``ZLINK_CRASH_AT``: named steps where a test may kill the process
``observe/``           structured log fields and the logger tree, metrics (a no-op
                       recorder unless ``open_node(metrics=...)``), the /metrics server
``collector``          the garbage collector against the lease: what a node freezes out of
                       its view, and when it collects everything
``calls/``             ``node.client``: the client, the delivery a call becomes and the
                       ``Router`` it is handed to, completions and their deadlines
``state``              ``NodeState``: identity, options, store, caches, lease -- what every
                       part of the runtime reads; the ``zlink_trio`` logger
``incarnation/``       one Spot on this node: its host task, first record, timers,
                       context; the catalog
``mesh/``              this node's side of the links: peers, command 39 and round trips,
                       command 20 replies, Message Follow, retained results
``coordinators/``      the operations that change authority: routing, placement, cold
                       activation, create, close, relocation, recovery, lease, with the
                       remote sides of 47/48/60/61; ``node.spots``; the inbound frames
``actors/``            Actors, members of Entry and User Spots (docs/actors.md): the
                       membership driver and ``node.actors``
``sampling``           :func:`~.sampling.sample_node`: a node's gauges, read at scrape time
``inspection``         ``NodeInspection`` (``node.inspection``): hosted Spots, links, idle
                       sweep, and the test hooks the test kit and benchmark use
``stopping``           how a node stops: the stop request, the signals that make one,
                       the move of its Spots to other nodes before closing
``node_handle``        ``Node`` (what ``open_node`` yields)
``node``               ``open_node``: one node lifecycle -- claim, serve, drain, remove
=====================  ==================================================================
"""
