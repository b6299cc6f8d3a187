"""How the public order API reports a failure: one JSON shape, one status per outcome.

Every error body is ``{"error": <name>, "message": <text>}``. ``name`` is
``"ValidationError"`` for refused input, otherwise the name of the
:mod:`zlink_trio` error class the outcome is (``"NotFound"``,
``"Unavailable"``, ``"DeadlineExceeded"``, ...). ``message`` is the error's
own message: what was wrong and what to do.

- 400 -- refused input (:class:`~.inputs.ValidationError`: ``"ValidationError"``), and
  ``zl.InvalidOperation`` (the framework refused an ID; not ``InvalidConfiguration``)
- 404 -- ``zl.NotFound``: no such order (no lookup state, no stream), no such route
- 409 -- ``zl.AlreadyExists`` (an IdempotencyKey reused for another request),
  ``zl.StaleFence``
- 503 -- ``zl.Unavailable`` (the Ready owner cannot be reached, a store cannot be asked:
  ``StoreUnavailable``), ``zl.CapacityExceeded``, ``zl.NotConfigured`` (no node serves
  the order workflow)
- 504 -- ``zl.DeadlineExceeded``
- ``zl.HandlerError`` -- by the ``error_type`` the workflow's handler raised, under that
  name: ``NotFound`` 404; a conflict (``AlreadyExists``, ``StaleFence``,
  ``ExpectedVersionConflict``, ``MappingConflict``) or a command the order's state does
  not take (``InvalidOperation``, ``InvalidCommand``) 409; anything else 500
  ``"HandlerError"``
- 500 -- any other ``zl.ZLinkError``, under its class name

``zl.StaleFence`` is an ``Unavailable`` in the framework's tree, and is
checked first: "re-read and decide again" is a conflict, not an outage.
Exceptions that are not :mod:`zlink_trio` errors or validation errors are bugs
and are not mapped here (Starlette answers them with 500).
"""

from __future__ import annotations

from typing import Final

from starlette.responses import JSONResponse

import zlink_trio as zl
from zlink_trio.samples.shoppingmall.server.commerce_api.inputs import ValidationError

__all__ = ("error_response", "error_status", "json_error")

#: ``HandlerError.error_type`` values that keep their meaning across the Spot boundary.
_HANDLER_STATUS: Final = {
    "NotFound": 404,
    "UnknownOrder": 404,  # the workflow's refusal of an order with no stream: nothing created
    "AlreadyExists": 409,
    "StaleFence": 409,
    "ExpectedVersionConflict": 409,
    "MappingConflict": 409,
    # The input passed the API's checks, so a refusal is the order's state not taking it.
    "InvalidOperation": 409,
    "InvalidCommand": 409,
}


def error_status(exc: ValidationError | zl.ZLinkError) -> tuple[int, str]:
    """The HTTP status and the error name of ``exc`` (module docstring table)."""
    if isinstance(exc, ValidationError):
        return 400, "ValidationError"
    name = type(exc).__name__
    if isinstance(exc, zl.HandlerError):
        status = _HANDLER_STATUS.get(exc.error_type)
        return (500, name) if status is None else (status, exc.error_type)
    status = 500
    if isinstance(exc, zl.InvalidOperation) and not isinstance(exc, zl.InvalidConfiguration):
        status = 400
    elif isinstance(exc, zl.NotFound):
        status = 404
    elif isinstance(exc, zl.AlreadyExists | zl.StaleFence):
        status = 409
    elif isinstance(exc, zl.Unavailable | zl.CapacityExceeded | zl.NotConfigured):
        status = 503
    elif isinstance(exc, zl.DeadlineExceeded):
        status = 504
    return status, name


def json_error(status: int, name: str, message: str) -> JSONResponse:
    """The error body ``{"error": name, "message": message}`` with ``status``."""
    return JSONResponse({"error": name, "message": message}, status_code=status)


def error_response(exc: ValidationError | zl.ZLinkError) -> JSONResponse:
    """The JSON error response for ``exc``."""
    status, name = error_status(exc)
    return json_error(status, name, exc.message)
