#!/usr/bin/env bash
# Quick start: train a tiny Llama on the CPU with 2 processes (TP=2), save a
# Megatron-layout checkpoint, convert it to Hugging Face format and let
# `transformers` continue a sequence with the converted model.
#
#   bash examples/quickstart.sh
#
# Data: --mock-data, arithmetic progressions modulo the vocabulary (see
# core/datasets/mock_dataset.py), so the loss falls far below log(V) within
# a few hundred steps. Environment: NPROC (2), TRAIN_ITERS (200), OUT
# (outputs/quickstart). Writes $OUT/ckpt (Megatron layout), $OUT/hf
# (safetensors + config.json) and $OUT/train.log.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

NPROC=${NPROC:-2}
TRAIN_ITERS=${TRAIN_ITERS:-200}
OUT=${OUT:-outputs/quickstart}
rm -rf "$OUT" && mkdir -p "$OUT"

MODEL_ARGS=(
  --num-layers 2 --hidden-size 128 --ffn-hidden-size 352 --num-attention-heads 4
  --group-query-attention --num-query-groups 2 --seq-length 64 --max-position-embeddings 64
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --untie-embeddings-and-output-weights --attention-dropout 0 --hidden-dropout 0
)
TRAIN_ARGS=(
  --tensor-model-parallel-size "$NPROC" --micro-batch-size 8 --global-batch-size 16
  --train-iters "$TRAIN_ITERS" --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 10 --lr-decay-style cosine
  --weight-decay 0.01 --clip-grad 1.0 --seed 1234
  --mock-data --tokenizer-type NullTokenizer --vocab-size 256 --device cpu
  --log-interval 10 --eval-interval "$TRAIN_ITERS" --eval-iters 2
  --save "$OUT/ckpt" --save-interval "$TRAIN_ITERS"
)

echo "== pretraining a tiny Llama on $NPROC CPU processes (TP=$NPROC) for $TRAIN_ITERS iterations"
OMP_NUM_THREADS=1 torchrun --nproc-per-node "$NPROC" pretrain_gpt.py "${MODEL_ARGS[@]}" "${TRAIN_ARGS[@]}" \
  2>&1 | grep -v -E "^W[0-9]+ |OMP_NUM_THREADS|^\*+$" | tee "$OUT/train.log"

echo "== converting $OUT/ckpt (Megatron, TP=$NPROC) to Hugging Face format in $OUT/hf"
python3 tools/convert_ckpt.py --load-model-type mg --save-model-type hf --model-type-hf llama2 \
  --load-dir "$OUT/ckpt" --save-dir "$OUT/hf"

echo "== generating with transformers from the converted model"
python3 - "$OUT" <<'PY'
import re, sys
import torch
from transformers import AutoModelForCausalLM

out = sys.argv[1]
losses = [float(m) for m in re.findall(r"\| lm loss: ([0-9.E+-]+) \|", open(f"{out}/train.log").read())]
print(f"first logged loss {losses[0]:.4f}, last logged loss {losses[-1]:.4f} (log(256) = 5.545)")
model = AutoModelForCausalLM.from_pretrained(f"{out}/hf", dtype=torch.float32).eval()
prompt = torch.tensor([[5, 8, 11, 14, 17]])  # stride 3
generated = model.generate(prompt, max_new_tokens=10, do_sample=False)[0].tolist()
expected = [(5 + 3 * i) % 256 for i in range(15)]
print(f"prompt {prompt[0].tolist()} -> generated {generated[5:]} (expected {expected[5:]})")
if losses[-1] > 0.5 * losses[0]:
    sys.exit("quick start FAILED: the loss did not fall")
PY
