"""The store's transaction rules as pure functions: the oracle every backend matches.

Each ``txn_*`` function is one store transaction over a plain state object
(dicts of frozen values): it reads and checks every precondition, builds every
new value, and only then writes, so a refusal leaves the state untouched.
Nothing here awaits, reads a clock or does I/O. ``memory://`` runs these
functions as they are, SQLite runs them over lazy views of its tables, and
Redis re-implements them in Lua, reusing the argument checks and error
builders below; the conformance suite and the differential model hold every
backend to their outcomes.

Every state change of an authority record is a step of the SpotAuthority chart
(``authority``), so the chart, not the transactions, says which transitions exist.

Modules (one idea each):

- ``authority``         -- stepping the compiled SpotAuthority chart: a record's new
                           state, and the refusal of a transition the chart lacks
- ``location``          -- :class:`LocationState`, the shared helpers (capacity,
                           owner check, generations), and the authority transactions:
                           Reserve, CommitReady, AbortCreating, BeginClose, Release,
                           RemoveRecoveryPointer, Query, statistics
- ``claims``            -- descriptor claims: NewClaim, Renew, ClosePlacement, Remove,
                           descriptors
- ``relocation_steps``  -- a planned move: BeginRelocation, Seal, Commit, Abort
- ``recovery``          -- startup recovery of incomplete activations: orphans, AdoptOrphan;
                           what dead lifecycles own (DeadOwned) and RemoveDeadClaims
- ``membership``        -- Actor membership: MoveMembership (Join and Leave on one
                           node), members, and the refusals the scripts reuse
- ``operator``          -- the operator's ReleaseExpired and its refusals
- ``state``             -- a Spot's durable state: SaveState, LoadState, ClearState,
                           fenced by the writer's authority
- ``reminders``         -- durable reminders: SetReminder, CancelReminder, Reminders,
                           TakeDueReminders, ReminderDone, DropReminders
- ``relocation_store``  -- :class:`RelocationState`: content-addressed roots and
                           durable activation inboxes
- ``combined``          -- the combined cold-activation transactions over both states
"""
