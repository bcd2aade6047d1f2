#!/usr/bin/env bash
# Runs the whole test suite on the CPU (installs first if needed).
#   bash scripts/test.sh [extra pytest args]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
exec python3 -m pytest -q tests "$@"
