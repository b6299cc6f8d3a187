"""Sans-IO values and decisions: identities, errors, records, lanes, placement, route cache.

Nothing in this package imports trio, reads a clock or does I/O; time is an
argument (``now``) and randomness is injected. A test enforces the rule.
"""
