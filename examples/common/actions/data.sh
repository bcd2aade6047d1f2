# The data conversion action (data_convert_<model>_{pretrain,instruction,pairwise}.sh): preprocess_data.py with
# the model's tokenizer. Sourced by recipe.sh; a recipe sets DATA_INPUT, TOKENIZER_PATH, OUTPUT_PREFIX, WORKERS,
# PROMPT_TYPE (instruction and pairwise sets: the template), MAP_KEYS (pairwise: JSON renaming the data's fields)
# and calls recipe_data pretrain|instruction|pairwise.

recipe_data() {
    local kind=$1 handler
    data_setup "$kind"
    case $kind in
        pretrain) handler=(--json-keys text --append-eod) ;;
        instruction) handler=(--handler-name AlpacaStyleInstructionHandler --prompt-type "$PROMPT_TYPE") ;;
        pairwise) handler=(--handler-name AlpacaStylePairwiseHandler --prompt-type "$PROMPT_TYPE"
                           ${MAP_KEYS:+--map-keys "$MAP_KEYS"}) ;;
        *) echo "recipe_data: unknown kind $kind (pretrain, instruction or pairwise)" >&2; exit 1 ;;
    esac
    [[ $DRY_RUN != 0 ]] || mkdir -p "$(dirname "$OUTPUT_PREFIX")"
    run_tool preprocess_data.py \
        --input "$DATA_INPUT" \
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path "$TOKENIZER_PATH" \
        "${handler[@]}" \
        --output-prefix "$OUTPUT_PREFIX" --workers "$WORKERS" --log-interval 1000
}
