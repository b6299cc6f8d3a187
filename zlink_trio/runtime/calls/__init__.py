"""Calls: ``node.client`` (and every ``ctx.client``) and the plumbing of a call.

What the client hands a call to is a :class:`~.delivery.Router` (implemented above, by
``coordinators.call_router``); ``node.spots`` is ``coordinators.manager``.

=====================  ==================================================================
``client``             ``SpotClient``: ``send`` / ``request`` builders for direct calls
``refs``               ``TypedRef``: ``client.ref(Cls, id)``, a Spot called through its
                       class, typed by its handlers (a face over ``request``)
``delivery``           ``Delivery`` (one call on its way), ``Intent``, the one reply-type
                       check, and the ``Router`` protocol the client hands calls to
``metered``            ``MeteredRouter``: the router with every call counted and timed
                       (only with ``open_node(metrics=...)``)
``traced``             ``TracedRouter``: the router with every call an OpenTelemetry span
                       (only on a node that traces, ``observe.tracing``)
``builders``           the builder rule: each option once, awaited once
``completion``         ``Completion``: a request's one-shot reply slot
``deadlines``          ``Deadlines``: the node task that keeps waiting requests' deadlines
=====================  ==================================================================
"""
