#!/usr/bin/env bash
# The ShoppingMall smoke (docs/shoppingmall.md, "The smoke"): a thin wrapper of
#   python -m zlink_trio.samples.shoppingmall smoke [--store URL] [...]
# The runner's logic -- readiness waits (100 ms x 300), the Client self-check,
# the evidence-row counts, both markers -- lives in Python (runner/smoke.py),
# so this script and run_smoke.ps1 use the same budget and strings.
# Exit code 0 only when shoppingmall=completed and shoppingmall-placement=completed
# were both printed.
set -euo pipefail
root="$(cd "$(dirname "$0")/../../.." && pwd)"
python="${PYTHON:-$root/.venv/bin/python}"
[ -x "$python" ] || python="python3"
cd "$root"
exec "$python" -m zlink_trio.samples.shoppingmall smoke "$@"
