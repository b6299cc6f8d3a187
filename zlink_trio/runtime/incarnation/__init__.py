"""Incarnation: one Spot instance on this node, its task, timers and context; the catalog.

=====================  ==================================================================
``incarnation``        ``Incarnation``: one incarnation's instance, lanes and task -- its
                       building, admission, turns, timers' ticks, close and move -- and
                       ``Move``, the state of a relocation on its source
``work``               the items an incarnation runs as turns: ``MessageWork``, timer ticks
``arrival``            ``Arrival``: how a relocated incarnation arrived -- what a followed
                       message must name, and the operation IDs that already reached it
``first_record``       the durable first record of a cold activation (its first turn
                       writes it) and its cleanup
``timers``             an incarnation's timers (over ``core.timers``) and their ticks
``context``            ``SpotContext`` (what a Spot instance gets) and ``TimerHandle``
``durable_state``      ``DurableState``: ``ctx.state``, the Spot's durable value, loaded
                       before its factory and written under its authority's fence
``owner_writes``       ``OwnerWrites``: the fence an incarnation's durable writes (state,
                       reminders) go with, and when it may write at all
``reminders``          ``ctx.remind`` / ``cancel_reminder`` / ``reminders``: the Spot's
                       durable reminders, written under the same fence
``app_calls``          calling application code: hooks, ``on_close``, replies, errors
``catalog``            the node's local incarnations and creation attempts; their nurseries,
                       the idle sweep and shutdown
=====================  ==================================================================
"""
