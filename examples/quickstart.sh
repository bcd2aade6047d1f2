#!/usr/bin/env bash
# Quick start, offline, on the CPU: real text -> tokenizer -> .bin/.idx -> pretraining on
# 2 processes (TP=2) -> Megatron checkpoint -> Hugging Face model -> a generated sample.
#
#   bash examples/quickstart.sh
#
# 1. a corpus from the docstrings of the installed Python standard library (examples/stdlib_corpus.py)
# 2. a 4000-token byte-level BPE tokenizer (tools/train_tokenizer.py)
# 3. preprocess_data.py -> $OUT/data/stdlib_text_document.bin/.idx
# 4. torchrun pretrain_gpt.py: a tiny Llama (2 layers, hidden 128, GQA), TP=2, TRAIN_ITERS iterations
# 5. tools/convert_ckpt.py: Megatron layout -> safetensors + config.json (+ the tokenizer)
# 6. transformers generates a continuation of "Return the" at the start of a document; the first and
#    last logged training losses and the validation loss are printed, and the script fails when the
#    validation loss is above MAX_VALID_LOSS
#
# Environment: NPROC (2), TRAIN_ITERS (300), OUT (outputs/quickstart), MAX_VALID_LOSS (5.45).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

NPROC=${NPROC:-2}
TRAIN_ITERS=${TRAIN_ITERS:-300}
MAX_VALID_LOSS=${MAX_VALID_LOSS:-5.45}
OUT=${OUT:-outputs/quickstart}
rm -rf "$OUT" && mkdir -p "$OUT"

echo "== 1. corpus from the standard library's docstrings"
python3 examples/stdlib_corpus.py --output "$OUT/corpus.jsonl"
echo "== 2. tokenizer"
python3 tools/train_tokenizer.py --input "$OUT/corpus.jsonl" --output-dir "$OUT/tokenizer" --vocab-size 4000
echo "== 3. preprocess_data.py"
python3 preprocess_data.py --input "$OUT/corpus.jsonl" --tokenizer-type PretrainedFromHF \
  --tokenizer-name-or-path "$OUT/tokenizer" --output-prefix "$OUT/data/stdlib" --append-eod --workers 2

MODEL_ARGS=(
  --num-layers 2 --hidden-size 128 --ffn-hidden-size 352 --num-attention-heads 4
  --group-query-attention --num-query-groups 2 --seq-length 128 --max-position-embeddings 128
  --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
  --untie-embeddings-and-output-weights --attention-dropout 0 --hidden-dropout 0
  --make-vocab-size-divisible-by 1
)
TRAIN_ARGS=(
  --tensor-model-parallel-size "$NPROC" --micro-batch-size 8 --global-batch-size 16
  --train-iters "$TRAIN_ITERS" --lr 1.5e-3 --min-lr 1.5e-4 --lr-warmup-iters 20 --lr-decay-style cosine
  --weight-decay 0.01 --clip-grad 1.0 --seed 1234 --device cpu
  --data-path "$OUT/data/stdlib_text_document" --split 98,2,0
  --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$OUT/tokenizer"
  --log-interval 10 --eval-interval "$TRAIN_ITERS" --eval-iters 4
  --save "$OUT/ckpt" --save-interval "$TRAIN_ITERS"
)
echo "== 4. pretraining a tiny Llama on $NPROC CPU processes (TP=$NPROC), $TRAIN_ITERS iterations"
OMP_NUM_THREADS=1 torchrun --nproc-per-node "$NPROC" pretrain_gpt.py "${MODEL_ARGS[@]}" "${TRAIN_ARGS[@]}" \
  2>&1 | grep -v -E "^W[0-9]+ |OMP_NUM_THREADS|^\*+$" | tee "$OUT/train.log"

echo "== 5. converting $OUT/ckpt (Megatron, TP=$NPROC) to Hugging Face format in $OUT/hf"
python3 tools/convert_ckpt.py --load-model-type mg --save-model-type hf --model-type-hf llama2 \
  --load-dir "$OUT/ckpt" --save-dir "$OUT/hf"
cp "$OUT"/tokenizer/* "$OUT/hf/"

echo "== 6. generating with transformers from the converted model"
python3 - "$OUT" "$MAX_VALID_LOSS" <<'PY'
import re, sys
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

out, max_valid_loss = sys.argv[1], float(sys.argv[2])
log = open(f"{out}/train.log").read()
losses = [float(m) for m in re.findall(r"\| lm loss: ([0-9.E+-]+) \|", log)]
valid_loss = float(re.findall(r"validation loss at iteration \d+ \| lm loss value: ([0-9.E+-]+)", log)[-1])
print(f"first logged loss {losses[0]:.4f}, last logged loss {losses[-1]:.4f}, "
      f"validation loss {valid_loss:.4f} (log(4000) = 8.29)")
tokenizer = AutoTokenizer.from_pretrained(f"{out}/hf")
model = AutoModelForCausalLM.from_pretrained(f"{out}/hf", dtype=torch.float32).eval()
# Training documents follow an end-of-document token (--append-eod), so the prompt starts with one too:
# the model then continues a docstring's first line instead of the middle of some earlier document.
prompt = "Return the"
ids = torch.tensor([[tokenizer.eos_token_id] + tokenizer(prompt).input_ids])
generated = model.generate(ids, max_new_tokens=30, do_sample=False, repetition_penalty=1.3,
                           pad_token_id=tokenizer.pad_token_id or tokenizer.eos_token_id)
print("sample:", repr(tokenizer.decode(generated[0], skip_special_tokens=True)))
if losses[-1] > 0.75 * losses[0]:
    sys.exit("quick start FAILED: the loss did not fall far enough")
if valid_loss > max_valid_loss:
    sys.exit(f"quick start FAILED: validation loss {valid_loss:.4f} is above MAX_VALID_LOSS={max_valid_loss}")
PY
