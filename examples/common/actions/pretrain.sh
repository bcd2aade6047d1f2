# The pretrain action (pretrain_<model>_<size>_ptd.sh): torchrun pretrain_gpt.py with the recipe's sizes and
# architecture flags. Sourced by recipe.sh; a recipe sets its variables and calls recipe_pretrain.
#
# The recipe sets: the paths (CKPT_LOAD_DIR, CKPT_SAVE_DIR, DATA_PATH, TOKENIZER_PATH), the layout (TP, PP, and
# EP, ETP, CP, NUM_LAYER_LIST where the model uses them), the sizes SMOKE=1 shrinks (NUM_LAYERS, HIDDEN_SIZE,
# FFN_HIDDEN_SIZE, NUM_HEADS, NUM_KV_HEADS, VOCAB_SIZE, ...), SEQ_LENGTH MBS GBS TRAIN_ITERS, and MODEL_ARGS:
# the architecture flags as text, expanded after the smoke shrink (so "$NUM_LAYERS" is the run's value).
# It may set LR MIN_LR (default 1.25e-6, 1.25e-7) and INIT_METHOD_STD (default 0.02), or TRAIN_ARGS (the
# vocabulary, dropout, batch and optimizer flags; default below), PARALLEL_ARGS (default: TP and PP) and an
# after_setup function (values derived from the shrunk sizes, e.g. layer lists).

recipe_pretrain() {
    topology_defaults
    schedule_defaults 1000
    LR=${LR:-1.25e-6} MIN_LR=${MIN_LR:-1.25e-7} INIT_METHOD_STD=${INIT_METHOD_STD:-0.02}
    pretrain_setup
    run_after_setup
    given_args PARALLEL_ARGS || PARALLEL_ARGS=(--tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP")
    given_args MODEL_ARGS || { echo "$RECIPE_NAME.sh sets no MODEL_ARGS" >&2; exit 1; }
    given_args TRAIN_ARGS || TRAIN_ARGS=(
        --vocab-size "$VOCAB_SIZE" --make-vocab-size-divisible-by 1
        --attention-dropout 0 --hidden-dropout 0 --init-method-std "$INIT_METHOD_STD"
        --micro-batch-size "$MBS" --global-batch-size "$GBS" --train-iters "$TRAIN_ITERS"
        --lr "$LR" --min-lr "$MIN_LR" --lr-decay-style cosine --lr-warmup-fraction 0.01
        --weight-decay 1e-1 --clip-grad 1.0 --adam-beta1 0.9 --adam-beta2 0.95 --seed 1234
        --use-distributed-optimizer "${PRECISION[@]}"
    )
    GPT_ARGS=("${PARALLEL_ARGS[@]}" "${MODEL_ARGS[@]}" "${TRAIN_ARGS[@]}")
    DATA_ARGS=(
        --data-path "$DATA_PATH" --split 100,0,0
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
    )
    OUTPUT_ARGS=(
        --log-interval 1 --save-interval "$SAVE_INTERVAL" --eval-interval "$EVAL_INTERVAL" --eval-iters "$EVAL_ITERS"
        --save "$CKPT_SAVE_DIR" ${CKPT_LOAD_DIR:+--load "$CKPT_LOAD_DIR"}
    )
    run_pretrain
}
