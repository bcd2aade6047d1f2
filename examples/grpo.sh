#!/usr/bin/env bash
# GRPO walk-through, offline, on the CPU: a tiny model learns to add two digits from a reward that checks the sum.
#
#   bash examples/grpo.sh
#
# 1. addition records ("3+4=" -> "7", every pair of digits), written by this script, and a 300-token tokenizer
#    trained on them (tools/train_tokenizer.py)
# 2. preprocess_data.py tokenizes them as instruction data (AlpacaStyleInstructionHandler, no template): the
#    prompt is "a+b=", the reply the sum, one record per sequence (no --pack: GRPO reads prompts)
# 3. a brief SFT from random weights (--stage sft, SFT_ITERS iterations): the model learns the format and some
#    sums, not all
# 4. GRPO from that model (--stage grpo, 2 processes, DP=2): per prompt --num-generations 8 samples from the
#    model being trained, rewarded 1 when the number equals the reply (--reward-funcs gsm8k_accuracy reads the
#    reference from the record's reply), advantages normalised per group; the mean reward rises
# 5. the two stages summarised; the script fails unless SFT's loss fell and GRPO's mean reward rose
#
# Environment: OUT (outputs/grpo), SFT_ITERS (100), GRPO_ITERS (80). Under a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

OUT=${OUT:-outputs/grpo}
SFT_ITERS=${SFT_ITERS:-100} GRPO_ITERS=${GRPO_ITERS:-80}
rm -rf "$OUT" && mkdir -p "$OUT"
export OMP_NUM_THREADS=1
quiet() { grep -v -E "^W[0-9]+ |OMP_NUM_THREADS|^\*+$" || true; }

echo "== 1. addition records and a tokenizer"
python3 - "$OUT" <<'PY'
import json, sys

out = sys.argv[1]
records = [{"instruction": f"{a}+{b}=", "output": str(a + b)} for a in range(10) for b in range(10)]
with open(f"{out}/sums.jsonl", "w") as f:
    f.writelines(json.dumps(r) + "\n" for r in records)
print(f"{len(records)} records in {out}/sums.jsonl")
PY
python3 tools/train_tokenizer.py --input "$OUT/sums.jsonl" --output-dir "$OUT/tokenizer" --vocab-size 300 \
    --json-keys instruction output | tail -1

echo "== 2. preprocess_data.py: instruction records, one per sequence"
python3 preprocess_data.py --input "$OUT/sums.jsonl" --handler-name AlpacaStyleInstructionHandler \
    --prompt-type empty --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$OUT/tokenizer" \
    --seq-length 16 --output-prefix "$OUT/data/sums" --workers 1 | tail -1

MODEL=(
    --num-layers 2 --hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 4 --seq-length 16
    --max-position-embeddings 16 --position-embedding-type rope --normalization RMSNorm --swiglu
    --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --make-vocab-size-divisible-by 1
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$OUT/tokenizer" --prompt-type empty
    --data-path "$OUT/data/sums" --is-instruction-dataset --device cpu --num-workers 0 --eval-iters 0 --seed 1234
)

echo "== 3. SFT from random weights, $SFT_ITERS iterations"
python3 posttrain_gpt.py "${MODEL[@]}" --stage sft --micro-batch-size 16 --global-batch-size 16 \
    --train-iters "$SFT_ITERS" --lr 3e-3 --lr-decay-style constant --clip-grad 1.0 --log-interval 10 \
    --save "$OUT/sft" --save-interval "$SFT_ITERS" 2>&1 | quiet > "$OUT/sft.log"
grep -E "iteration +[0-9]+/" "$OUT/sft.log" | python3 examples/posttrain_metrics.py --columns sft

echo "== 4. GRPO from the SFT model, $GRPO_ITERS iterations on 2 processes (DP=2)"
torchrun --standalone --nproc-per-node 2 posttrain_gpt.py "${MODEL[@]}" --stage grpo --load "$OUT/sft" \
    --finetune --micro-batch-size 4 --global-batch-size 16 --num-generations 8 --max-new-tokens 4 \
    --temperature 1.0 --reward-funcs gsm8k_accuracy --train-iters "$GRPO_ITERS" --lr 1e-3 \
    --lr-decay-style constant --clip-grad 1.0 --log-interval 5 --save "$OUT/grpo" --save-interval "$GRPO_ITERS" \
    2>&1 | quiet > "$OUT/grpo.log" || { tail -5 "$OUT/grpo.log"; exit 1; }
grep -E "iteration +[0-9]+/" "$OUT/grpo.log" | python3 examples/posttrain_metrics.py --columns grpo

echo "== 5. summary"
python3 examples/posttrain_metrics.py --summary "$OUT/sft.log" "$OUT/grpo.log"
