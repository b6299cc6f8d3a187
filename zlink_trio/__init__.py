"""zlink_trio: distributed virtual objects ("Spots") for Trio.

This module is the public surface: everything a user imports comes from here,
re-exported in ``X as X`` form and listed in ``__all__``. Implementation
modules may move; these names stay. ``tests/test_public_api.py`` checks that
every exported name is listed and documented.

Start a node with ``async with zl.open_node(...) as node`` (its options come in groups:
``NetworkOptions``, ``TimingOptions``, ``CapacityOptions``, ``ObservabilityOptions``,
``LifecycleOptions``, ``InjectedOptions``, most with keyword shortcuts); declare Spot types
with ``@zl.instance_spot`` / ``@zl.user_spot`` and ``@zl.handler``; call them
through ``node.client`` and manage User Spots through ``node.spots``. Actors, members
of Entry and User Spots, are declared with ``@zl.actor``, managed through
``node.actors`` and called with ``node.client.request_actor`` (docs/actors.md). Open a
store by URL with ``async with zl.open_store(url) as store`` to read what the
nodes sharing it left there. ``zl.MessageCodec`` is the typed JSON codec the
nodes use, for the JSON a program exchanges elsewhere (an HTTP edge, a store
of its own): the same classes, names and rules as on the wire.

Packages, bottom layer first (imports only point down; ``docs/architecture.md`` tells
why, and each package's ``__init__`` maps its modules):

- ``core``      -- sans-IO values and decisions: identities, errors, records, placement
- ``wire``      -- bytes at the edge: the typed JSON codec, frames, the handshake (sans-IO)
- ``lowlevel``  -- primitives with one home each: parking a task, pooled system randomness
- ``store``     -- the Location and Relocation Stores: protocols, rules, backends by URL
- ``transport`` -- authenticated websocket links between the nodes of a cluster
- ``runtime``   -- everything that awaits on behalf of a node: ``open_node`` and its wings
- ``testing``   -- the public test kit (``docs/testing.md``); ``import zlink_trio`` does
                   not import it
- ``cli``       -- the ``zlink-trio`` command
- ``bench``     -- the benchmark (``python -m zlink_trio.bench``)
- ``samples``   -- the demos and the ShoppingMall sample, on this public API only
"""


from zlink_trio.core.errors import AlreadyExists as AlreadyExists
from zlink_trio.core.errors import CapacityExceeded as CapacityExceeded
from zlink_trio.core.errors import DeadlineExceeded as DeadlineExceeded
from zlink_trio.core.errors import HandlerError as HandlerError
from zlink_trio.core.errors import InvalidConfiguration as InvalidConfiguration
from zlink_trio.core.errors import InvalidOperation as InvalidOperation
from zlink_trio.core.errors import LocalProtocolError as LocalProtocolError
from zlink_trio.core.errors import NodeLost as NodeLost
from zlink_trio.core.errors import NotConfigured as NotConfigured
from zlink_trio.core.errors import NotFound as NotFound
from zlink_trio.core.errors import ProtocolError as ProtocolError
from zlink_trio.core.errors import RemoteProtocolError as RemoteProtocolError
from zlink_trio.core.errors import StaleFence as StaleFence
from zlink_trio.core.errors import StaleRoute as StaleRoute
from zlink_trio.core.errors import StoreUnavailable as StoreUnavailable
from zlink_trio.core.errors import TypeMismatch as TypeMismatch
from zlink_trio.core.errors import Unavailable as Unavailable
from zlink_trio.core.errors import ZLinkError as ZLinkError
from zlink_trio.core.identity import NodeRid as NodeRid
from zlink_trio.core.identity import SpotKind as SpotKind
from zlink_trio.core.lanes import LaneBounds as LaneBounds
from zlink_trio.core.records import ActorRef as ActorRef
from zlink_trio.core.records import SpotRef as SpotRef
from zlink_trio.runtime.actors.manager import ActorManager as ActorManager
from zlink_trio.runtime.calls.client import SpotClient as SpotClient
from zlink_trio.runtime.calls.refs import TypedRef as TypedRef
from zlink_trio.runtime.coordinators.manager import SpotManager as SpotManager
from zlink_trio.runtime.declaration.handlers import handler as handler
from zlink_trio.runtime.declaration.policies import CloseReason as CloseReason
from zlink_trio.runtime.declaration.policies import DisableRelocation as DisableRelocation
from zlink_trio.runtime.declaration.policies import PreserveStateWith as PreserveStateWith
from zlink_trio.runtime.declaration.policies import RecreateOnRelocation as RecreateOnRelocation
from zlink_trio.runtime.declaration.policies import Reject as Reject
from zlink_trio.runtime.declaration.policies import RelocationUnit as RelocationUnit
from zlink_trio.runtime.declaration.policies import SpotRelocationAdapter as SpotRelocationAdapter
from zlink_trio.runtime.declaration.reminder_message import Reminder as Reminder
from zlink_trio.runtime.declaration.spot_types import actor as actor
from zlink_trio.runtime.declaration.spot_types import instance_spot as instance_spot
from zlink_trio.runtime.declaration.spot_types import user_spot as user_spot
from zlink_trio.runtime.incarnation.context import SpotContext as SpotContext
from zlink_trio.runtime.incarnation.context import TimerHandle as TimerHandle
from zlink_trio.runtime.inspection import NodeInspection as NodeInspection
from zlink_trio.runtime.mesh.setup import NetworkOptions as NetworkOptions
from zlink_trio.runtime.node import open_node as open_node
from zlink_trio.runtime.node_handle import Node as Node
from zlink_trio.runtime.observe.setup import ObservabilityOptions as ObservabilityOptions
from zlink_trio.runtime.options import CapacityOptions as CapacityOptions
from zlink_trio.runtime.options import InjectedOptions as InjectedOptions
from zlink_trio.runtime.options import LifecycleOptions as LifecycleOptions
from zlink_trio.runtime.options import TimingOptions as TimingOptions
from zlink_trio.runtime.results import CreateResult as CreateResult
from zlink_trio.runtime.results import CreateState as CreateState
from zlink_trio.runtime.results import DrainResult as DrainResult
from zlink_trio.runtime.results import HostedSpot as HostedSpot
from zlink_trio.runtime.results import NodeStatistics as NodeStatistics
from zlink_trio.runtime.results import RelocationOutcome as RelocationOutcome
from zlink_trio.runtime.results import RelocationResult as RelocationResult
from zlink_trio.store import open_store as open_store
from zlink_trio.wire.codec import EncodedMessage as EncodedMessage
from zlink_trio.wire.codec import MessageCodec as MessageCodec

__version__ = "0.1.0"

__all__ = (
    "ActorManager",
    "ActorRef",
    "AlreadyExists",
    "CapacityExceeded",
    "CapacityOptions",
    "CloseReason",
    "CreateResult",
    "CreateState",
    "DeadlineExceeded",
    "DisableRelocation",
    "DrainResult",
    "EncodedMessage",
    "HandlerError",
    "HostedSpot",
    "InjectedOptions",
    "InvalidConfiguration",
    "InvalidOperation",
    "LaneBounds",
    "LifecycleOptions",
    "LocalProtocolError",
    "MessageCodec",
    "NetworkOptions",
    "Node",
    "NodeInspection",
    "NodeLost",
    "NodeRid",
    "NodeStatistics",
    "NotConfigured",
    "NotFound",
    "ObservabilityOptions",
    "PreserveStateWith",
    "ProtocolError",
    "RecreateOnRelocation",
    "Reject",
    "RelocationOutcome",
    "RelocationResult",
    "RelocationUnit",
    "Reminder",
    "RemoteProtocolError",
    "SpotClient",
    "SpotContext",
    "SpotKind",
    "SpotManager",
    "SpotRef",
    "SpotRelocationAdapter",
    "StaleFence",
    "StaleRoute",
    "StoreUnavailable",
    "TimerHandle",
    "TimingOptions",
    "TypeMismatch",
    "TypedRef",
    "Unavailable",
    "ZLinkError",
    "actor",
    "handler",
    "instance_spot",
    "open_node",
    "open_store",
    "user_spot",
)


def _fix_module_metadata() -> None:
    # Like trio's fixup_module_metadata: users see ``zlink_trio.NotFound`` in
    # reprs and tracebacks, not the private module it happens to live in.
    for name in __all__:
        obj = globals()[name]
        if getattr(obj, "__module__", "").startswith("zlink_trio."):
            obj.__module__ = "zlink_trio"


_fix_module_metadata()
del _fix_module_metadata
