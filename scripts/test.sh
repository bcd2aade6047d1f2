#!/usr/bin/env bash
# Runs the whole test suite on the CPU (installs first if needed), one test file per
# pytest-xdist worker, TEST_WORKERS of them at once (default 2, the CI machine's cores).
#   bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec python3 -m pytest -q -n "${TEST_WORKERS:-2}" --dist loadfile tests "$@"
