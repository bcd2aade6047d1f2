# The fine-tuning actions (posttrain_gpt.py from a converted checkpoint; --use-checkpoint-args takes every
# architecture flag from it): recipe_tune full|lora|qlora (tune_<model>_<size>_<method>_ptd.sh, --stage sft on
# an instruction set), recipe_dpo and recipe_orm (dpo_/orm_<model>_<size>_ptd.sh, a pairwise set, from the SFT
# checkpoint) and recipe_grpo (grpo_<model>_<size>_ptd.sh, rollouts rewarded by gsm8k_accuracy). Sourced by
# recipe.sh.
#
# The recipe sets the paths (CKPT_LOAD_DIR, CKPT_SAVE_DIR, DATA_PATH, TOKENIZER_PATH), PROMPT_TYPE, the layout
# TP PP, SEQ_LENGTH MBS GBS TRAIN_ITERS, and HF_MODEL_TYPE and HF_CONFIG (the tiny random model of the family
# SMOKE=1 starts from: transformers' model_type and the behaviour fields of config.json). LoRA recipes also read
# LORA_LOAD (resume the adapters' run), DPO recipes REF_MODEL and PRECOMPUTE_REF, GRPO recipes NUM_GENERATIONS
# and MAX_NEW_TOKENS.

# The flags of every fine-tuning stage: layout, sequence, batch and optimizer ($@: the schedule's flags).
_posttrain_gpt_args() {
    local sequence_parallel=(--sequence-parallel)
    if [[ $1 == --no-sequence-parallel ]]; then sequence_parallel=(); shift; fi
    GPT_ARGS=(
        --use-checkpoint-args
        --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP" "${sequence_parallel[@]}"
        --seq-length "$SEQ_LENGTH" --attention-dropout 0 --hidden-dropout 0
        --micro-batch-size "$MBS" --global-batch-size "$GBS" --train-iters "$TRAIN_ITERS"
        "$@"
        --use-distributed-optimizer "${PRECISION[@]}"
    )
    DATA_ARGS=(
        --data-path "$DATA_PATH"
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
    )
    OUTPUT_ARGS=(
        --log-interval 1 --save-interval "$SAVE_INTERVAL" --eval-interval "$EVAL_INTERVAL" --eval-iters "$EVAL_ITERS"
        --load "$CKPT_LOAD_DIR" --save "$CKPT_SAVE_DIR"
    )
}

# Supervised fine-tuning, $1: full (every weight), lora (adapters r 16, alpha 32 on the four linears, the base
# frozen; --save holds the adapters only) or qlora (the same over an NF4 base).
recipe_tune() {
    local method=$1 start=(--finetune) adapters=()
    topology_defaults
    schedule_defaults 1000
    posttrain_setup "$HF_MODEL_TYPE" "$HF_CONFIG"
    if [[ $method == full ]]; then
        _posttrain_gpt_args --lr 1.25e-6 --min-lr 1.25e-7 --lr-decay-style cosine --lr-warmup-fraction 0.01 \
            --weight-decay 1e-1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
    else
        _posttrain_gpt_args --lr 1e-4 --min-lr 1e-5 --lr-decay-style cosine --lr-warmup-fraction 0.01 \
            --weight-decay 1e-1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
        LORA_LOAD=${LORA_LOAD:-}
        if [[ -n $LORA_LOAD ]]; then start=(--lora-load "$LORA_LOAD"); fi  # the adapters' run resumed
        adapters=(--lora-r 16 --lora-alpha 32 --lora-target-modules linear_qkv linear_proj linear_fc1 linear_fc2)
        if [[ $method == qlora ]]; then adapters+=(--qlora); fi
    fi
    TUNE_ARGS=(
        "${start[@]}" --stage sft --is-instruction-dataset --prompt-type "$PROMPT_TYPE"
        --no-pad-to-seq-lengths "${adapters[@]}"
    )
    run_posttrain
}

# DPO: sigmoid loss, beta 0.1; the reference is a frozen copy of the initial policy unless REF_MODEL names
# another checkpoint; PRECOMPUTE_REF=1 computes its log-probs once and drops it.
recipe_dpo() {
    local reference=()
    topology_defaults
    schedule_defaults 500
    REF_MODEL=${REF_MODEL:-} PRECOMPUTE_REF=${PRECOMPUTE_REF:-0}
    posttrain_setup "$HF_MODEL_TYPE" "$HF_CONFIG" pairwise
    if [[ -n $REF_MODEL ]]; then reference+=(--ref-model "$REF_MODEL"); fi
    if [[ $PRECOMPUTE_REF == 1 ]]; then reference+=(--precompute-ref-log-probs); fi
    _posttrain_gpt_args --lr 5e-7 --min-lr 5e-8 --lr-decay-style cosine --lr-warmup-fraction 0.1 \
        --weight-decay 0 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
    TUNE_ARGS=(
        --finetune --stage dpo --is-pairwise-dataset --prompt-type "$PROMPT_TYPE"
        --dpo-loss-type sigmoid --dpo-beta 0.1 "${reference[@]}"
    )
    run_posttrain
}

# A reward model (ORM): a scalar value head in place of the logits, the Bradley-Terry loss.
recipe_orm() {
    topology_defaults
    schedule_defaults 500
    posttrain_setup "$HF_MODEL_TYPE" "$HF_CONFIG" pairwise
    _posttrain_gpt_args --lr 1e-6 --min-lr 1e-7 --lr-decay-style cosine --lr-warmup-fraction 0.03 \
        --weight-decay 0 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
    TUNE_ARGS=(--finetune --stage orm --is-pairwise-dataset --prompt-type "$PROMPT_TYPE")
    run_posttrain
}

# GRPO: NUM_GENERATIONS samples per prompt (4 under SMOKE=1) of up to MAX_NEW_TOKENS tokens (8 under SMOKE=1),
# no sequence parallelism (a decode step is one token).
recipe_grpo() {
    topology_defaults
    schedule_defaults 100
    NUM_GENERATIONS=${NUM_GENERATIONS:-8} MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-1024}
    posttrain_setup "$HF_MODEL_TYPE" "$HF_CONFIG"
    if [[ $SMOKE == 1 ]]; then NUM_GENERATIONS=4 MAX_NEW_TOKENS=8; fi
    _posttrain_gpt_args --no-sequence-parallel --lr 1e-6 --lr-decay-style constant --weight-decay 0.0 \
        --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.99 --seed 1234
    TUNE_ARGS=(
        --finetune --stage grpo --is-instruction-dataset --prompt-type "$PROMPT_TYPE"
        --num-generations "$NUM_GENERATIONS" --max-new-tokens "$MAX_NEW_TOKENS" --temperature 1.0 --top-p 1.0
        --reward-funcs gsm8k_accuracy --kl-coef 0.001 --clip-ratio 0.2 --clip-ratio-high 0.28 --loss-type grpo
    )
    run_posttrain
}
