"""Actor membership: one Actor incarnation's place in its container, from create to close.

Theory of operation
-------------------

An Actor belongs, at every moment, to exactly one *container*: the Entry Spot of a
node or a User Spot (docs/actors.md).  Its authority is a membership record in the
Location Store -- an authority record of kind ACTOR that names its container, fenced
by the container owner's lease and by its StoreVersion like any Spot record.  One
chart instance follows one Actor incarnation (one ActorRef) on the node that owns its
container; the runtime keeps its state id and steps it with
``compile(ActorMembership)``.  Each store answer is its own event, so the chart has no
guards.

* ``missing`` -- no record: the initial state, and where a failed create leaves the
  ID.  The runtime keeps no entry for an Actor in it.  ``create`` -> ``joining`` once
  Reserve has committed the record with its container (the container is checked then:
  the Ready record of an Entry or User Spot of this owner; an Instance Spot never has
  members, so that create is InvalidOperation and steps nothing).
* ``joining`` -- the record is Creating and already names its container, so a close
  of the container sees the Actor.  Its factory runs; no turn runs yet.
  ``admitted`` (CommitReady) -> ``member``.  ``create_failed`` (the factory failed or
  declined, or the create's deadline passed; AbortCreating with the same fence) ->
  ``missing``: a create that fails midway leaves the ID free, and the next create is
  a new incarnation with a higher generation.
* ``member`` -- Ready, serving its own turns, one at a time, apart from its
  container's.  Every membership change starts here and only here, one at a time
  (the ``admits_controls`` tag): ``join``, ``leave``, ``begin_relocation``, ``close``.
* ``moving`` -- ``join``: the Actor changes container.  On one node this is one
  fenced store write (MoveMembership; the record names the new container).  To a User
  Spot on another node the Actor moves there with its queue and timers (and its state
  by its relocation policy) under the seal / relay / commit procedure of a Spot move,
  whose order of steps and abort rule are ``PlannedRelocation``'s; the commit names
  the new container, and Message Follow carries calls that reach the old node.
  ``join_committed`` -> ``member`` of the new container.  ``join_failed`` -> ``member``
  of the old container, unchanged: the store refused the write (the container is not
  Ready, or not this owner's) or the move aborted before relay-ready.
* ``relocating`` -- ``begin_relocation``: the Actor moves to another node *without a
  join*: with its container (a SpotWide unit: the Spot and all its members, their
  routes installed in one aggregate commit), after it (a PerActor unit: each member
  on its own, with its own route), or on its own off an Entry Spot (a drain, or a stop
  that drains: the Actor lands on the target node's Entry Spot).
  ``commit_relocation`` -> ``member`` on the target node (same container, or the
  target's Entry Spot).  ``abort_relocation`` (before relay-ready only) -> ``member``
  where it was.
* ``leaving`` -- ``leave``: the Actor returns to the Entry Spot of the node it is on,
  read from that node's descriptor, never parsed from an ID: one MoveMembership on
  this node, never a move between nodes.  ``leave_committed`` -> ``member`` of the
  Entry Spot (already there: the write is idempotent); ``leave_failed`` -> ``member``
  of the old container.
* ``closing`` -- ``close`` once BeginClose has committed (Closing): the same procedure
  as a Spot close -- admission sealed, accepted turns and timers finish, ``on_close``
  runs once.  A refused BeginClose steps nothing: the Actor stays ``member``.  Once
  Closing, the close runs to the end.  ``released`` (Release with the same fence) ->
  ``closed`` (final): the record is gone and its container no longer counts it.
* ``lost`` (final) -- ``lease_lost`` from every live state (the ``live`` tag): this
  node's lease is gone (``NodeLifecycle``), so the Actor stops here and nothing is
  written.  Its record stays, owned by the dead lifecycle, until that NodeId's restart
  recovery or an operator (``zlink-trio release --node``) releases it: calls are
  Unavailable until then and NotFound after, and the Actor is never re-created
  elsewhere behind the application's back.  ``move_released`` ends a move the same
  way: past relay-ready its target died and the target NodeId's restart (or an
  operator) released the record; a move is not resumed.

Why ``relocating`` is a state of its own, not ``moving`` entered by another event:
a join is a membership change the application asked for, and its commit is the
Actor's own; a relocation is started by a Relocate or a drain, keeps the container
(or takes the target's Entry Spot), and a SpotWide one commits with its container's
aggregate commit.  Apart, the diagram and the event names say which procedure ends
the state (``join_committed`` never means "the room moved"), and the events are the
same as the other charts' relocation events.

A move between nodes is stepped on both sides, as ``PlannedRelocation`` is: the
source steps ``join`` (or ``begin_relocation``) and, before relay-ready, the failure;
the target holds the Actor in the same state while it restores it and steps the
commit itself; the source then forgets the Actor without a further step, like an
incarnation disposed by a committed relocation.

The record's stored state is ``SpotAuthority``'s: ``joining`` is Creating;
``member``, ``leaving`` and a ``moving`` on one node are Ready (MoveMembership
changes only the container and the StoreVersion); ``relocating`` and a ``moving``
between nodes are Relocating, Sealed or RelayReady; ``closing`` is Closing;
``missing`` and ``closed`` have no record; ``lost`` leaves the record as it was.

Tags -- the questions the runtime asks of a membership's state:

* ``admits_controls`` (``member``) -- join, leave, close and a relocation may start.
* ``live`` (``joining``, ``member``, ``moving``, ``relocating``, ``leaving``,
  ``closing``) -- the record exists and this node answers for the Actor: a lost lease
  ends it in ``lost``.
"""

from __future__ import annotations

from statemachine import State

from statecharts._base import StrictChart, state_tags

__all__ = ("ActorMembership",)


class ActorMembership(StrictChart):
    """One Actor incarnation's membership: create, join, leave, relocate, close."""

    missing = State(initial=True)
    joining = State()
    member = State()
    moving = State()
    relocating = State()
    leaving = State()
    closing = State()
    # --- terminal outcomes ---
    closed = State(final=True)
    lost = State(final=True)

    # create: Reserve with its container, then CommitReady or AbortCreating
    create = missing.to(joining)
    admitted = joining.to(member)
    create_failed = joining.to(missing)
    # join another User Spot (MoveMembership, or a move to its node)
    join = member.to(moving)
    join_committed = moving.to(member)
    join_failed = moving.to(member)
    # leave for the Entry Spot of the node it is on (MoveMembership, same node)
    leave = member.to(leaving)
    leave_committed = leaving.to(member)
    leave_failed = leaving.to(member)
    # relocation with its container, after it, or off a draining Entry Spot
    begin_relocation = member.to(relocating)
    commit_relocation = relocating.to(member)
    abort_relocation = relocating.to(member)
    # close: BeginClose has committed, then Release
    close = member.to(closing)
    released = closing.to(closed)
    # no store write: a lost lease, or a move released past relay-ready
    move_released = lost.from_(moving, relocating)
    lease_lost = lost.from_(joining, member, moving, relocating, leaving, closing)

    tags = state_tags(
        admits_controls=(member,),
        live=(joining, member, moving, relocating, leaving, closing),
    )
