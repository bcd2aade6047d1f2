#!/usr/bin/env bash
# Post-training walk-through, offline, on the CPU: the quick-start model -> SFT (LoRA) -> DPO (LoRA) -> PEFT, and a reward model,
# each a `torchrun posttrain_gpt.py --stage ...` on 2 processes (TP=2), printing the metrics as they move.
#
#   bash examples/posttrain.sh
#
# 1. a few dozen Alpaca-style instruction records and preference pairs, written by this script
# 2. the base model: the quick start's checkpoint and tokenizer when examples/quickstart.sh has run
#    ($QUICKSTART/ckpt), else a model of the quick start's shape pretrained here for BASE_ITERS iterations
#    on this script's own texts, with a 500-token tokenizer trained on them
# 3. preprocess_data.py tokenizes both sets with the alpaca template (AlpacaStyleInstructionHandler,
#    AlpacaStylePairwiseHandler) and that tokenizer
# 4. SFT with LoRA (--stage sft, adapters on qkv/proj/fc1/fc2, the base frozen): the loss counts the answer
#    tokens only; --save holds the adapters alone
# 5. tools/convert_ckpt.py merges the adapters into the base (mg -> mg --lora-load): the SFT model
# 6. DPO with new LoRA adapters on the SFT model (--stage dpo; the reference is the SFT model itself, the
#    adapters switched off, no second copy): rewards/accuracies and rewards/margins rise
# 7. a reward model from the SFT model (--stage orm, a value head on the last token): accuracy rises
# 8. the SFT model exported to Hugging Face and the DPO adapters to PEFT's files (--save-lora-to-hf); with
#    peft installed, transformers + peft answer a prompt from them; the three runs are summarised, and the
#    script fails if a stage did not learn (examples/posttrain_metrics.py)
#
# Environment: QUICKSTART (outputs/quickstart), OUT (outputs/posttrain), BASE_ITERS (30), SFT_ITERS (20),
# DPO_ITERS (20), ORM_ITERS (30). Takes under a minute on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh

QUICKSTART=${QUICKSTART:-outputs/quickstart}
OUT=${OUT:-outputs/posttrain}
BASE_ITERS=${BASE_ITERS:-30} SFT_ITERS=${SFT_ITERS:-20} DPO_ITERS=${DPO_ITERS:-20} ORM_ITERS=${ORM_ITERS:-30}
rm -rf "$OUT" && mkdir -p "$OUT"
export OMP_NUM_THREADS=1
TORCHRUN=(torchrun --standalone --nproc-per-node 2)
SEQ=128  # the quick-start model's --max-position-embeddings

# Keep the trainer's lines (and errors), without torchrun's banners.
quiet() { grep -v -E "^W[0-9]+ |OMP_NUM_THREADS|^\*+$" || true; }

echo "== 1. a tiny instruction set and a tiny preference set, written by this script"
PYTHONPATH=. python3 - "$OUT" <<'PY'
import json, sys

out = sys.argv[1]
words = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
instructions, pairs = [], []
for a in range(1, 7):
    for b in range(1, 7):
        question = {"instruction": "Add the two numbers.", "input": f"{a} and {b}"}
        answer = f"{a} plus {b} is {a + b}."
        instructions.append({**question, "output": answer})
        # preferred: the full sentence; rejected: an unhelpful reply
        pairs.append({**question, "chosen": answer, "rejected": "I would rather not say."})
for i, word in enumerate(words):
    instructions.append({"instruction": "Spell the digit as a word.", "input": str(i), "output": f"{i} is {word}."})
    pairs.append({"instruction": "Spell the digit as a word.", "input": str(i), "chosen": f"{i} is {word}.",
                  "rejected": "Digits are hard."})
for name, records in (("instructions", instructions), ("pairs", pairs)):
    with open(f"{out}/{name}.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
# pretraining text for a base model trained here (and its tokenizer): the records in the alpaca layout
from mindspeed_llm.data.templates import TEMPLATES

alpaca = TEMPLATES["alpaca"]
system = alpaca.system_format.format(content=alpaca.default_system)
with open(f"{out}/texts.jsonl", "w") as f:
    f.writelines(json.dumps({"text": system + alpaca.user_format.format(content=f"{r['instruction']}\n{r['input']}")
                             + r["output"]}) + "\n" for r in instructions * 8)
print(f"{len(instructions)} instruction records, {len(pairs)} preference pairs in {out}")
PY

if [[ -f $QUICKSTART/ckpt/latest_checkpointed_iteration.txt && -f $QUICKSTART/tokenizer/tokenizer.json ]]; then
    echo "== 2. the base model: the quick start's checkpoint $QUICKSTART/ckpt (TP=2, its default NPROC) and tokenizer"
    BASE=$QUICKSTART/ckpt TOKENIZER=$QUICKSTART/tokenizer
else
    echo "== 2. no quick-start model in $QUICKSTART (bash examples/quickstart.sh makes one): pretraining a model"
    echo "      of its shape here, $BASE_ITERS iterations on this script's texts"
    BASE=$OUT/base TOKENIZER=$OUT/tokenizer
    python3 tools/train_tokenizer.py --input "$OUT/texts.jsonl" "$OUT/pairs.jsonl" --output-dir "$TOKENIZER" \
        --vocab-size 500 --json-keys text rejected
    python3 preprocess_data.py --input "$OUT/texts.jsonl" --tokenizer-type PretrainedFromHF \
        --tokenizer-name-or-path "$TOKENIZER" --output-prefix "$OUT/data/texts" --append-eod --workers 1 | tail -1
    # the quick start's model (examples/quickstart.sh MODEL_ARGS)
    MODEL_ARGS=(
        --num-layers 2 --hidden-size 128 --ffn-hidden-size 352 --num-attention-heads 4
        --group-query-attention --num-query-groups 2 --seq-length $SEQ --max-position-embeddings $SEQ
        --position-embedding-type rope --normalization RMSNorm --swiglu --disable-bias-linear
        --untie-embeddings-and-output-weights --attention-dropout 0 --hidden-dropout 0
        --make-vocab-size-divisible-by 1
    )
    "${TORCHRUN[@]}" pretrain_gpt.py "${MODEL_ARGS[@]}" --tensor-model-parallel-size 2 --micro-batch-size 8 \
        --global-batch-size 16 --train-iters "$BASE_ITERS" --lr 3e-3 --min-lr 3e-4 --lr-warmup-iters 5 \
        --lr-decay-style cosine --weight-decay 0.01 --clip-grad 1.0 --seed 1234 --device cpu --num-workers 0 \
        --data-path "$OUT/data/texts_text_document" --split 100,0,0 --eval-iters 0 \
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER" --log-interval 10 \
        --save "$BASE" --save-interval "$BASE_ITERS" 2>&1 | quiet | tee "$OUT/base.log" | grep -E "lm loss|rror"
fi

echo "== 3. preprocess_data.py: instruction set and preference pairs, alpaca template"
for kind in instructions:AlpacaStyleInstructionHandler pairs:AlpacaStylePairwiseHandler; do
    python3 preprocess_data.py --input "$OUT/${kind%%:*}.jsonl" --handler-name "${kind#*:}" --prompt-type alpaca \
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER" --seq-length $SEQ \
        --output-prefix "$OUT/data/${kind%%:*}" --workers 1 | tail -1
done

# What every stage shares: the architecture and weights from a checkpoint (--use-checkpoint-args --finetune),
# TP=2 as the checkpoint, 4 samples (pairs) per step on the CPU.
COMMON=(
    --use-checkpoint-args --finetune --tensor-model-parallel-size 2 --seq-length $SEQ
    --micro-batch-size 4 --global-batch-size 4 --lr-decay-style constant --weight-decay 0 --clip-grad 1.0
    --seed 1234 --device cpu --num-workers 0 --eval-iters 0
    --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER" --prompt-type alpaca --log-interval 5
)
# stage LOG ARGS...: run posttrain_gpt.py, keep its log, show its iteration lines
stage() {
    local name=$1; shift
    if ! "${TORCHRUN[@]}" posttrain_gpt.py "${COMMON[@]}" "$@" 2>&1 | quiet > "$OUT/$name.log"; then
        tail -5 "$OUT/$name.log"; echo "--stage $name failed: see $OUT/$name.log"; exit 1
    fi
    grep -E "iteration +[0-9]+/" "$OUT/$name.log" | python3 examples/posttrain_metrics.py --columns "$name"
}

LORA=(--lora-r 8 --lora-alpha 16 --lora-target-modules linear_qkv linear_proj linear_fc1 linear_fc2)

echo "== 4. SFT with LoRA (r 8 on qkv/proj/fc1/fc2, the base frozen), $SFT_ITERS iterations from $BASE"
stage sft --stage sft --is-instruction-dataset --data-path "$OUT/data/instructions" --no-pad-to-seq-lengths \
    --load "$BASE" "${LORA[@]}" --lr 2e-3 --train-iters "$SFT_ITERS" --save "$OUT/sft_lora" --save-interval "$SFT_ITERS"
du -sh "$OUT/sft_lora" "$BASE" | awk '{printf "      %s %s\n", $1, $2}'  # the adapters only, beside the base

echo "== 5. the SFT adapters merged into the base (tools/convert_ckpt.py mg -> mg --lora-load): the SFT model"
convert() {
    python3 tools/convert_ckpt.py "$@" > "$OUT/convert.log" 2>&1 || { tail -5 "$OUT/convert.log"; exit 1; }
    tr '\r' '\n' < "$OUT/convert.log" | tail -1
}
convert --load-model-type mg --save-model-type mg --target-tensor-parallel-size 2 --load-dir "$BASE" \
    --lora-load "$OUT/sft_lora" --save-dir "$OUT/sft"

echo "== 6. DPO with new LoRA adapters on the SFT model (the reference: the SFT model, adapters off), $DPO_ITERS iterations"
stage dpo --stage dpo --is-pairwise-dataset --data-path "$OUT/data/pairs" --dpo-beta 0.1 \
    --load "$OUT/sft" "${LORA[@]}" --lr 1e-3 --train-iters "$DPO_ITERS" --save "$OUT/dpo" --save-interval "$DPO_ITERS"

echo "== 7. a reward model from the SFT model (value head on the last token, Bradley-Terry), $ORM_ITERS iterations"
stage orm --stage orm --is-pairwise-dataset --data-path "$OUT/data/pairs" \
    --load "$OUT/sft" --lr 1e-4 --train-iters "$ORM_ITERS" --save "$OUT/orm" --save-interval "$ORM_ITERS"

echo "== 8. export: the SFT model -> Hugging Face ($OUT/sft_hf), the DPO adapters -> PEFT ($OUT/dpo_peft)"
convert --load-model-type mg --save-model-type hf --model-type-hf llama2 --load-dir "$OUT/sft" --save-dir "$OUT/sft_hf"
cp "$TOKENIZER"/* "$OUT/sft_hf/"
convert --load-model-type mg --save-model-type hf --model-type-hf llama2 --load-dir "$OUT/sft" \
    --lora-load "$OUT/dpo" --save-lora-to-hf --save-dir "$OUT/dpo_peft"
ls "$OUT/dpo_peft" | sed 's/^/      /'
if python3 -c "import peft" 2>/dev/null; then
    echo "      transformers + peft on the exported files: log p(chosen) - log p(rejected) of a training pair"
    PYTHONPATH=. python3 - "$OUT" 2> "$OUT/peft.log" <<'PY' || { tail -5 "$OUT/peft.log"; exit 1; }
import json
import sys

import peft
import torch
import transformers

from mindspeed_llm.data.templates import TEMPLATES

out = sys.argv[1]
tokenizer = transformers.AutoTokenizer.from_pretrained(f"{out}/sft_hf")
base = transformers.AutoModelForCausalLM.from_pretrained(f"{out}/sft_hf", dtype=torch.float32)
model = peft.PeftModel.from_pretrained(base, f"{out}/dpo_peft").eval()
pair = json.loads(open(f"{out}/pairs.jsonl").readline())
alpaca = TEMPLATES["alpaca"]
prompt = tokenizer(alpaca.system_format.format(content=alpaca.default_system)
                   + alpaca.user_format.format(content=f"{pair['instruction']}\n{pair['input']}")).input_ids


def log_prob(reply: str) -> float:
    """Sum of log p(reply token | prompt, earlier reply tokens) under the model as it is now."""
    answer = tokenizer(reply).input_ids
    ids = torch.tensor([prompt + answer])
    with torch.no_grad():
        logits = model(input_ids=ids).logits[0, len(prompt) - 1:-1].float()  # [len(answer), vocab]
    return logits.log_softmax(-1).gather(-1, torch.tensor(answer)[:, None]).sum().item()


def margin() -> float:
    return log_prob(pair["chosen"]) - log_prob(pair["rejected"])


with model.disable_adapter():
    before = margin()
print(f"      {pair['input']!r}: {pair['chosen']!r} over {pair['rejected']!r}: the SFT model {before:+.2f} nats, "
      f"with the DPO adapter (PEFT) {margin():+.2f} nats")
PY
fi
python3 examples/posttrain_metrics.py --summary "$OUT/sft.log" "$OUT/dpo.log" "$OUT/orm.log"
