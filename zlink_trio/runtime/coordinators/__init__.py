"""Coordinators: the operations that change a Spot's authority, one module each.

=====================  ==================================================================
``routing``            resolve a Spot ID and admit a call (route cache, store, waiting)
``activation``         cold activation, target side (06 §4.1 steps 9-12)
``first_record``       the durable first record of a cold activation and its cleanup
``create``             User Spot Create / GetOrCreate (06 §3)
``close``              closing a User Spot incarnation (06 §7)
``recovery``           the startup scan: resume or abort what a dead lifecycle left
``lease``              keeping the node's lease, and stopping when it is lost
``crash_points``       ``ZLINK_CRASH_AT``: named steps where a test may kill the process
=====================  ==================================================================
"""
