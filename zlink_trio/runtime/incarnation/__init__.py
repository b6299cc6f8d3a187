"""Incarnation: one Spot instance on this node, its task, timers and context; the catalog.

=====================  ==================================================================
``host``               ``Host``: one incarnation's lanes, turns, and when it closes
``closing``            how it ends: ``on_close``, Release, the catalog, the queued work
``handler_turn``       one message's turn: the checks before it, the handler, the reply
                       (withheld past the lease deadline)
``work``               the items a host runs as turns: ``MessageWork``, timer ticks
``moving``             ``Move``: the source side of a relocation -- seal, hold, unseal,
                       finish
``timers``             a host's timers and their ticks as turns
``context``            ``SpotContext`` (what a Spot instance gets) and ``TimerHandle``
``app_calls``          calling application code: hooks, ``on_close``, replies, errors
``catalog``            the node's local incarnations and creation attempts; their nurseries,
                       the idle sweep and shutdown
=====================  ==================================================================
"""
