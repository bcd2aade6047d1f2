#!/usr/bin/env bash
# Runs the whole test suite on the CPU (installs first if needed) on
# pytest-xdist workers, TEST_WORKERS of them (default 2, the CI machine's cores), a test file per worker
# except where tests/conftest.py spreads a file's tests.
#   bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec python3 -m pytest -q -n "${TEST_WORKERS:-2}" --dist loadgroup tests "$@"
