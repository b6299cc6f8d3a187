"""zlink_trio: distributed virtual objects ("Spots") for Trio.

This module is the public surface: everything a user imports comes from here,
re-exported in ``X as X`` form and listed in ``__all__``. Implementation
modules may move; these names stay. ``tests/test_public_api.py`` checks that
every exported name is listed and documented.

The node runtime (``open_node``, the Spot decorators, ``SpotManager`` and
``SpotClient``) is not here yet; today the package exposes the values and
errors those APIs are built from.
"""


from zlink_trio.core.errors import AlreadyExists as AlreadyExists
from zlink_trio.core.errors import CapacityExceeded as CapacityExceeded
from zlink_trio.core.errors import DeadlineExceeded as DeadlineExceeded
from zlink_trio.core.errors import HandlerError as HandlerError
from zlink_trio.core.errors import InvalidConfiguration as InvalidConfiguration
from zlink_trio.core.errors import InvalidOperation as InvalidOperation
from zlink_trio.core.errors import LocalProtocolError as LocalProtocolError
from zlink_trio.core.errors import NotConfigured as NotConfigured
from zlink_trio.core.errors import NotFound as NotFound
from zlink_trio.core.errors import ProtocolError as ProtocolError
from zlink_trio.core.errors import RemoteProtocolError as RemoteProtocolError
from zlink_trio.core.errors import StaleFence as StaleFence
from zlink_trio.core.errors import StaleRoute as StaleRoute
from zlink_trio.core.errors import TypeMismatch as TypeMismatch
from zlink_trio.core.errors import Unavailable as Unavailable
from zlink_trio.core.errors import ZLinkError as ZLinkError
from zlink_trio.core.identity import NodeRid as NodeRid
from zlink_trio.core.identity import SpotKind as SpotKind

__version__ = "0.1.0"

__all__ = (
    "AlreadyExists",
    "CapacityExceeded",
    "DeadlineExceeded",
    "HandlerError",
    "InvalidConfiguration",
    "InvalidOperation",
    "LocalProtocolError",
    "NodeRid",
    "NotConfigured",
    "NotFound",
    "ProtocolError",
    "RemoteProtocolError",
    "SpotKind",
    "StaleFence",
    "StaleRoute",
    "TypeMismatch",
    "Unavailable",
    "ZLinkError",
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
