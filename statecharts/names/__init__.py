"""Typed names of every lifecycle chart: ``CHART.st``, ``.ev``, ``.tags``.

Generated from the compiled charts: do not edit.
Regenerate with ``python -m statecharts render docs/statecharts``; CI's
``python -m statecharts check docs/statecharts`` fails when this module differs from
a fresh render.  See :mod:`statecharts._typed` for what the names are for.
"""

from __future__ import annotations

from statecharts.names.actor_membership import ACTOR_MEMBERSHIP as ACTOR_MEMBERSHIP
from statecharts.names.actor_membership import ActorMembershipChart as ActorMembershipChart
from statecharts.names.actor_membership import ActorMembershipEvent as ActorMembershipEvent
from statecharts.names.actor_membership import ActorMembershipEvents as ActorMembershipEvents
from statecharts.names.actor_membership import ActorMembershipState as ActorMembershipState
from statecharts.names.actor_membership import ActorMembershipStates as ActorMembershipStates
from statecharts.names.actor_membership import ActorMembershipTags as ActorMembershipTags
from statecharts.names.close import CLOSE_OPERATION as CLOSE_OPERATION
from statecharts.names.close import CloseOperationChart as CloseOperationChart
from statecharts.names.close import CloseOperationEvent as CloseOperationEvent
from statecharts.names.close import CloseOperationEvents as CloseOperationEvents
from statecharts.names.close import CloseOperationState as CloseOperationState
from statecharts.names.close import CloseOperationStates as CloseOperationStates
from statecharts.names.close import CloseOperationTags as CloseOperationTags
from statecharts.names.cold_activation import COLD_ACTIVATION as COLD_ACTIVATION
from statecharts.names.cold_activation import ColdActivationChart as ColdActivationChart
from statecharts.names.cold_activation import ColdActivationEvent as ColdActivationEvent
from statecharts.names.cold_activation import ColdActivationEvents as ColdActivationEvents
from statecharts.names.cold_activation import ColdActivationState as ColdActivationState
from statecharts.names.cold_activation import ColdActivationStates as ColdActivationStates
from statecharts.names.cold_activation import ColdActivationTags as ColdActivationTags
from statecharts.names.incarnation import INCARNATION as INCARNATION
from statecharts.names.incarnation import IncarnationChart as IncarnationChart
from statecharts.names.incarnation import IncarnationEvent as IncarnationEvent
from statecharts.names.incarnation import IncarnationEvents as IncarnationEvents
from statecharts.names.incarnation import IncarnationState as IncarnationState
from statecharts.names.incarnation import IncarnationStates as IncarnationStates
from statecharts.names.incarnation import IncarnationTags as IncarnationTags
from statecharts.names.node_lifecycle import NODE_LIFECYCLE as NODE_LIFECYCLE
from statecharts.names.node_lifecycle import NodeLifecycleChart as NodeLifecycleChart
from statecharts.names.node_lifecycle import NodeLifecycleEvent as NodeLifecycleEvent
from statecharts.names.node_lifecycle import NodeLifecycleEvents as NodeLifecycleEvents
from statecharts.names.node_lifecycle import NodeLifecycleState as NodeLifecycleState
from statecharts.names.node_lifecycle import NodeLifecycleStates as NodeLifecycleStates
from statecharts.names.node_lifecycle import NodeLifecycleTags as NodeLifecycleTags
from statecharts.names.relocation import PLANNED_RELOCATION as PLANNED_RELOCATION
from statecharts.names.relocation import PlannedRelocationChart as PlannedRelocationChart
from statecharts.names.relocation import PlannedRelocationEvent as PlannedRelocationEvent
from statecharts.names.relocation import PlannedRelocationEvents as PlannedRelocationEvents
from statecharts.names.relocation import PlannedRelocationState as PlannedRelocationState
from statecharts.names.relocation import PlannedRelocationStates as PlannedRelocationStates
from statecharts.names.relocation import PlannedRelocationTags as PlannedRelocationTags
from statecharts.names.spot_authority import SPOT_AUTHORITY as SPOT_AUTHORITY
from statecharts.names.spot_authority import AuthorityState as AuthorityState
from statecharts.names.spot_authority import SpotAuthorityChart as SpotAuthorityChart
from statecharts.names.spot_authority import SpotAuthorityEvent as SpotAuthorityEvent
from statecharts.names.spot_authority import SpotAuthorityEvents as SpotAuthorityEvents
from statecharts.names.spot_authority import SpotAuthorityState as SpotAuthorityState
from statecharts.names.spot_authority import SpotAuthorityStates as SpotAuthorityStates
from statecharts.names.spot_authority import SpotAuthorityTags as SpotAuthorityTags
from statecharts.names.user_create import USER_CREATE as USER_CREATE
from statecharts.names.user_create import UserCreateChart as UserCreateChart
from statecharts.names.user_create import UserCreateEvent as UserCreateEvent
from statecharts.names.user_create import UserCreateEvents as UserCreateEvents
from statecharts.names.user_create import UserCreateState as UserCreateState
from statecharts.names.user_create import UserCreateStates as UserCreateStates
from statecharts.names.user_create import UserCreateTags as UserCreateTags

__all__ = (
    "ACTOR_MEMBERSHIP",
    "CLOSE_OPERATION",
    "COLD_ACTIVATION",
    "INCARNATION",
    "NODE_LIFECYCLE",
    "PLANNED_RELOCATION",
    "SPOT_AUTHORITY",
    "USER_CREATE",
    "ActorMembershipChart",
    "ActorMembershipEvent",
    "ActorMembershipEvents",
    "ActorMembershipState",
    "ActorMembershipStates",
    "ActorMembershipTags",
    "AuthorityState",
    "CloseOperationChart",
    "CloseOperationEvent",
    "CloseOperationEvents",
    "CloseOperationState",
    "CloseOperationStates",
    "CloseOperationTags",
    "ColdActivationChart",
    "ColdActivationEvent",
    "ColdActivationEvents",
    "ColdActivationState",
    "ColdActivationStates",
    "ColdActivationTags",
    "IncarnationChart",
    "IncarnationEvent",
    "IncarnationEvents",
    "IncarnationState",
    "IncarnationStates",
    "IncarnationTags",
    "NodeLifecycleChart",
    "NodeLifecycleEvent",
    "NodeLifecycleEvents",
    "NodeLifecycleState",
    "NodeLifecycleStates",
    "NodeLifecycleTags",
    "PlannedRelocationChart",
    "PlannedRelocationEvent",
    "PlannedRelocationEvents",
    "PlannedRelocationState",
    "PlannedRelocationStates",
    "PlannedRelocationTags",
    "SpotAuthorityChart",
    "SpotAuthorityEvent",
    "SpotAuthorityEvents",
    "SpotAuthorityState",
    "SpotAuthorityStates",
    "SpotAuthorityTags",
    "UserCreateChart",
    "UserCreateEvent",
    "UserCreateEvents",
    "UserCreateState",
    "UserCreateStates",
    "UserCreateTags",
)
