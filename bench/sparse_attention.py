"""DeepSeek Sparse Attention against dense MLA over sequence lengths: speed and memory, same run.

    python bench/sparse_attention.py [--seqs 4096,8192,16384,32768] [--topk 2048] [--hidden 1024]
    python bench/sparse_attention.py --smoke     # hidden 64, sequences 64 and 128, top-k 16: seconds

Models: four MLA layers with a small SwiGLU MLP (the same in both), built with ``build_model`` from a
``TransformerConfig`` at hidden ``h``, ``h / 64`` heads (q/k 32 + rope 16, v 32, q latent h / 2, kv latent
h / 4), micro batch 1, vocabulary 1024:

* ``attention``: dense MLA (``--multi-latent-attention``; SDPA's fused causal kernel), the baseline;
* ``dsa``: the same layers with DeepSeek Sparse Attention (``--experimental-attention-variant dsa``): an
  indexer of 4 heads of 32 keeping each query's top ``--topk`` keys (a fixed k, as V3.2's 2048 at 128k);
* ``dsa_warmup``: DSA under ``--dsa-dense-warmup`` with its indexer loss: dense attention, and the indexer's
  scores and KL over every causal key (V3.2's first stage, O(s^2) by design), for scale.

Defaults: on a GPU bf16, ``h`` 1024, sequences 4k, 8k, 16k, 32k and top-k 2048; on the CPU fp32, ``h`` 256,
sequences 1k, 2k, 4k and top-k 256 (the issue's 2048 of 32k scaled to s/16 of the longest length, about 3
CPU-minutes). Per model and length, as ``bench/linear_attention.py`` measures them (its functions): tokens/s of
a forward + backward (median over interleaved rounds), the megabytes autograd keeps for the backward in the
decoder (``saved_mb``) and the peak allocated above the start (``peak_mb``); ratios to dense MLA at that length;
the memory slope per extra token between the shortest and the longest length.

What to expect: the sparse path keeps O(s k) for the backward (the indices, the gathered rows of one block
at a time), so its slope stays flat in s while the selection's blocked indexer scores cost O(s^2 H_I) time.
On the CPU the per-block gathers and the indexer's score pass are slower than SDPA's fused dense kernel at
these lengths; DSA's speed win needs a fused sparse kernel (FlashMLA's) and sequences far above k.
DSA-CP rows: context parallelism for DSA is not built yet (``--context-parallel-size`` > 1 is refused with
DSA), so there are none; the bench says so in its JSON (``"cp": null``).

A line per length as it finishes and readable tables go to stderr, one JSON line to stdout.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Dict, List, Optional

import torch

from activation_memory import MB  # noqa: F401  (the same megabyte as the other benches)
from core.device import accelerator
from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig
from linear_attention import memory_slopes, print_table, run_length, with_ratios

VOCAB = 1024
MODELS = ("attention", "dsa", "dsa_warmup")
DEFAULTS = {"device": ("4096,8192,16384,32768", 1024, 2048), "cpu": ("1024,2048,4096", 256, 256),
            "smoke": ("64,128", 64, 16)}
WHY = ("the sparse path's per-block gathers and the indexer's blocked score pass against SDPA's one fused kernel: "
       "on the CPU at these lengths the dense kernel is faster; DSA saves memory per token (the slope) and, with "
       "a fused sparse kernel, time once s >> k")


def model_config(name: str, hidden: int, max_seq: int, topk: int, dtype: torch.dtype) -> TransformerConfig:
    """Four MLA layers; ``dsa``/``dsa_warmup`` add the indexer of 4 heads of 32 keeping ``topk`` keys."""
    heads = max(hidden // 64, 1)
    dsa = {} if name == "attention" else dict(
        experimental_attention_variant="dsa", dsa_indexer_n_heads=4, dsa_indexer_head_dim=32, dsa_indexer_topk=topk)
    if name == "dsa_warmup":
        dsa.update(dsa_dense_warmup=True, dsa_indexer_loss_coeff=1.0)
    return TransformerConfig(num_layers=4, hidden_size=hidden, num_attention_heads=heads, ffn_hidden_size=hidden,
                             vocab_size=VOCAB, make_vocab_size_divisible_by=1, max_position_embeddings=max_seq,
                             normalization="RMSNorm", activation="swiglu", hidden_dropout=0.0, attention_dropout=0.0,
                             add_bias_linear=False, params_dtype=dtype, multi_latent_attention=True,
                             q_lora_rank=hidden // 2, kv_lora_rank=hidden // 4, qk_head_dim=32,
                             qk_pos_emb_head_dim=16, v_head_dim=32, rope_interleaved=True, **dsa)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", default=None, help="comma-separated sequence lengths (default: by device)")
    parser.add_argument("--hidden", type=int, default=None, help="model width (default 1024 on a GPU, 256 on CPU)")
    parser.add_argument("--topk", type=int, default=None, help="keys per query (default 2048 on a GPU, 256 on CPU)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, from " + ",".join(MODELS))
    parser.add_argument("--steps", type=int, default=1, help="timed steps per model per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--smoke", action="store_true", help="hidden 64, sequences 64 and 128, top-k 16: seconds")
    args = parser.parse_args(argv)
    acc = accelerator()
    size = "smoke" if args.smoke else ("device" if acc.type != "cpu" else "cpu")
    default_seqs, default_hidden, default_topk = DEFAULTS[size]
    seqs = sorted(int(s) for s in (args.seqs or default_seqs).split(","))
    hidden, topk = args.hidden or default_hidden, args.topk or default_topk
    if topk >= min(seqs):
        parser.error(f"--topk {topk} keeps every key of the shortest sequence {min(seqs)}: choose a smaller one")
    dtype = torch.bfloat16 if acc.type != "cpu" else torch.float32
    names = ["attention"] + [m for m in args.models.split(",") if m in MODELS and m != "attention"]
    models = {name: build_model(model_config(name, hidden, max(seqs), topk, dtype), layout_state(1), acc.device,
                                seed=0).train() for name in names}
    rounds = 1 if args.smoke else args.rounds
    table = with_ratios({seq: run_length(models, seq, args.steps, rounds, acc.device) for seq in seqs})
    slopes = memory_slopes(table)
    header = (f"4 MLA layers + SwiGLU MLP, hidden {hidden}, micro batch 1, vocab {VOCAB}, {str(dtype)[6:]}, device "
              f"{acc.type}, {torch.get_num_threads()} threads, sequences {seqs}, DSA top-k {topk} (indexer 4 x 32). "
              "tok/s: forward + backward; saved MB: kept for the backward in the decoder; peak MB: above the start; "
              "x attn: ratio to dense MLA at that length, this run")
    print_table(table, slopes, header, ["note: " + WHY, "DSA-CP: not built yet (refused), no rows"])
    print(json.dumps({"bench": "sparse_attention", "device": acc.type, "dtype": str(dtype)[6:], "hidden": hidden,
                      "seqs": seqs, "topk": topk, "layers": 4,
                      "table": {str(seq): rows for seq, rows in table.items()}, "memory_slope": slopes, "cp": None}))


if __name__ == "__main__":
    sys.exit(main())
