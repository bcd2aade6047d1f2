"""Recurrent mixers against full attention of equal width, over sequence lengths: speed and memory, same run.

    python bench/linear_attention.py [--seqs 1024,2048,4096,8192,16384] [--hidden 1024] [--steps 2] [--rounds 2]
    python bench/linear_attention.py --smoke     # hidden 64, sequences 64 and 128: seconds

Models: four layers of one token mixer each, built with ``core.models.gpt_model.build_model`` from a
``TransformerConfig`` (one layer = its norm, the mixer and the residual add; no MLP anywhere, so only the
mixers differ), every one at hidden ``h``, micro batch 1, the same small vocabulary (1024):

* ``attention``: ``--hybrid-override-pattern '****'``, ``h / 64`` heads of 64, RoPE (the baseline);
* ``mamba2``: ``'MMMM'``, expand 2, heads of 64, state 64, one B/C group, SSD chunk 256;
* ``mamba1``: ``'MMMM'`` with ``--mamba-version 1``, expand 2, state 16;
* ``mamba1_heads``: the same channels as Zamba's 2 independent SSMs (``--mamba-num-heads 2``);
* ``gated_deltanet``: ``'GGGG'``, ``h / 128`` key heads and ``h / 64`` value heads of 64 (Qwen3-Next's
  1 : 2 ratio), conv width 4, chunk 64.
* ``kda``: ``'KKKK'``, Kimi Delta Attention with ``h / 64`` key and value heads of 64 (Kimi Linear's 1 : 1),
  conv width 4, chunk 64: the delta rule with a decay per key channel and low-rank gates.
* ``lightning``: ``'LLLL'``, MiniMax's lightning attention with ``h / 64`` heads of 64, chunk 256: linear
  attention with a fixed decay per head, no delta rule.
* ``rg_lru``: ``'RRRR'``, Griffin's recurrent block (RecurrentGemma) with an RG-LRU of width ``h`` in ``h / 64``
  gate blocks, conv width 4: an elementwise recurrence, in chunks of 64.
* ``rwkv``: ``'WWWW'``, RWKV-4's time mixing of width ``h``: the token shift and the WKV recurrence in chunks of
  16 tokens (elementwise per channel: no matmul to batch it into).
* ``mlstm``: ``'XXXX'``, xLSTM's mLSTM as xLSTM-7B shapes it: ``h / 512`` heads (at least one) with q/k
  ``h / 2`` and v ``h`` wide over the heads, chunk 64: a matrix memory of ``dk x dv`` per head, exponential gates.
* ``mamba_attention``: ``'HHHH'``, Falcon-H1's Mamba2 (as ``mamba2``) and attention (as ``attention``) side by
  side in every layer: both mixers' costs, so above each.

Defaults: on a GPU (or NPU) bf16 parameters, ``h`` 1024, sequences 1k, 2k, 4k, 8k, 16k; on the CPU fp32,
``h`` 256 and sequences 256, 512, 1024 (about 2 CPU-minutes; adding 2048 takes about 6, most of it
Mamba1's per-token scan). Per model and sequence length:

* ``tokens_per_s``: tokens / the median wall time of one forward + backward (loss = mean token loss);
  the models are timed in interleaved rounds, so drifts in machine speed hit all of them;
* ``saved_mb``: the bytes autograd keeps for the backward inside the four layers (every storage a
  ``saved_tensors_hooks`` pack hook sees while ``model.decoder`` runs its forward, each once, parameters
  excluded): what grows with the sequence;
* ``peak_mb``: the peak of memory allocated during one forward + backward above what was allocated when
  it started (weights already there): the device allocator's statistics, on the CPU every tensor storage an
  operator creates counted until freed (``bench/activation_memory.py``'s ``MemoryProbe``).

Per model, the memory slope: ``(bytes at the longest - bytes at the shortest) / (token difference)`` of
``saved`` and of ``peak``. Ratios are to attention at the same length in the same run (speed: mixer /
attention; memory: mixer / attention).

CP rows (``--no-cp`` skips them): every model trained by our ``Trainer`` at the longest length (``--cp-seq``),
at CP 1 in this process and CP 2 in one 2-process gloo launch (the ring with load-balanced chunks), every rank
on the CPU with one thread, by ``bench/context_parallel.py``'s runner (its memory probe on the first step,
SGD without state, then the timed steps): ``cp2_speedup`` is the CP 1 step time over the slowest CP 2 rank's,
``cp2_peak_ratio`` / ``cp2_activation_ratio`` the largest CP 2 rank's peak and kept-for-backward megabytes over
CP 1's (ideal 0.5). The recurrent mixers' state relay runs the CP ranks one after the other
(``core/transformer/sequence_state.py``): their CP splits the memory of the sequence, not its time, so
``cp2_speedup`` stays below 1 while attention's ring overlaps its ranks' work.

A line per length as it finishes and readable tables go to stderr, one JSON line to stdout.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
from typing import Callable, Dict, Iterator, List, Optional

import torch

from activation_memory import MB, MemoryProbe, timed  # the same memory probe and timer as the activation-memory bench
from core.device import accelerator
from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig, field_flag

VOCAB = 1024
MIXERS = ("attention", "mamba2", "mamba1", "mamba1_heads", "gated_deltanet", "kda", "lightning", "rg_lru", "rwkv",
          "mlstm", "mamba_attention")
DEFAULT_SEQS = {"device": "1024,2048,4096,8192,16384", "cpu": "256,512,1024", "smoke": "64,128"}
SLOWER_WHY = ("where a chunked reference is slower than attention: the references run Python loops along the "
              "sequence (the gated delta rule and KDA one step per chunk of 64 tokens, Mamba1's selective scan one step "
              "per token, Mamba2's SSD a few batched matmuls per chunk plus an inter-chunk pass), each step a "
              "handful of small kernels with autograd bookkeeping, while attention's SDPA is one fused kernel "
              "whose s^2 cost only overtakes those fixed costs at long sequences; on the CPU the small matmuls "
              "also use the cores poorly. The fast kernels (flash-linear-attention, mamba_ssm) remove the loops.")
MEMORY_WHY = ("memory: attention's fused causal kernel keeps no s x s tensor, so it grows linearly too, keeping per "
              "token its q, k, v and output; the mixers' references keep more per token (the expanded projections, "
              "conv inputs, gates, fp32 copies, per-chunk intermediates and, for Mamba1, the [d_inner, state] "
              "recurrent state of every step), which is why their slope is the larger one at these lengths.")


def mixer_fields(mixer: str, hidden: int) -> Dict[str, object]:
    """The config fields that make a 4-layer model of ``mixer`` at width ``hidden``."""
    if mixer == "attention":
        return dict(hybrid_override_pattern="****", position_embedding_type="rope")
    if mixer == "gated_deltanet":
        return dict(hybrid_override_pattern="GGGG", position_embedding_type="none", linear_conv_kernel_dim=4,
                    linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=max(hidden // 128, 1),
                    linear_num_value_heads=max(hidden // 64, 2), linear_chunk_size=64)
    if mixer == "kda":
        heads = max(hidden // 64, 1)
        return dict(hybrid_override_pattern="KKKK", position_embedding_type="none", linear_conv_kernel_dim=4,
                    linear_key_head_dim=64, linear_value_head_dim=64, linear_num_key_heads=heads,
                    linear_num_value_heads=heads, linear_chunk_size=64)
    if mixer == "rwkv":
        return dict(hybrid_override_pattern="WWWW", position_embedding_type="none")
    if mixer == "mlstm":
        heads = max(hidden // 512, 1)
        return dict(hybrid_override_pattern="XXXX", position_embedding_type="none", linear_num_key_heads=heads,
                    linear_num_value_heads=heads, linear_key_head_dim=hidden // (2 * heads),
                    linear_value_head_dim=hidden // heads, linear_chunk_size=64)
    if mixer == "rg_lru":
        return dict(hybrid_override_pattern="RRRR", position_embedding_type="none", lru_conv_width=4)
    if mixer == "lightning":
        heads = max(hidden // 64, 1)
        return dict(hybrid_override_pattern="LLLL", position_embedding_type="none", linear_key_head_dim=64,
                    linear_value_head_dim=64, linear_num_key_heads=heads, linear_num_value_heads=heads,
                    linear_chunk_size=256)
    mamba = dict(hybrid_override_pattern="MMMM", position_embedding_type="none", mamba_expand=2)
    if mixer == "mamba1":
        return dict(mamba, mamba_version=1, mamba_state_dim=16)
    if mixer == "mamba1_heads":  # Zamba's: the 2 x hidden channels as 2 independent SSMs
        return dict(mamba, mamba_version=1, mamba_state_dim=16, mamba_heads=2, mamba_head_dim=hidden)
    mamba2 = dict(mamba, mamba_version=2, mamba_state_dim=64, mamba_head_dim=64, mamba_num_groups=1,
                  mamba_chunk_size=256)
    if mixer == "mamba_attention":
        return dict(mamba2, hybrid_override_pattern="HHHH", position_embedding_type="rope")
    return mamba2


def model_config(mixer: str, hidden: int, max_seq: int, dtype: torch.dtype) -> TransformerConfig:
    return TransformerConfig(num_layers=4, hidden_size=hidden, num_attention_heads=max(hidden // 64, 1),
                             vocab_size=VOCAB, make_vocab_size_divisible_by=1, max_position_embeddings=max_seq,
                             normalization="RMSNorm", hidden_dropout=0.0, attention_dropout=0.0,
                             add_bias_linear=False, params_dtype=dtype, **mixer_fields(mixer, hidden))


def forward_backward(model: torch.nn.Module, tokens: torch.Tensor) -> None:
    """One training forward + backward: next-token loss, mean over tokens."""
    model(tokens, labels=torch.roll(tokens, -1, dims=1)).float().mean().backward()


@contextlib.contextmanager
def counting_saved(model: torch.nn.Module) -> Iterator[Callable[[], int]]:
    """Bytes of the storages autograd saves for the backward while ``model.decoder`` runs its forward."""
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: Dict[int, int] = {}
    hooks = torch.autograd.graph.saved_tensors_hooks(lambda t: _remember(t, saved, params), lambda t: t)
    handles = [model.decoder.register_forward_pre_hook(lambda *_: hooks.__enter__()),
               model.decoder.register_forward_hook(lambda *_: hooks.__exit__(None, None, None))]
    try:
        yield lambda: sum(saved.values())
    finally:
        for handle in handles:
            handle.remove()


def _remember(tensor: torch.Tensor, saved: Dict[int, int], params: set) -> torch.Tensor:
    storage = tensor.untyped_storage()
    if storage.data_ptr() not in params:
        saved[storage.data_ptr()] = storage.nbytes()
    return tensor


def measure_memory(model: torch.nn.Module, tokens: torch.Tensor) -> Dict[str, float]:
    """One forward + backward under the probes: the decoder's saved megabytes and the peak above the start."""
    probe = MemoryProbe()
    with counting_saved(model) as saved_bytes:
        with probe.measuring():
            forward_backward(model, tokens)
        result = {"saved_mb": saved_bytes() / MB, "peak_mb": probe.peak_above_start() / MB}
    model.zero_grad(set_to_none=False)
    return result


def run_length(models: Dict[str, torch.nn.Module], seq: int, steps: int, rounds: int,
               device: torch.device) -> Dict[str, Dict[str, float]]:
    """Every model at ``seq`` tokens: memory once, then ``rounds`` interleaved blocks of ``steps`` timed steps."""
    tokens = torch.randint(0, VOCAB, (1, seq), generator=torch.Generator().manual_seed(seq)).to(device)
    steps_of = {name: (lambda m=model: forward_backward(m, tokens)) for name, model in models.items()}
    for step in steps_of.values():
        timed(step, 1)  # warm-up: caches, the allocator, kernel choice
    results = {name: measure_memory(model, tokens) for name, model in models.items()}
    times: Dict[str, List[float]] = {name: [] for name in models}
    for _ in range(rounds):
        for name, step in steps_of.items():
            times[name] += timed(step, steps)
    for name, result in results.items():
        result["tokens_per_s"] = seq / statistics.median(times[name])
    print(f"seq {seq}: " + ", ".join(f"{name} {r['tokens_per_s']:.0f} tok/s" for name, r in results.items()),
          file=sys.stderr, flush=True)
    return results


def with_ratios(table: Dict[int, Dict[str, Dict[str, float]]]) -> Dict[int, Dict[str, Dict[str, float]]]:
    """Each row gains its ratios to attention at the same length."""
    out = {}
    for seq, rows in table.items():
        base = rows["attention"]
        out[seq] = {name: {**{k: round(v, 2) for k, v in row.items()},
                           "speed_ratio": round(row["tokens_per_s"] / base["tokens_per_s"], 3),
                           "saved_ratio": round(row["saved_mb"] / max(base["saved_mb"], 1e-9), 3),
                           "peak_ratio": round(row["peak_mb"] / max(base["peak_mb"], 1e-9), 3)}
                    for name, row in rows.items()}
    return out


def memory_slopes(table: Dict[int, Dict[str, Dict[str, float]]]) -> Dict[str, Dict[str, float]]:
    """Bytes per extra token between the shortest and the longest length, per model, saved and peak."""
    short, long = min(table), max(table)
    tokens = max(long - short, 1)
    return {name: {f"{key}_bytes_per_token": round((table[long][name][f"{key}_mb"]
                                                    - table[short][name][f"{key}_mb"]) * MB / tokens, 1)
                   for key in ("saved", "peak")}
            for name in table[short]}


def mixer_argv(mixer: str, hidden: int, seq: int, cp: int) -> List[str]:
    """``pretrain_gpt.py`` flags of the 4-layer ``mixer`` model of :func:`model_config` (the fields of
    :func:`mixer_fields` spelled as flags), one SGD step per micro-batch on mock data, at context parallel ``cp``
    (the ring, load-balanced chunks) on the CPU over gloo."""
    argv = ["--num-layers", "4", "--hidden-size", str(hidden), "--num-attention-heads", str(max(hidden // 64, 1)),
            "--seq-length", str(seq), "--max-position-embeddings", str(seq), "--normalization", "RMSNorm",
            "--disable-bias-linear", "--attention-dropout", "0", "--hidden-dropout", "0", "--micro-batch-size", "1",
            "--global-batch-size", "1", "--train-iters", "1000", "--lr", "1e-4", "--mock-data", "--tokenizer-type",
            "NullTokenizer", "--vocab-size", str(VOCAB), "--make-vocab-size-divisible-by", "1", "--eval-iters", "0",
            "--num-workers", "0", "--device", "cpu", "--distributed-backend", "gloo", "--log-interval", "1000000",
            "--optimizer", "sgd", "--sgd-momentum", "0"]
    for name, value in mixer_fields(mixer, hidden).items():
        argv += [field_flag(name), str(value)]
    if cp > 1:
        argv += ["--context-parallel-size", str(cp), "--context-parallel-algo", "megatron_cp_algo"]
    return argv


def cp_rows(mixers: List[str], hidden: int, seq: int, steps: int) -> Dict[str, Dict[str, float]]:
    """Every mixer trained at ``seq`` tokens at CP 1 (in this process) and CP 2 (one 2-process gloo launch), one
    thread per rank, by ``bench/context_parallel.py``'s runner: the slowest rank's step time, the largest rank's
    peak and kept activation memory, and their ratios CP 2 / CP 1."""
    from context_parallel import worker  # the CP bench's runner: memory probe first, then timed steps

    from core.launcher import run_distributed

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        one = worker(0, 1, {m: mixer_argv(m, hidden, seq, 1) for m in mixers}, steps)
    finally:
        torch.set_num_threads(threads)
    two = run_distributed(2, worker, {m: mixer_argv(m, hidden, seq, 2) for m in mixers}, steps, timeout=3600.0)
    rows = {}
    for mixer in mixers:
        ranks = [rank[mixer] for rank in two]
        step, peak = max(r["step_s"] for r in ranks), max(r["peak_mb"] for r in ranks)
        kept = max(r["activation_mb"] for r in ranks)
        rows[mixer] = {"cp1_step_s": round(one[mixer]["step_s"], 4), "cp2_step_s": round(step, 4),
                       "cp2_speedup": round(one[mixer]["step_s"] / step, 3),
                       "cp1_peak_mb": round(one[mixer]["peak_mb"], 2), "cp2_peak_mb": round(peak, 2),
                       "cp2_peak_ratio": round(peak / one[mixer]["peak_mb"], 3),
                       "cp1_activation_mb": round(one[mixer]["activation_mb"], 2), "cp2_activation_mb": round(kept, 2),
                       "cp2_activation_ratio": round(kept / one[mixer]["activation_mb"], 3)}
    return rows


def print_cp_rows(rows: Dict[str, Dict[str, float]], seq: int) -> None:
    print(f"CP 2 against CP 1 at {seq} tokens (ring, CPU gloo, 1 thread per rank; slowest rank's step, largest "
          "rank's memory):", file=sys.stderr)
    print(f"{'mixer':<15} {'CP1 s':>8} {'CP2 s':>8} {'speedup':>8} {'CP1 peak':>9} {'CP2 peak':>9} {'ratio':>6} "
          f"{'CP1 kept':>9} {'CP2 kept':>9} {'ratio':>6}", file=sys.stderr)
    for name, row in rows.items():
        print(f"{name:<15} {row['cp1_step_s']:>8.3f} {row['cp2_step_s']:>8.3f} {row['cp2_speedup']:>8.3f} "
              f"{row['cp1_peak_mb']:>9.1f} {row['cp2_peak_mb']:>9.1f} {row['cp2_peak_ratio']:>6.3f} "
              f"{row['cp1_activation_mb']:>9.1f} {row['cp2_activation_mb']:>9.1f} {row['cp2_activation_ratio']:>6.3f}",
              file=sys.stderr)


def print_table(table, slopes, header: str, notes: List[str]) -> None:
    print(header, file=sys.stderr)
    print(f"{'seq':>6} {'mixer':<15} {'tok/s':>9} {'x attn':>7} {'saved MB':>9} {'x attn':>7} "
          f"{'peak MB':>9} {'x attn':>7}", file=sys.stderr)
    for seq, rows in table.items():
        for name, row in rows.items():
            print(f"{seq:>6} {name:<15} {row['tokens_per_s']:>9.1f} {row['speed_ratio']:>7.3f} "
                  f"{row['saved_mb']:>9.1f} {row['saved_ratio']:>7.3f} {row['peak_mb']:>9.1f} "
                  f"{row['peak_ratio']:>7.3f}", file=sys.stderr)
    print("memory slope, bytes per extra token (shortest -> longest): " + "; ".join(
        f"{name} saved {s['saved_bytes_per_token']:.0f} peak {s['peak_bytes_per_token']:.0f}"
        for name, s in slopes.items()), file=sys.stderr)
    for note in notes:
        print(note, file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seqs", default=None, help="comma-separated sequence lengths (default: by device)")
    parser.add_argument("--hidden", type=int, default=None, help="model width (default 1024 on a GPU, 256 on CPU)")
    parser.add_argument("--mixers", default=",".join(MIXERS), help="comma-separated, from " + ",".join(MIXERS))
    parser.add_argument("--steps", type=int, default=1, help="timed steps per model per round")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved rounds")
    parser.add_argument("--smoke", action="store_true", help="hidden 64, sequences 64 and 128, one round: seconds")
    parser.add_argument("--no-cp", dest="cp", action="store_false", help="skip the CP 2 against CP 1 rows")
    parser.add_argument("--cp-seq", type=int, default=None,
                        help="sequence length of the CP rows (default: the longest of --seqs)")
    args = parser.parse_args(argv)
    acc = accelerator()
    on_device = acc.type != "cpu"
    size = "smoke" if args.smoke else ("device" if on_device else "cpu")
    seqs = sorted(int(s) for s in (args.seqs or DEFAULT_SEQS[size]).split(","))
    hidden = args.hidden or {"smoke": 64, "device": 1024, "cpu": 256}[size]
    rounds = 1 if args.smoke else args.rounds
    dtype = torch.bfloat16 if on_device else torch.float32
    mixers = ["attention"] + [m for m in args.mixers.split(",") if m in MIXERS and m != "attention"]
    torch.manual_seed(0)
    models = {name: build_model(model_config(name, hidden, max(seqs), dtype), layout_state(1), acc.device, seed=0)
              for name in mixers}
    table = with_ratios({seq: run_length(models, seq, args.steps, rounds, acc.device) for seq in seqs})
    slopes = memory_slopes(table)
    from core.transformer.gated_delta_net import gated_delta_rule_kernel

    kernel = gated_delta_rule_kernel(acc.type)[0]
    params = {name: sum(p.numel() for p in model.parameters()) for name, model in models.items()}
    header = (f"4 layers, mixer only (no MLP), hidden {hidden}, micro batch 1, vocab {VOCAB}, {str(dtype)[6:]}, "
              f"device {acc.type}, {torch.get_num_threads()} threads, sequences {seqs}; gated delta rule: {kernel}; "
              f"params {params}. tok/s: forward + backward; saved MB: bytes autograd keeps for the backward in the "
              f"4 layers; peak MB: peak allocated during forward + backward above its start; x attn: ratio to "
              f"attention at that length, this run")
    print_table(table, slopes, header, ["note: " + SLOWER_WHY, "note: " + MEMORY_WHY])
    cp_seq = args.cp_seq or max(seqs)
    cp = cp_rows(mixers, hidden, cp_seq, args.steps) if args.cp else {}
    if cp:
        print_cp_rows(cp, cp_seq)
    print(json.dumps({"bench": "linear_attention", "device": acc.type, "dtype": str(dtype)[6:], "hidden": hidden,
                      "seqs": seqs, "layers": 4, "delta_rule_kernel": kernel, "params": params,
                      "table": {str(seq): rows for seq, rows in table.items()}, "memory_slope": slopes,
                      "cp": {"seq": cp_seq, "rows": cp} if cp else None}))


if __name__ == "__main__":
    main()
