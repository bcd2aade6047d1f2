# The generate and evaluate actions (generate_<model>_<size>_ptd.sh: inference.py --task greedy;
# evaluate_<model>_<size>_<task>_ptd.sh: evaluation.py --task <task>), from a converted checkpoint whose
# architecture flags --use-checkpoint-args reads. Sourced by recipe.sh.
#
# The recipe sets CKPT_LOAD_DIR, TOKENIZER_PATH, the layout TP PP (EP, ETP, NUM_LAYER_LIST for MoE models, with
# LAYOUT_ARGS naming their flags), and HF_MODEL_TYPE and HF_CONFIG (the tiny random model SMOKE=1 loads);
# generate: PROMPT, PROMPT_FILE, OUTPUT_FILE, MAX_NEW_TOKENS; evaluate: TASK_DATA_PATH, OUTPUT_FILE,
# EVAL_BATCH_SIZE, MAX_EVAL_SAMPLES (and MAX_NEW_TOKENS for gsm8k and human_eval, whose answers are generated).

# The checkpoint, layout and tokenizer flags of both entries.
_inference_gpt_args() {
    given_args LAYOUT_ARGS || LAYOUT_ARGS=()
    GPT_ARGS=(
        --use-checkpoint-args --load "$CKPT_LOAD_DIR"
        --tensor-model-parallel-size "$TP" --pipeline-model-parallel-size "$PP" "${LAYOUT_ARGS[@]}"
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH"
        "${PRECISION[@]}"
    )
}

recipe_generate() {
    topology_defaults
    precision_default
    PROMPT=${PROMPT:-"The capital of France is"} PROMPT_FILE=${PROMPT_FILE:-} OUTPUT_FILE=${OUTPUT_FILE:-}
    MAX_NEW_TOKENS=${MAX_NEW_TOKENS:-256}
    inference_setup "$HF_MODEL_TYPE" "$HF_CONFIG"
    _inference_gpt_args
    GENERATE_ARGS=(
        --task greedy --max-new-tokens "$MAX_NEW_TOKENS"
        --prompt "$PROMPT" ${PROMPT_FILE:+--prompt-file "$PROMPT_FILE"} ${OUTPUT_FILE:+--output-file "$OUTPUT_FILE"}
    )
    run_inference
}

# $1: the evaluation.py task (mmlu, gsm8k, boolq, human_eval); human_eval runs the generated code.
recipe_evaluate() {
    local task=$1 answers=()
    topology_defaults
    precision_default
    EVAL_BATCH_SIZE=${EVAL_BATCH_SIZE:-4} MAX_EVAL_SAMPLES=${MAX_EVAL_SAMPLES:-}
    inference_setup "$HF_MODEL_TYPE" "$HF_CONFIG" "$task"
    _inference_gpt_args
    if [[ $task == gsm8k || $task == human_eval ]]; then answers+=(--max-new-tokens "$MAX_NEW_TOKENS"); fi
    if [[ $task == human_eval ]]; then answers+=(--allow-code-execution); fi
    EVAL_ARGS=(
        --task "$task" --task-data-path "$TASK_DATA_PATH"
        --evaluation-batch-size "$EVAL_BATCH_SIZE" ${MAX_EVAL_SAMPLES:+--max-eval-samples "$MAX_EVAL_SAMPLES"}
        "${answers[@]}" --output-file "$OUTPUT_FILE"
    )
    run_evaluation
}
