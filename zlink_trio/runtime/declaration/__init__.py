"""Declaration: what a node serves -- Spot types, their handlers and policies, the registry.

Nothing here awaits or holds node state; it is read once, when ``open_node`` starts.

=====================  ==================================================================
``spot_types``         ``@instance_spot`` / ``@user_spot`` and the ``SpotType`` values they
                       attach to a class (kind, stable type, factory, hooks, policy)
``handlers``           ``@handler``: the handler table of a Spot class, dispatch by
                       message type and wire name, hook discovery
``policies``           relocation policies, ``CloseReason``, ``Reject``
``registry``           ``SpotTypeRegistry``: the immutable set of types one node serves
``message_classes``    finding the attrs class of a message that arrived by wire name
``reminder_message``   ``Reminder``: the message a due durable reminder delivers
=====================  ==================================================================
"""
