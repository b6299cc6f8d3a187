"""Primitives the layers above share, each with one home: parking a task, pooled random
bytes, outage episodes in the logs.

Below the store, the transport and the runtime (each may import it), above the
sans-IO layers (it reads the system's randomness and parks Trio tasks, so
``core`` and ``wire`` may not import it).

=================  ====================================================================
``parking``        ``ParkingSlot``: one task parked until another wakes it, with no
                   ``trio.Event`` per wait (a request's reply, a store call's answer, a
                   link's writer, a group commit's followers)
``pooled_random``  ``os.urandom`` read many values per system call and handed out once
                   each (operation IDs, wire operation numbers, websocket masking keys);
                   emptied in a forked child, so a child never repeats its parent's values
``outage``         ``Outage``: one WARNING when a peer's link or a store goes down, a count
                   of the failures at most every 30 s while it stays down, one INFO when it
                   is back (the transport's dials, the Redis and SQLite stores, the lease
                   renewal, the mesh's peer check)
=================  ====================================================================
"""
