"""Generation with a KV cache: ``kv_cache.py`` (per-layer cache), ``sampling.py`` (choosing the next token),
``engine.py`` (the decoding loop over batched prompts of different lengths); ``inference.py`` at the repository
root is the command line."""
