# The ShoppingMall smoke (docs/shoppingmall.md, "The smoke"): a thin wrapper of
#   python -m zlink_trio.samples.shoppingmall smoke [--store URL] [...]
# The runner's logic -- readiness waits (100 ms x 300), the Client self-check,
# the evidence-row counts, both markers -- lives in Python (runner/smoke.py),
# so this script and run_smoke.sh use the same budget and strings.
# Exit code 0 only when shoppingmall=completed and shoppingmall-placement=completed
# were both printed.
$ErrorActionPreference = "Stop"
$root = (Resolve-Path (Join-Path $PSScriptRoot "../../..")).Path
$python = $env:PYTHON
if (-not $python) {
    foreach ($candidate in @("$root/.venv/bin/python", "$root/.venv/Scripts/python.exe")) {
        if (Test-Path $candidate) { $python = $candidate; break }
    }
}
if (-not $python) { $python = "python3" }
Push-Location $root
try {
    & $python -m zlink_trio.samples.shoppingmall smoke @args
    exit $LASTEXITCODE
} finally {
    Pop-Location
}
