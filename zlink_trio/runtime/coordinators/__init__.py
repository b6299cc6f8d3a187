"""Coordinators: the operations that change a Spot's authority, one module each.

They all take a :class:`~.node_runtime.NodeRuntime` (the node's state, catalog and
peers) as their first argument and step the lifecycle charts through
:mod:`zlink_trio.runtime.charts`.  Each operation's module holds its local path; the
``remote_*`` modules hold both sides of the commands that carry an operation to
another node (47, 48, 60, 61), and ``inbound`` hands every frame another node sends to
the coordinator that serves it.  They send through ``mesh`` (below them).

=====================  ==================================================================
``node_runtime``       ``NodeRuntime``: ``NodeState`` plus the catalog and the mesh peers
``call_router``        ``CallRouter``, the client's way in: a call's delivery and reply
``manager``            ``SpotManager`` (``node.spots``), the manager's way in: User Spot
                       create / get_or_create / find / close
``inbound``            other nodes' way in: frames 39, 47, 48, 60 and 61 handed to the
                       coordinator that serves each
``routing``            resolve a Spot ID and admit a call (route cache, store, waiting)
``placement``          cold activation, source side: Mesh, type and node; the envelope
``placement_plans``    what placement decided on one claims read, kept for the next
``activation``         cold activation, target side (its chart's steps 9-11): one algorithm,
                       driven as a catalog task (every store) or in the caller's
                       continuation (``memory://``, synchronous hooks)
``create``             User Spot Create / GetOrCreate: resolve, place, compete
``create_operation``   one creation: request root, Reserve, factory, commit or abort --
                       shared with the remote create
``remote_create``      remote User Spot creation: command 47, both sides
``close``              ``spots.close``: here or at the owner, under one deadline
``close_operation``    closing one incarnation on this node -- shared with the
                       target of a remote close
``remote_close``       closing a Spot another node owns: command 48, both sides
``relocation``         ``node.relocate`` / ``node.drain``: planned relocation, source side
``relocation_target``  where a relocating Spot goes
``relocation_capture`` capturing a sealed Spot: state, timers, not-yet-run work
``relocation_payload`` the relocation payload's format (a Relocation Store root)
``remote_relocation``  planned relocation between nodes: command 60, both sides
``remote_operation``   an operator's relocate / drain / undrain asked of another node:
                       command 61
``envelope``           the activation envelope's format (a recovery root)
``reminders``          the node's reminder task: take due reminders of its partitions,
                       deliver each to its Spot
``recovery``           the startup scan: resume or abort what a dead lifecycle left
``node_claim``         NewClaim at startup: one live process per NodeId, a dead
                       predecessor waited out
``lease``              keeping the node's lease, and stopping when it is lost
``claims_refresh``     placement's claims read again ahead of their expiry
=====================  ==================================================================
"""
