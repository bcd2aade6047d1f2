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
  scores and KL over every causal key (V3.2's first stage, O(s^2) by design), for scale;
* ``v4``: DeepSeek-V4's compressed attention in its layout ``CHSC`` (CSA with entries of 4 and the indexer's
  top ``--topk``, HCA with entries of 128, a sliding layer; a window of 128, one shared key/value head of 64, two
  output groups), run in blocks of queries (``core/transformer/compressed_attention.py``).

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
DSA-CP traffic (``--no-cp`` skips it): the bytes each CP rank receives in one forward at CP 2 and CP 4 for the
longest length, from the selections the ``dsa`` model makes there (one forward at CP 1 gives every layer's
top-k; the load-balanced chunks say which rank holds which queries and keys): DSA's CP gathers every rank's
indexer keys (``index_head_dim`` values per token) and fetches the MLA latents (``kv_lora_rank + rope`` values
per token) of the keys its queries selected from their owners (``core/transformer/mla.py``); the baseline is the
K/V all-gather of ``kvallgather_cp_algo`` (every head's key and value of every other rank's token). The backward
sends the same amounts back (the gradients). ``ratio``: DSA's largest rank over the all-gather. At random
initialisation the indexer's picks are spread over the sequence, so a rank's queries select most keys; a
trained indexer's locality lowers the fetch. CP 2 and 4 equal CP 1 in ``tests/distributed/``.

DeepSeek-V4-CP traffic (``v4_cp``, counted, no model run): the bytes each CP rank receives in one forward of
DeepSeek-V4-Flash's 43 attention layers (one shared key/value head of 512, a window of 128, CSA entries of 4 tokens
with an indexer of 128 dims, HCA entries of 128) at 4x the longest length (at least 2048), at CP 2, 4 and 8 with load-balanced
chunks (``core/transformer/compressed_attention.py``): the window's halo of keys before each chunk, a CSA run's
previous window of compressor rows, and the all-gather of every compressed entry (compressor and indexer), against
an all-gather of the key/value head (already a single head: MQA's, the smallest K/V all-gather there is).

A line per length as it finishes and readable tables go to stderr, one JSON line to stdout.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Dict, List, Optional

import torch

from activation_memory import MB  # the same megabyte as the other benches
from core.device import accelerator
from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig
from linear_attention import memory_slopes, print_table, run_length, with_ratios

VOCAB = 1024
MODELS = ("attention", "dsa", "dsa_warmup", "v4")
DEFAULTS = {"device": ("4096,8192,16384,32768", 1024, 2048), "cpu": ("1024,2048,4096", 256, 256),
            "smoke": ("64,128", 64, 16)}
WHY = ("the sparse path's per-block gathers and the indexer's blocked score pass against SDPA's one fused kernel: "
       "on the CPU at these lengths the dense kernel is faster; DSA saves memory per token (the slope) and, with "
       "a fused sparse kernel, time once s >> k")


def model_config(name: str, hidden: int, max_seq: int, topk: int, dtype: torch.dtype) -> TransformerConfig:
    """Four MLA layers; ``dsa``/``dsa_warmup`` add the indexer of 4 heads of 32 keeping ``topk`` keys; ``v4``: four
    layers of DeepSeek-V4's compressed attention instead."""
    heads = max(hidden // 64, 1)
    if name == "v4":
        return TransformerConfig(num_layers=4, hidden_size=hidden, num_attention_heads=heads, ffn_hidden_size=hidden,
                                 vocab_size=VOCAB, make_vocab_size_divisible_by=1, max_position_embeddings=max_seq,
                                 normalization="RMSNorm", activation="swiglu", hidden_dropout=0.0,
                                 attention_dropout=0.0, add_bias_linear=False, params_dtype=dtype,
                                 compressed_attention_pattern="CHSC", num_query_groups=1, kv_channels=64,
                                 rotary_percent=0.25, rope_interleaved=True, q_lora_rank=hidden // 2,
                                 sliding_window=128, csa_compress_ratio=4, hca_compress_ratio=128,
                                 o_groups=min(2, heads), o_lora_rank=hidden // 4, dsa_indexer_n_heads=4,
                                 dsa_indexer_head_dim=32, dsa_indexer_topk=topk)
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


def layer_selections(model: torch.nn.Module, seq: int, device: torch.device) -> List[torch.Tensor]:
    """Every computing DSA layer's selections in one forward at CP 1: per layer the selected positions
    ``[b, s, k]`` with -1 where a query has fewer keys."""
    layouts = []
    handle = model.decoder.register_forward_pre_hook(lambda _, args: layouts.append(args[2]))
    tokens = torch.randint(0, VOCAB, (1, seq), generator=torch.Generator().manual_seed(seq)).to(device)
    with torch.no_grad():
        model.eval()(tokens)
    handle.remove()
    model.train()
    return [chosen.indices.masked_fill(~chosen.valid, -1) for chosen in layouts[0].dsa_selections.values()]


def cp_traffic(config: TransformerConfig, selections: List[torch.Tensor], seq: int, element: int
               ) -> Dict[str, Dict[str, float]]:
    """Per CP size: megabytes the busiest rank receives in one forward, DSA's (indexer keys + fetched latents)
    against the K/V all-gather's, summed over the layers."""
    from core.transformer.context_parallel import token_positions

    batch, latent = selections[0].size(0), config.kv_lora_rank + config.qk_pos_emb_head_dim
    per_head = config.qk_head_dim + config.qk_pos_emb_head_dim + config.v_head_dim
    rows = {}
    for cp in (2, 4):
        local = seq // cp
        index_gather = (cp - 1) * local * batch * config.dsa_indexer_head_dim * element * len(selections)
        kv_gather = (cp - 1) * local * batch * config.num_attention_heads * per_head * element * len(selections)
        fetch = []
        for rank in range(cp):
            mine = token_positions(seq, cp, rank)
            owned = torch.zeros(seq, dtype=torch.bool)
            owned[mine] = True
            remote = 0
            for chosen in selections:
                picked = chosen[:, mine].flatten().unique()
                picked = picked[picked >= 0]
                remote += int((~owned[picked]).sum())
            fetch.append(remote * batch * latent * element)
        dsa = index_gather + max(fetch)
        rows[f"cp{cp}"] = {"dsa_mb": round(dsa / MB, 3), "index_keys_mb": round(index_gather / MB, 3),
                           "fetched_latents_mb": round(max(fetch) / MB, 3), "kv_allgather_mb": round(kv_gather / MB, 3),
                           "ratio": round(dsa / kv_gather, 3)}
    return rows


V4_FLASH = dict(dim=512, window=128, csa=4, hca=128, index_dim=128, pattern="SS" + "CH" * 20 + "C")


def compressed_cp_traffic(seq: int, element: int, dim: int, window: int, csa: int, hca: int, index_dim: int,
                          pattern: str) -> Dict[str, Dict[str, float]]:
    """Per CP size: megabytes the busiest rank receives in one forward of DeepSeek-V4's attention layers
    (``pattern``), its exchange (window halo, CSA prefixes, entry all-gathers) against an all-gather of the keys."""
    from core.transformer.compressed_attention import aligned_runs
    from core.transformer.context_parallel import token_positions

    layers = {kind: pattern.count(kind) for kind in "SCH"}
    rows = {}
    for cp in (2, 4, 8):
        local = seq // cp
        kv_gather = (cp - 1) * local * dim * element * len(pattern)
        received = []
        for rank in range(cp):
            runs = aligned_runs(token_positions(seq, cp, rank), csa * hca // math.gcd(csa, hca))
            if runs is None:
                raise ValueError(f"{seq} tokens at CP {cp} split windows of {hca} over ranks: use a multiple of "
                                 f"{2 * cp * hca}")
            later = sum(1 for start, _ in runs if start > 0)
            halo = later * (window - 1) * dim * element * len(pattern)
            prefixes = later * csa * (4 * dim + 4 * index_dim) * element * layers["C"]  # [kv; gate], both halves
            entries = (cp - 1) * local * element * (layers["C"] * (dim + index_dim) // csa + layers["H"] * dim // hca)
            received.append((halo + prefixes + entries, halo, prefixes, entries))
        total, halo, prefixes, entries = max(received)
        rows[f"cp{cp}"] = {"v4_mb": round(total / MB, 3), "halo_mb": round(halo / MB, 3),
                           "prefix_mb": round(prefixes / MB, 3), "entries_mb": round(entries / MB, 3),
                           "kv_allgather_mb": round(kv_gather / MB, 3), "ratio": round(total / kv_gather, 3)}
    return rows


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", default=None, help="comma-separated sequence lengths (default: by device)")
    parser.add_argument("--hidden", type=int, default=None, help="model width (default 1024 on a GPU, 256 on CPU)")
    parser.add_argument("--topk", type=int, default=None, help="keys per query (default 2048 on a GPU, 256 on CPU)")
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated, from " + ",".join(MODELS))
    parser.add_argument("--steps", type=int, default=1, help="timed steps per model per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--smoke", action="store_true", help="hidden 64, sequences 64 and 128, top-k 16: seconds")
    parser.add_argument("--no-cp", dest="cp", action="store_false", help="skip the DSA-CP traffic rows")
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
    print_table(table, slopes, header, ["note: " + WHY])
    cp = None
    if args.cp and "dsa" in models:
        seq = max(seqs)
        element = torch.finfo(dtype).bits // 8
        cp = {"seq": seq, "rows": cp_traffic(models["dsa"].config, layer_selections(models["dsa"], seq, acc.device),
                                             seq, element)}
        for name, row in cp["rows"].items():
            print(f"DSA-CP {name} at {seq} tokens, busiest rank receives per forward: {row['dsa_mb']:.2f} MB (indexer "
                  f"keys {row['index_keys_mb']:.2f} + fetched latents {row['fetched_latents_mb']:.2f}) against the K/V "
                  f"all-gather's {row['kv_allgather_mb']:.2f} MB: x{row['ratio']:.3f}", file=sys.stderr)
    v4_seq = max(4 * max(seqs), 16 * V4_FLASH["hca"])  # CP 8's chunks hold whole HCA windows
    v4 = {"seq": v4_seq, "rows": compressed_cp_traffic(v4_seq, torch.finfo(dtype).bits // 8, **V4_FLASH)}
    for name, row in v4["rows"].items():
        print(f"DeepSeek-V4-CP {name} at {v4_seq} tokens, busiest rank receives per forward: {row['v4_mb']:.2f} MB "
              f"(window halo {row['halo_mb']:.2f} + CSA prefixes {row['prefix_mb']:.2f} + entries "
              f"{row['entries_mb']:.2f}) against the key/value all-gather's {row['kv_allgather_mb']:.2f} MB: "
              f"x{row['ratio']:.3f}", file=sys.stderr)
    print(json.dumps({"bench": "sparse_attention", "device": acc.type, "dtype": str(dtype)[6:], "hidden": hidden,
                      "seqs": seqs, "topk": topk, "layers": 4,
                      "table": {str(seq): rows for seq, rows in table.items()}, "memory_slope": slopes, "cp": cp,
                      "v4_cp": v4}))


if __name__ == "__main__":
    sys.exit(main())
