# The checkpoint conversion actions (ckpt_convert_<model>_<size>_{hf2mcore,mcore2hf}.sh): tools/convert_ckpt.py
# with the family's converter (MODEL_TYPE_HF). Sourced by recipe.sh.
#
# hf2mcore: the recipe sets CKPT_LOAD_DIR (the Hugging Face directory), CKPT_SAVE_DIR, the target layout TP PP
# (EP, ETP, NUM_LAYER_LIST for MoE models, with LAYOUT_ARGS naming their flags), MODEL_TYPE_HF, and HF_MODEL_TYPE
# and HF_CONFIG (the tiny random model SMOKE=1 converts: transformers' model_type and the behaviour fields of
# config.json). mcore2hf: CKPT_LOAD_DIR, CKPT_SAVE_DIR, TOKENIZER_PATH (its files are copied beside the weights)
# and MODEL_TYPE_HF; SMOKE=1 runs the hf2mcore sibling first and checks the round trip is exact.

recipe_hf2mcore() {
    hf2mcore_setup "$HF_MODEL_TYPE" "$HF_CONFIG"
    given_args LAYOUT_ARGS || LAYOUT_ARGS=()
    run_tool tools/convert_ckpt.py \
        --load-model-type hf --save-model-type mg --model-type-hf "$MODEL_TYPE_HF" \
        --target-tensor-parallel-size "$TP" --target-pipeline-parallel-size "$PP" "${LAYOUT_ARGS[@]}" \
        --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"
}

recipe_mcore2hf() {
    mcore2hf_setup
    run_tool tools/convert_ckpt.py \
        --load-model-type mg --save-model-type hf --model-type-hf "$MODEL_TYPE_HF" \
        --load-dir "$CKPT_LOAD_DIR" --save-dir "$CKPT_SAVE_DIR"
    [[ $DRY_RUN == 0 ]] || return 0
    copy_tokenizer_files "$TOKENIZER_PATH" "$CKPT_SAVE_DIR"
    smoke_check_round_trip
}
