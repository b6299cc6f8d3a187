"""Incarnation: one Spot instance on this node, its task, timers and context; the catalog.

=====================  ==================================================================
``host``               ``Host``: one incarnation's lanes, turns, and when it closes
``building``           its instance: the factory, ``on_activate``/``on_create``, a failed
                       activation's ``on_close``
``close_requests``     how a close begins: a BeginClose that succeeded, ``ctx.close()``,
                       a lost lease
``closing``            how it ends: ``on_close``, Release, the catalog, the queued work
``first_turn``         the restored first record of a cold activation: its cleanup after
                       the turn, who waits for it
``handler_turn``       one message's turn: the checks before it, the handler, the reply
                       (withheld past the lease deadline)
``work``               the items a host runs as turns: ``MessageWork``, timer ticks
``moving``             ``Move``: the source side of a relocation -- seal, hold, unseal,
                       finish
``timers``             a host's timers and their ticks as turns
``timer_firing``       the due ticks queued on the application lane (not past the lease)
``context``            ``SpotContext`` (what a Spot instance gets) and ``TimerHandle``
``app_calls``          calling application code: hooks, ``on_close``, replies, errors
``catalog``            the node's local incarnations and creation attempts; their nurseries,
                       the idle sweep and shutdown
=====================  ==================================================================
"""
