"""The runtime layer: everything that awaits on behalf of a node.

Node, object server, catalog, Spot host tasks, activation/close/relocation
coordinators, timers and the idle sweep live here (DESIGN.md §1). Modules are
private (``_name.py``); users import what they need from :mod:`zlink_trio`.
"""
