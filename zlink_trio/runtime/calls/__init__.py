"""Calls: the public call surface -- ``node.client`` and ``node.spots`` -- and its plumbing.

=====================  ==================================================================
``client``             ``SpotClient``: ``send`` / ``request`` builders for direct calls
``delivery``           ``Delivery`` (one call on its way), ``Intent``, the one reply-type
                       check, and the ``Router`` protocol the client hands calls to
``metered``            ``MeteredRouter``: the router with every call counted and timed
                       (only with ``open_node(metrics=...)``)
``manager``            ``SpotManager``: User Spot create / get_or_create / find / close
``builders``           the builder rule: each option once, awaited once
``completion``         ``Completion``: a request's one-shot reply slot
``deadlines``          ``Deadlines``: the node task that keeps waiting requests' deadlines
=====================  ==================================================================
"""
