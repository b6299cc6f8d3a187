"""The Client's entry point: read the config, run the scenario, say how it went.

``python -m zlink_trio.samples.shoppingmall client --config FILE``. Prints
``shoppingmall=completed`` only when every item of the scenario passed;
otherwise ``shoppingmall-client failed cause=...`` and ``shoppingmall-client
last-confirmed ...``, and exits 1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import httpx
import trio

from zlink_trio.samples.shoppingmall.client.api import ApiError, OrderApi, StatusWaitTimeout
from zlink_trio.samples.shoppingmall.client.config import ClientConfig
from zlink_trio.samples.shoppingmall.client.reports import stdout_line
from zlink_trio.samples.shoppingmall.client.scenario import Scenario, ScenarioFailure

__all__ = ("COMPLETED", "first_failure", "main", "run_client")

COMPLETED: Final = "shoppingmall=completed"
#: Seconds per HTTP request.
HTTP_TIMEOUT: Final = 30.0
_FAILURES: Final = (ScenarioFailure, ApiError, StatusWaitTimeout, httpx.HTTPError)


def first_failure(exc: BaseException) -> BaseException:
    """The first scenario failure inside ``exc`` (concurrent steps fail as a group).

    Re-raises ``exc`` when the group holds anything but scenario failures (a bug).
    """
    if isinstance(exc, BaseExceptionGroup):
        leaves = [e for e in _leaves(exc)]
        if all(isinstance(e, _FAILURES) for e in leaves):
            return leaves[0]
        raise exc
    return exc


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for exc in group.exceptions:
        found += _leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc]
    return found


async def run_client(config: ClientConfig) -> bool:
    """Run the scenario; whether every item passed (the marker is printed then)."""
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT) as http:
        scenario = Scenario(config, [OrderApi(http, url) for url in config.apis])
        try:
            await scenario.run()
        except (*_FAILURES, BaseExceptionGroup) as exc:
            cause = first_failure(exc)
            stdout_line(f"shoppingmall-client failed cause={type(cause).__name__}: {cause}")
            stdout_line(f"shoppingmall-client last-confirmed {scenario.last}")
            return False
    stdout_line(COMPLETED)
    return True


def main(config_file: str) -> int:
    """The ``client`` subcommand; its exit code."""
    config = ClientConfig.from_json(Path(config_file).read_text(encoding="utf-8"))
    return 0 if trio.run(run_client, config) else 1
