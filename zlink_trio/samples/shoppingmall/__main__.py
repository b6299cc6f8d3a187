"""``python -m zlink_trio.samples.shoppingmall serve | smoke | client | node``.

- ``serve [--store URL] [--base-port N] [--work-dir DIR] [--lease S]`` -- the four
  processes with the default seeds, until Ctrl-C (``runner.serve``)
- ``smoke [--store URL]`` -- the smoke runner: processes, readiness, Client self-check,
  evidence; prints ``shoppingmall=completed`` and ``shoppingmall-placement=completed``
  on success (``runner.smoke``)
- ``load [--store URL] [--clients N] [--orders N]`` -- orders/s end to end through both
  APIs and StartOrder latency, as one JSON line (``runner.load``)
- ``client --config FILE`` -- the Client self-check alone (``client.program``)
- ``node <NodeId> --deployment FILE`` -- one node process (internal; ``runner.node_main``)
"""

from __future__ import annotations

import argparse
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m zlink_trio.samples.shoppingmall",
                                     description="The ShoppingMall sample.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the four processes until interrupted")
    serve.add_argument("--store", help="sqlite:///DIR (default: a temp dir) or redis://host:port/db")
    serve.add_argument("--base-port", type=int, default=8080,
                       help="api-a's HTTP port; api-b takes the next (0: any free ports)")
    serve.add_argument("--work-dir", help="where the deployment file and logs go")
    serve.add_argument("--lease", type=float,
                       help="every node's lease in seconds (default: the framework's, 10); "
                            "a dead Workflow node takes new orders until it runs out")
    smoke = commands.add_parser("smoke", help="run the smoke test once")
    smoke.add_argument("--store", help="sqlite:///DIR (default: a temp dir) or redis://host:port/db")
    smoke.add_argument("--work-dir", help="keep the stores and logs here")
    smoke.add_argument("--run-id", help="name this run's keys (default: fresh)")
    smoke.add_argument("--keep", action="store_true", help="keep the temp dir on success")
    load = commands.add_parser("load", help="orders/s through both APIs, StartOrder latency")
    load.add_argument("--store", help="sqlite:///DIR (default: a temp dir) or redis://host:port/db")
    load.add_argument("--clients", type=int, default=100, help="concurrent clients (100)")
    load.add_argument("--orders", type=int, default=2000, help="orders in all (2000)")
    client = commands.add_parser("client", help="the client self-check (started by smoke)")
    client.add_argument("--config", required=True)
    node = commands.add_parser("node", help="one node process (started by serve and smoke)")
    node.add_argument("node_id")
    node.add_argument("--deployment", required=True)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the subcommand ``argv`` names; its exit code."""
    args = _parser().parse_args(argv)
    if args.command == "serve":
        from zlink_trio.samples.shoppingmall.runner.serve import serve
        return serve(args.store, args.base_port, args.work_dir, args.lease)
    if args.command == "smoke":
        from zlink_trio.samples.shoppingmall.runner.smoke import smoke
        return smoke(args.store, args.work_dir, args.run_id, args.keep)
    if args.command == "load":
        from zlink_trio.samples.shoppingmall.runner.load import load
        return load(args.store, args.clients, args.orders)
    if args.command == "client":
        from zlink_trio.samples.shoppingmall.client.program import main as client_main
        return client_main(args.config)
    from zlink_trio.samples.shoppingmall.runner.node_main import main as node_main
    return node_main(args.node_id, args.deployment)


if __name__ == "__main__":
    sys.exit(main())
