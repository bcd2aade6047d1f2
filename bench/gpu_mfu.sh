#!/usr/bin/env bash
# GPU MFU bench: a Llama-3.2-1B-shaped model in bf16, our trainer against transformers + torch.compile.
#
#   bash bench/gpu_mfu.sh                     # the device bench (one device; FSDP2 / TP2 too with 2 devices)
#   TINY=1 bash bench/gpu_mfu.sh              # a tiny model on the CPU: seconds (CI keeps the script working)
#   TINY=1 VARIANTS=on bash bench/gpu_mfu.sh  # ... with the FSDP2 / TP2 variants on 2 CPU processes (gloo)
#   bash bench/gpu_mfu.sh --seq 2048 --steps 20   # any flag of bench/gpu_mfu.py (--help lists them)
#   bash bench/gpu_mfu.sh --fp8-recipe blockwise   # the FP8 row with another recipe (default: tensorwise on FP8 GPUs)
#
# Random weights and --mock-data: no internet, no files written. Prints one JSON line on stdout (logs on
# stderr); bench/gpu_mfu.py's docstring describes the fields. Runs this checkout's code (PYTHONPATH).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="${root}${PYTHONPATH:+:${PYTHONPATH}}"
# fewer fragmentation failures for the 128k-vocabulary logits; a user's own setting wins
export PYTORCH_CUDA_ALLOC_CONF="${PYTORCH_CUDA_ALLOC_CONF:-expandable_segments:True}"

args=(--variants "${VARIANTS:-auto}")
if [[ "${TINY:-0}" == "1" ]]; then
    args+=(--tiny)
fi
exec "${PYTHON:-python}" "${root}/bench/gpu_mfu.py" "${args[@]}" "$@"
