#!/usr/bin/env bash
# Installs the suite and what its tests need, once; later calls return at once.
#   bash scripts/install.sh
# torch==2.13.0 is installed first and explicitly (a CPU build on these machines);
# the package itself only asks for a torch range that it satisfies.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if "$PYTHON" -c "import torch, transformers, safetensors, pytest, xdist, pyarrow, tensorboard, matplotlib, peft, bitsandbytes, core.datasets.helpers_cpp" 2>/dev/null \
   && [ core/datasets/helpers_cpp*.so -nt csrc/helpers.cpp ] 2>/dev/null; then
  exit 0
fi
"$PYTHON" -m pip install --quiet --disable-pip-version-check "torch==2.13.0"
"$PYTHON" -m pip install --quiet --disable-pip-version-check "pybind11>=2.10" "setuptools>=64" wheel
"$PYTHON" -m pip install --quiet --disable-pip-version-check --no-build-isolation -e ".[test]"
