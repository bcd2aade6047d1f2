"""MoE layer throughput and memory: an 8-expert top-2 layer against the dense MLP of equal active parameters.

Usage::

    python bench/moe.py            # hidden 1024, expert FFN 1024, 8 experts, top-2, 2 x 1024 tokens
    python bench/moe.py --smoke    # tiny sizes: seconds

Each variant runs in its own subprocess (so its peak RSS, ``VmHWM``, is its own)
and times forward + backward of one layer at expert-parallel size 1:

- ``dense``: a SwiGLU MLP with FFN ``top-k x expert FFN`` (the same active
  parameters per token: the baseline);
- ``moe_loop``: the MoE layer (router, permutation, experts) with a loop over experts;
- ``moe_grouped``: the same with ``--moe-grouped-gemm`` (``torch._grouped_mm``
  where this torch build has it; ``grouped_gemm_used`` says whether it ran);
- ``ep2_alltoall`` / ``ep2_allgather``: the grouped-GEMM layer at expert-parallel size 2 on two gloo
  processes, each with the same tokens per step as the EP 1 run and half of the experts, the tokens
  moved by each dispatcher. Tokens/s and peak RSS are per rank (the slowest rank, the largest RSS).

Prints one JSON line with tokens/s and peak RSS per variant and the ratios of
each MoE variant to the dense baseline, of grouped GEMM to the loop and of each
EP 2 variant to EP 1 (``moe_grouped``). Every variant runs with the same number of
threads per process (``--threads``, default 1) so that the two EP ranks, which share
the machine, are compared with one EP 1 process fairly.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from typing import Any, Dict

import torch

SIZES = {"full": dict(hidden=1024, ffn=1024, experts=8, topk=2, seq=1024, batch=2, iters=5),
         "smoke": dict(hidden=64, ffn=64, experts=8, topk=2, seq=32, batch=2, iters=2)}
VARIANTS = ("dense", "moe_loop", "moe_grouped", "ep2_alltoall", "ep2_allgather")


def _layer(variant: str, size: Dict[str, int], ep: int = 1) -> torch.nn.Module:
    from core.models.gpt_model import layout_state, materialize
    from core.parallel_state import initialize
    from core.transformer.config import TransformerConfig
    from core.transformer.mlp import MLP
    from core.transformer.moe.moe_layer import MoELayer

    common = dict(num_layers=1, hidden_size=size["hidden"], num_attention_heads=1, vocab_size=16,
                  normalization="RMSNorm", activation="swiglu", add_bias_linear=False, attention_dropout=0.0,
                  hidden_dropout=0.0)
    state = initialize(ep=ep) if ep > 1 else layout_state(1)
    if variant == "dense":
        config = TransformerConfig(**common, ffn_hidden_size=size["topk"] * size["ffn"])
        build = lambda: MLP(config, state)  # noqa: E731
    else:
        config = TransformerConfig(**common, ffn_hidden_size=size["ffn"], num_experts=size["experts"],
                                   moe_router_topk=size["topk"], moe_ffn_hidden_size=size["ffn"],
                                   moe_grouped_gemm=variant != "moe_loop", expert_model_parallel_size=ep,
                                   moe_token_dispatcher_type=variant.split("_")[-1] if ep > 1 else "allgather")
        build = lambda: MoELayer(config, state)  # noqa: E731
    with torch.device("meta"):
        layer = build()
    return materialize(layer, torch.device("cpu"), seed=0, config=config, state=state)


def _peak_rss_mb() -> float:
    with open("/proc/self/status") as status:
        kb = next(line for line in status if line.startswith("VmHWM:")).split()[1]
    return int(kb) / 1024


def run_variant(variant: str, size: Dict[str, int], ep: int = 1) -> Dict[str, Any]:
    """Forward + backward of one layer, ``iters`` timed after one warm-up; tokens/s and peak RSS."""
    torch.manual_seed(0)
    layer = _layer(variant, size, ep)
    hidden = torch.randn(size["seq"], size["batch"], size["hidden"], requires_grad=True)  # [s, b, h]
    for step in range(size["iters"] + 1):
        if step == 1:
            start = time.perf_counter()
        layer(hidden).float().square().mean().backward()
    seconds = time.perf_counter() - start
    tokens = size["seq"] * size["batch"] * size["iters"]
    result = {"tokens_per_s": round(tokens / seconds, 1), "peak_rss_mb": round(_peak_rss_mb(), 1)}
    if variant != "dense":
        result["grouped_gemm_used"] = bool(layer.experts.use_grouped_mm)
    return result


def _ep_rank(rank: int, world_size: int, variant: str, size: Dict[str, int], threads: int) -> Dict[str, Any]:
    torch.set_num_threads(threads)
    torch.manual_seed(rank)  # each rank its own tokens
    return run_variant(variant, size, ep=world_size)


def run_expert_parallel(variant: str, size: Dict[str, int], threads: int) -> Dict[str, Any]:
    """The variant on two processes; the slowest rank's tokens/s and the largest peak RSS."""
    from core.launcher import run_distributed

    ranks = run_distributed(2, _ep_rank, variant, size, threads)
    return {"tokens_per_s": min(r["tokens_per_s"] for r in ranks),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in ranks), "grouped_gemm_used": ranks[0]["grouped_gemm_used"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, seconds")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per process")
    parser.add_argument("--variant", choices=VARIANTS, help=argparse.SUPPRESS)  # a child process
    args = parser.parse_args()
    size = SIZES["smoke" if args.smoke else "full"]
    if args.variant:
        torch.set_num_threads(args.threads)
        expert_parallel = args.variant.startswith("ep2")
        print(json.dumps(run_expert_parallel(args.variant, size, args.threads) if expert_parallel
                         else run_variant(args.variant, size)))
        return
    results = {}
    for variant in VARIANTS:
        command = ([sys.executable, __file__, "--variant", variant, "--threads", str(args.threads)]
                   + (["--smoke"] if args.smoke else []))
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        print(f"bench/moe.py: {variant}: {results[variant]}", file=sys.stderr)
    dense = results["dense"]
    ratios = {f"{variant}_tokens_per_s_vs_dense": round(results[variant]["tokens_per_s"] / dense["tokens_per_s"], 3)
              for variant in VARIANTS[1:]}
    ratios.update({f"{variant}_peak_rss_vs_dense": round(results[variant]["peak_rss_mb"] / dense["peak_rss_mb"], 3)
                   for variant in VARIANTS[1:]})
    ratios["grouped_vs_loop_tokens_per_s"] = round(results["moe_grouped"]["tokens_per_s"]
                                                   / results["moe_loop"]["tokens_per_s"], 3)
    for variant in VARIANTS[3:]:
        for measure in ("tokens_per_s", "peak_rss_mb"):
            ratios[f"{variant}_{measure}_vs_ep1"] = round(results[variant][measure]
                                                          / results["moe_grouped"][measure], 3)
    print(json.dumps({"bench": "moe", "smoke": args.smoke, "sizes": size, "threads": args.threads,
                      **results, **ratios}))


if __name__ == "__main__":
    main()
