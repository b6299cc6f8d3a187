"""``python -m zlink_trio.samples.shoppingmall serve [--store URL] [--base-port N]``.

Seeds the default set (``seeds``: a few carts of each prefix, the stock and
the payment methods), starts the four nodes through ``processes`` (one line
each), and runs until SIGINT or SIGTERM; then it stops them all. The stores
are SQLite files in a fresh work directory (or ``--store redis://...``); the
work directory holds the deployment file and one log per node, and its path
is printed first.
"""

from __future__ import annotations

import secrets
import signal
import tempfile
import uuid
from pathlib import Path
from typing import Final

import trio

from zlink_trio.samples.shoppingmall.runner.processes import open_deployment
from zlink_trio.samples.shoppingmall.runner.seeding import apply_seed_plan
from zlink_trio.samples.shoppingmall.runner.topology import plan_deployment, store_urls
from zlink_trio.samples.shoppingmall.seeds import PREFIXES, seed_plan

__all__ = ("DEFAULT_BASE_PORT", "DEMO_CARTS", "new_run_id", "serve")

DEFAULT_BASE_PORT: Final = 8080
#: The carts ``serve`` seeds: ``<prefix>1`` .. ``<prefix>9`` of each prefix.
DEMO_CARTS: Final = tuple(f"{prefix}{n}" for prefix in PREFIXES for n in range(1, 10))


def new_run_id() -> str:
    """A short ID naming one deployment's keys and directory."""
    return f"sm-{uuid.uuid4().hex[:10]}"


async def _run(store: str | None, base_port: int, work_dir: Path) -> None:
    run_id = new_run_id()
    urls = store_urls(store, work_dir, run_id)
    await apply_seed_plan(urls.commerce, seed_plan(DEMO_CARTS))
    deployment = plan_deployment(run_id=run_id, stores=urls, base_port=base_port,
                                 runner_mode=False)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with open_deployment(deployment, work_dir, secret=secrets.token_hex(32)):
            print(f"shoppingmall serving; logs in {work_dir / 'logs'}; seeded carts "
                  f"{', '.join(DEMO_CARTS[::9])} ... (Ctrl-C stops)", flush=True)
            async for _ in signals:
                break
    print("shoppingmall stopped", flush=True)


def serve(store: str | None, base_port: int = DEFAULT_BASE_PORT,
          work_dir: str | None = None) -> int:
    """The ``serve`` subcommand; its exit code."""
    directory = Path(work_dir) if work_dir else Path(tempfile.mkdtemp(prefix="shoppingmall-"))
    print(f"shoppingmall work directory {directory}", flush=True)
    trio.run(_run, store, base_port, directory)
    return 0
