# Shared by every recipe under examples/<family>/ (sourced, not run).
#
# A recipe is data: it sets its real sizes and layout in MindSpeed's variables and its model's argument groups
# (arg_group), then calls its action (examples/common/actions/: recipe_pretrain, recipe_hf2mcore, recipe_mcore2hf,
# recipe_data, recipe_tune, recipe_dpo, recipe_orm, recipe_grpo, recipe_generate, recipe_evaluate), which runs
# the *_setup and run_* functions below. They read these switches from the environment:
#
#   SMOKE=1     shrink the recipe to seconds on the CPU: 2 layers, hidden 64, 4 heads (2 KV heads when
#               the model uses GQA), seq 32, vocab 256, 3 iterations, mock data, 1-2 processes
#               (SMOKE_NPROC, default 2). Every behaviour flag of the family is kept (GQA, SwiGLU,
#               RMSNorm, rope theta and scaling, tied/untied, qkv bias, sliding window). A recipe that
#               sets KV_CHANNELS (an explicit head dim, e.g. Gemma's 256) gets 32, which still differs
#               from hidden / heads = 16, so the explicit-head-dim path stays exercised. MoE/MLA recipes'
#               MOE_FFN_HIDDEN_SIZE, FIRST_K_DENSE (1: one dense layer before the MoE one), KV_LORA_RANK,
#               Q_LORA_RANK, the MLA head dims and DSA's indexer (DSA_N_HEADS, DSA_HEAD_DIM, DSA_TOPK) shrink too;
#               DeepSeek-V4's COMPRESSED_PATTERN gets 3 layers per stage, one of each kind (O_GROUPS, O_LORA_RANK,
#               HCA_RATIO, HASH_LAYERS shrink too). EP (expert parallelism, default 1) shrinks
#               to the largest divisor of the recipe's EP that the smoke data-parallel size allows (a multiple
#               of TP when the recipe sets ETP=1: whole experts spread over TP x EP ranks); NUM_LAYER_LIST
#               becomes 2 layers per stage.
#               CP (context parallelism) shrinks to the largest divisor of the recipe's CP that the smoke
#               processes allow (TP and PP then fill what is left), ULYSSES_DEGREE to a divisor of that CP.
#               Outputs go to SMOKE_DIR (default outputs/smoke/<recipe>).
#   CP          pretrain recipes that pass "${CP_ARGS[@]}": the context-parallel size (default 1);
#               CP_ALGO the algorithm (default megatron_cp_algo; ulysses_cp_algo, hybrid_cp_algo with
#               ULYSSES_DEGREE Ulysses ranks per CP group (default 2), kvallgather_cp_algo). CP_ARGS holds
#               --context-parallel-size/--context-parallel-algo, --ulysses-degree-in-cp (hybrid) and
#               --use-cp-send-recv-overlap where the algorithm has a ring. A recipe without CP_ARGS refuses CP > 1.
#               Fine-tuning recipes (posttrain_setup) shrink their layout, sequence, batch and iterations the
#               same way and start from a tiny random model of the family (its behaviour fields kept) converted
#               at the smoke layout, with a tokenizer and an instruction (SFT) or pairwise (DPO, ORM) dataset made
#               by the production tools.
#               Generate and evaluate recipes (inference_setup: inference.py, evaluation.py) keep their flags and
#               load a tiny random model of the family converted at the smoke layout (TP and PP fitted to the
#               smoke processes, EP 1, 8 new tokens), with a tokenizer; an evaluate recipe also gets a tiny
#               benchmark of its task in the published layout and writes the accuracy JSON to SMOKE_DIR/results/.
#   DRY_RUN=1   pretrain recipes: print the torchrun command and check its flags with our one validation
#               pass (mindspeed_llm.arguments) at the recipe's world size, without training. Fine-tuning
#               recipes also run the stage's checks (the converted checkpoint and the dataset must exist);
#               generate and evaluate recipes the checks inference.py / evaluation.py make before building the
#               model (the checkpoint's settings, the task and prompts, the benchmark's files; PP 1 to evaluate).
#               Checkpoint and data conversion recipes print the tools/convert_ckpt.py (preprocess_data.py)
#               command instead of running it.
#   DRY_RUN=argv  print WORLD_SIZE=N, then the pretrain_gpt.py (posttrain_gpt.py, inference.py, evaluation.py)
#               flags one per line (for tests and tools); a SMOKE=1 fine-tuning, generate or evaluate recipe then
#               makes no tiny model or data. Conversion recipes print their tool's flags one per line.
#   LOG_DIR     where logs go (default logs/, as MindSpeed's recipes).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
RECIPE_NAME=$(basename "$0" .sh)
SMOKE=${SMOKE:-0}
DRY_RUN=${DRY_RUN:-0}
LOG_DIR=${LOG_DIR:-logs}
SMOKE_DIR=${SMOKE_DIR:-outputs/smoke/$RECIPE_NAME}
SMOKE_NPROC=${SMOKE_NPROC:-2}
SMOKE_PY="$REPO_ROOT/examples/common/smoke.py"
# The recipe runs the code of the checkout it sits in, whatever else is installed.
export PYTHONPATH="$REPO_ROOT${PYTHONPATH:+:$PYTHONPATH}"

# The argument groups a recipe may give as text (expanded by its action after the smoke shrink) and the arrays
# the actions build: never taken from the environment.
unset MODEL_ARGS TRAIN_ARGS PARALLEL_ARGS LAYOUT_ARGS PRECISION GPT_ARGS DATA_ARGS OUTPUT_ARGS TUNE_ARGS

# MindSpeed's topology variables with their defaults (NPUS_PER_NODE is GPUS_PER_NODE's other name).
topology_defaults() {
    GPUS_PER_NODE=${GPUS_PER_NODE:-${NPUS_PER_NODE:-8}}
    MASTER_ADDR=${MASTER_ADDR:-localhost}
    MASTER_PORT=${MASTER_PORT:-6000}
    NNODES=${NNODES:-1}
    NODE_RANK=${NODE_RANK:-0}
}

# Training runs: save and evaluate every $1 iterations and no evaluation iterations unless the recipe says
# otherwise; bf16.
schedule_defaults() {
    SAVE_INTERVAL=${SAVE_INTERVAL:-$1} EVAL_INTERVAL=${EVAL_INTERVAL:-$1} EVAL_ITERS=${EVAL_ITERS:-0}
    precision_default
}

# bf16 unless the recipe sets PRECISION (an array of flags).
precision_default() {
    if [[ -z ${PRECISION+set} ]]; then PRECISION=(--bf16); fi
}

# A recipe's argument group as text, read from a here-document: arg_group MODEL_ARGS <<'ARGS' ... ARGS.
arg_group() { IFS= read -r -d '' "$1" || true; }

# The argument group named $1, given by the recipe as text ('--flag "$VAR" ...', written as inside an array),
# expanded into the array $1 now, after the smoke shrink; false when the recipe gives none.
given_args() {
    [[ -n ${!1+set} ]] || return 1
    eval "$1=(${!1})"
}

# The recipe's after_setup function, when it has one: values derived from the (shrunk) sizes.
run_after_setup() {
    if declare -F after_setup > /dev/null; then after_setup; fi
}

# A tool run on this machine ($1: the script under the repository root; the rest: its flags). DRY_RUN=1 prints
# the command, DRY_RUN=argv the flags one per line, instead of running it.
run_tool() {
    local script=$1; shift
    if [[ $DRY_RUN == argv ]]; then printf '%s\n' "$@"; return; fi
    if [[ $DRY_RUN == 1 ]]; then echo "python $script $*"; return; fi
    python "$REPO_ROOT/$script" "$@"
}

_min() { echo $(( $1 < $2 ? $1 : $2 )); }

# The largest divisor of $1 that also divides $2 (at least 1).
_common_divisor() {
    local value; value=$(_min "$1" "$2")
    while (( value > 1 && ($1 % value || $2 % value) )); do value=$(( value - 1 )); done
    echo $(( value < 1 ? 1 : value ))
}

# The smoke run's expert-parallel size: EP fitted to data-parallel size $1. With ETP=1 (whole experts
# over the TP ranks) the EP group spans whole TP groups, so EP stays a multiple of TP.
_smoke_expert_parallel() {
    if [[ ${ETP:-} == 1 && $TP -gt 1 ]]; then
        echo $(( TP * $(_common_divisor $(( EP / TP )) "$1") ))
    else
        _common_divisor "$EP" "$1"
    fi
}

# Pretraining: shrink the sizes under SMOKE=1, then derive WORLD_SIZE and DISTRIBUTED_ARGS.
# EP (default 1) is the expert-parallel size; the world size GPUS_PER_NODE x NNODES must tile
# TP x PP x DP with DP a multiple of EP (of EP / TP under ETP=1), which DRY_RUN checks.
pretrain_setup() {
    EP=${EP:-1} CP=${CP:-1} CP_ALGO=${CP_ALGO:-megatron_cp_algo} ULYSSES_DEGREE=${ULYSSES_DEGREE:-2}
    if [[ $SMOKE == 1 ]]; then
        GPUS_PER_NODE=$SMOKE_NPROC NNODES=1 NODE_RANK=0
        CP=$(_common_divisor "$CP" "$SMOKE_NPROC")
        ULYSSES_DEGREE=$(_common_divisor "$ULYSSES_DEGREE" "$CP")
        TP=$(_min "$TP" $(( SMOKE_NPROC / CP )))
        PP=$(_min "$PP" $(( SMOKE_NPROC / (CP * TP) )))
        EP=$(_smoke_expert_parallel $(( SMOKE_NPROC / (CP * TP * PP) )))
        if [[ -n ${NUM_LAYER_LIST:-} ]]; then NUM_LAYER_LIST=$(printf '2%.0s,' $(seq "$PP")); NUM_LAYER_LIST=${NUM_LAYER_LIST%,}; fi
        if (( NUM_KV_HEADS < NUM_HEADS )); then NUM_KV_HEADS=2; else NUM_KV_HEADS=4; fi
        NUM_LAYERS=$(( 2 * PP )) HIDDEN_SIZE=64 FFN_HIDDEN_SIZE=128 NUM_HEADS=4
        SEQ_LENGTH=32 VOCAB_SIZE=256 MBS=1 GBS=4 TRAIN_ITERS=3
        SAVE_INTERVAL=3 EVAL_INTERVAL=3 EVAL_ITERS=1
        if [[ -n ${SLIDING_WINDOW:-} ]]; then SLIDING_WINDOW=8; fi
        if [[ -n ${KV_CHANNELS:-} ]]; then KV_CHANNELS=32; fi
        # MoE and MLA sizes of the recipes that set them (the expert count, top-k and groups stay)
        if [[ -n ${MOE_FFN_HIDDEN_SIZE:-} ]]; then MOE_FFN_HIDDEN_SIZE=32; fi
        if [[ -n ${FIRST_K_DENSE:-} ]]; then FIRST_K_DENSE=1; fi
        if [[ -n ${KV_LORA_RANK:-} ]]; then KV_LORA_RANK=32 QK_HEAD_DIM=16 QK_POS_EMB_HEAD_DIM=8 V_HEAD_DIM=16; fi
        if [[ -n ${Q_LORA_RANK:-} ]]; then Q_LORA_RANK=48; fi
        if [[ -n ${DSA_TOPK:-} ]]; then DSA_N_HEADS=4 DSA_HEAD_DIM=16 DSA_TOPK=8; fi
        # DeepSeek-V4: 3 layers per stage, CSA, HCA and sliding (each kind its flags read), 2 output groups, HCA
        # entries of 8 tokens, one hash-routed layer
        if [[ -n ${COMPRESSED_PATTERN:-} ]]; then
            NUM_LAYERS=$(( 3 * PP )) COMPRESSED_PATTERN=$(printf 'CHS%.0s' $(seq "$PP"))
            if [[ -n ${NUM_LAYER_LIST:-} ]]; then NUM_LAYER_LIST=$(printf '3%.0s,' $(seq "$PP")); NUM_LAYER_LIST=${NUM_LAYER_LIST%,}; fi
            O_GROUPS=2 O_LORA_RANK=16 HCA_RATIO=8 HASH_LAYERS=1
        fi
        PRECISION=()
        CKPT_LOAD_DIR="" CKPT_SAVE_DIR="$SMOKE_DIR/ckpt"
    fi
    _context_parallel_args
    _launch_args
}

# WORLD_SIZE and the torchrun options from the topology variables (one standalone node under SMOKE=1).
_launch_args() {
    NPUS_PER_NODE=$GPUS_PER_NODE
    WORLD_SIZE=$(( GPUS_PER_NODE * NNODES ))
    if [[ $SMOKE == 1 ]]; then
        DISTRIBUTED_ARGS=(--standalone --nproc_per_node "$GPUS_PER_NODE")
    else
        DISTRIBUTED_ARGS=(--nproc_per_node "$GPUS_PER_NODE" --nnodes "$NNODES" --node_rank "$NODE_RANK"
                          --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT")
    fi
}

# Fine-tuning (posttrain_gpt.py): the model comes from the converted checkpoint in CKPT_LOAD_DIR
# (--use-checkpoint-args), whose TP/PP the recipe keeps. Under SMOKE=1: TP and PP fitted to the smoke
# processes, sequence 256 (a templated sample of the tiny corpus is up to 150 tokens), 3 iterations, and
# posttrain-fixture (smoke.py) makes the tiny model of the family ($1: HF model_type; $2: JSON of its
# behaviour fields, as hf2mcore_setup) converted at that layout, the tokenizer and the dataset ($3:
# instruction, the default, for SFT; pairwise for DPO and reward models) tokenized with PROMPT_TYPE, in
# SMOKE_DIR (a SMOKE=1 DPO or ORM recipe starts from this random model, not from an SFT run).
posttrain_setup() {
    local kind=${3:-instruction}
    if [[ $SMOKE == 1 ]]; then
        _smoke_checkpoint_layout
        SEQ_LENGTH=256 MBS=1 GBS=4 TRAIN_ITERS=3 SAVE_INTERVAL=3 EVAL_INTERVAL=3 EVAL_ITERS=0  # 256: whole samples
        CKPT_SAVE_DIR="$SMOKE_DIR/ckpt"
        if [[ $kind == pairwise ]]; then DATA_PATH="$SMOKE_DIR/data/pairs"; else DATA_PATH="$SMOKE_DIR/data/alpaca"; fi
        if [[ $DRY_RUN != argv ]]; then
            python "$SMOKE_PY" posttrain-fixture "$1" "$2" "$PROMPT_TYPE" "$TP" "$PP" "$SEQ_LENGTH" "$SMOKE_DIR" "$kind"
        fi
    fi
    _launch_args
}

# SMOKE=1 runs that start from a converted checkpoint: one node of SMOKE_NPROC processes, TP and PP fitted to
# them, fp32, the tiny model and tokenizer of the smoke fixture (smoke.py) in SMOKE_DIR.
_smoke_checkpoint_layout() {
    GPUS_PER_NODE=$SMOKE_NPROC NNODES=1 NODE_RANK=0
    TP=$(_min "$TP" "$SMOKE_NPROC")
    PP=$(_min "$PP" $(( SMOKE_NPROC / TP )))
    PRECISION=()
    CKPT_LOAD_DIR="$SMOKE_DIR/mg" TOKENIZER_PATH="$SMOKE_DIR/tokenizer"
}

# Generation and evaluation (inference.py, evaluation.py): the model comes from the converted checkpoint in
# CKPT_LOAD_DIR (--use-checkpoint-args) in its layout (TP, PP, EP, ETP, NUM_LAYER_LIST; evaluation.py runs at
# PP 1). Under SMOKE=1: TP and PP fitted to the smoke processes and no expert parallelism (EP 1, ETP and
# NUM_LAYER_LIST dropped), one process per model-parallel rank, MAX_NEW_TOKENS 8, and inference-fixture
# (smoke.py) makes the tokenizer and the tiny model of the family ($1: HF model_type; $2: JSON of its behaviour
# fields, as hf2mcore_setup) converted at that layout in SMOKE_DIR, and with $3 (an evaluation.py --task:
# mmlu, gsm8k, boolq or human_eval) a tiny benchmark of that task in its published layout (TASK_DATA_PATH).
inference_setup() {
    EP=${EP:-1}
    if [[ $SMOKE == 1 ]]; then
        _smoke_checkpoint_layout
        GPUS_PER_NODE=$(( TP * PP )) EP=1 ETP="" NUM_LAYER_LIST="" MAX_NEW_TOKENS=8
        if [[ -n ${3:-} ]]; then TASK_DATA_PATH="$SMOKE_DIR/$3" OUTPUT_FILE="$SMOKE_DIR/results/"; fi
        if [[ $DRY_RUN != argv ]]; then
            python "$SMOKE_PY" inference-fixture "$1" "$2" "$TP" "$PP" "$SMOKE_DIR" ${3:+"$3"}
        fi
    fi
    _launch_args
}

# Generation: torchrun inference.py with GPT_ARGS GENERATE_ARGS, logged to $LOG_DIR/<recipe>.log.
# SMOKE=1 runs on the CPU; DRY_RUN=1 validates the flags and the checkpoint's settings and layout instead.
run_inference() {
    _run_entry inference.py "--device cpu" "validate-inference inference $WORLD_SIZE" \
        "${GPT_ARGS[@]}" "${GENERATE_ARGS[@]}"
}

# Evaluation: torchrun evaluation.py with GPT_ARGS EVAL_ARGS, logged to $LOG_DIR/<recipe>.log. SMOKE=1 runs on
# the CPU; DRY_RUN=1 validates the flags, the checkpoint's settings and the benchmark's files instead.
run_evaluation() {
    _run_entry evaluation.py "--device cpu" "validate-inference evaluation $WORLD_SIZE" \
        "${GPT_ARGS[@]}" "${EVAL_ARGS[@]}"
}

# One entry run: $1 the script; $2 the flags SMOKE=1 appends (words); $3 the smoke.py command (words, the flags
# follow) DRY_RUN=1 validates with; the rest: the entry's flags. DRY_RUN=argv prints WORLD_SIZE and the flags;
# otherwise torchrun, logged to $LOG_DIR/<recipe>.log.
_run_entry() {
    local script=$1 smoke_flags validate; shift
    read -r -a smoke_flags <<< "$1"
    read -r -a validate <<< "$2"
    shift 2
    local argv=("$@")
    if [[ $SMOKE == 1 ]]; then
        argv+=("${smoke_flags[@]}")
        export OMP_NUM_THREADS=1
    fi
    if [[ $DRY_RUN == argv ]]; then
        printf '%s\n' "WORLD_SIZE=$WORLD_SIZE" "${argv[@]}"
        return
    fi
    if [[ $DRY_RUN == 1 ]]; then
        echo "torchrun ${DISTRIBUTED_ARGS[*]} $script ${argv[*]}"
        python "$SMOKE_PY" "${validate[@]}" "${argv[@]}"
        return
    fi
    mkdir -p "$LOG_DIR"
    torchrun "${DISTRIBUTED_ARGS[@]}" "$REPO_ROOT/$script" "${argv[@]}" 2>&1 | tee "$LOG_DIR/$RECIPE_NAME.log"
}

# Fine-tuning: torchrun posttrain_gpt.py with GPT_ARGS DATA_ARGS TUNE_ARGS OUTPUT_ARGS, logged to
# $LOG_DIR/<recipe>.log. SMOKE=1 runs on the CPU; DRY_RUN=1 validates instead of training.
run_posttrain() {
    _run_entry posttrain_gpt.py "--device cpu --num-workers 0" "validate-posttrain $WORLD_SIZE" \
        "${GPT_ARGS[@]}" "${DATA_ARGS[@]}" "${TUNE_ARGS[@]}" "${OUTPUT_ARGS[@]}"
}

# CP_ARGS from CP, CP_ALGO and ULYSSES_DEGREE (see CP above); the ring's send/recv overlap only where a ring runs.
_context_parallel_args() {
    CP_ARGS=(--context-parallel-size "$CP" --context-parallel-algo "$CP_ALGO")
    if [[ $CP_ALGO == hybrid_cp_algo ]]; then CP_ARGS+=(--ulysses-degree-in-cp "$ULYSSES_DEGREE"); fi
    if (( CP > 1 )) && [[ $CP_ALGO == megatron_cp_algo || $CP_ALGO == hybrid_cp_algo ]]; then
        CP_ARGS+=(--use-cp-send-recv-overlap)
    fi
}

# Pretraining: torchrun pretrain_gpt.py with GPT_ARGS DATA_ARGS OUTPUT_ARGS, logged to $LOG_DIR/<recipe>.log.
# SMOKE=1 swaps DATA_ARGS for mock tokens and runs on the CPU; DRY_RUN=1 validates instead of training.
run_pretrain() {
    local data=("${DATA_ARGS[@]}") extra=()
    if [[ $SMOKE == 1 ]]; then
        data=(--mock-data --tokenizer-type NullTokenizer)
        extra=(--device cpu --num-workers 0)
        export OMP_NUM_THREADS=1
    fi
    local argv=("${GPT_ARGS[@]}" "${data[@]}" "${OUTPUT_ARGS[@]}" "${extra[@]}")
    if (( CP > 1 )) && [[ " ${argv[*]} " != *" --context-parallel-size "* ]]; then
        echo "CP=$CP: $RECIPE_NAME.sh does not pass \"\${CP_ARGS[@]}\" in its GPT_ARGS; add it there or unset CP" >&2
        exit 1
    fi
    if [[ $DRY_RUN == argv ]]; then
        printf '%s\n' "WORLD_SIZE=$WORLD_SIZE" "${argv[@]}"
        return
    fi
    if [[ $DRY_RUN == 1 ]]; then
        echo "torchrun ${DISTRIBUTED_ARGS[*]} pretrain_gpt.py ${argv[*]}"
        python "$SMOKE_PY" validate "$WORLD_SIZE" "${argv[@]}"
        return
    fi
    mkdir -p "$LOG_DIR"
    torchrun "${DISTRIBUTED_ARGS[@]}" "$REPO_ROOT/pretrain_gpt.py" "${argv[@]}" 2>&1 | tee "$LOG_DIR/$RECIPE_NAME.log"
}

# Checkpoint conversion HF -> mcore. Under SMOKE=1, writes a tiny random Hugging Face model of the
# family ($1: HF model_type; $2: JSON of the model's behaviour fields) to $SMOKE_DIR/hf and
# converts it to $SMOKE_DIR/mg at TP=2 PP=2, and EP=2 when the recipe's EP is above 1 (the recipe passes
# --target-expert-parallel-size "$EP"). NUM_LAYER_LIST, when set, is dropped (the tiny model is split evenly).
hf2mcore_setup() {
    EP=${EP:-1}
    if [[ $SMOKE == 1 ]]; then
        python "$SMOKE_PY" hf-model "$1" "$2" "$SMOKE_DIR/hf"
        rm -rf "$SMOKE_DIR/mg"  # the smoke run's own output (convert_ckpt never replaces a checkpoint by itself)
        CKPT_LOAD_DIR="$SMOKE_DIR/hf" CKPT_SAVE_DIR="$SMOKE_DIR/mg" TP=2 PP=2 EP=$(( EP > 1 ? 2 : 1 ))
        NUM_LAYER_LIST=""
    fi
}

# Checkpoint conversion mcore -> HF. Under SMOKE=1, runs the sibling hf2mcore recipe in SMOKE mode
# first and converts its mcore checkpoint back; smoke_check_round_trip then compares the tensors.
mcore2hf_setup() {
    if [[ $SMOKE == 1 ]]; then
        local sibling; sibling="$(dirname "$0")/${RECIPE_NAME/mcore2hf/hf2mcore}.sh"
        SMOKE_DIR="$SMOKE_DIR/source" bash "$sibling"
        rm -rf "$SMOKE_DIR/hf"
        CKPT_LOAD_DIR="$SMOKE_DIR/source/mg" CKPT_SAVE_DIR="$SMOKE_DIR/hf" TOKENIZER_PATH=""
    fi
}

smoke_check_round_trip() {
    if [[ $SMOKE == 1 ]]; then
        python "$SMOKE_PY" compare "$SMOKE_DIR/source/hf" "$SMOKE_DIR/hf"
    fi
}

# Data conversion. Under SMOKE=1, writes a tiny corpus ($1: pretrain | instruction | pairwise) and trains a
# 300-token byte-level BPE tokenizer on it (tools/train_tokenizer.py) in $SMOKE_DIR.
data_setup() {
    if [[ $SMOKE == 1 ]]; then
        python "$SMOKE_PY" corpus "$1" "$SMOKE_DIR/corpus.jsonl"
        python "$REPO_ROOT/tools/train_tokenizer.py" --input "$SMOKE_DIR/corpus.jsonl" \
            --output-dir "$SMOKE_DIR/tokenizer" --vocab-size 300 --json-keys text instruction output chosen rejected
        DATA_INPUT="$SMOKE_DIR/corpus.jsonl" TOKENIZER_PATH="$SMOKE_DIR/tokenizer"
        OUTPUT_PREFIX="$SMOKE_DIR/data/$RECIPE_NAME" WORKERS=1
    fi
}

# Copy a Hugging Face tokenizer's files ($1, when given) into a converted model ($2), so that
# AutoTokenizer and AutoModelForCausalLM load from one directory.
copy_tokenizer_files() {
    [[ -n $1 ]] || return 0
    [[ -d $1 ]] || { echo "tokenizer directory $1 not found: copy its tokenizer files into $2 yourself"; return 0; }
    local file
    for file in tokenizer.json tokenizer_config.json tokenizer.model special_tokens_map.json vocab.json merges.txt; do
        if [[ -f $1/$file ]]; then cp "$1/$file" "$2/"; fi
    done
}

# The actions: one body per kind of recipe.
for _action in "$REPO_ROOT"/examples/common/actions/*.sh; do source "$_action"; done
unset _action
