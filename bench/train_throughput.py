"""Training throughput: our training step against Hugging Face Llama + PyTorch AdamW.

    python bench/train_throughput.py [--steps 3] [--rounds 5] [--dtypes fp32,bf16] [--plain]
    python bench/train_throughput.py --smoke     # a tiny model, one timed step: seconds

One Llama-shaped model (8 layers, hidden 512, 8 heads, FFN 1408, vocab 32000,
seq 512, micro batch 4), trained in the same process by our ``Trainer``
(fused QKV and gate/up, the fused-kernel flags, the fused loss and regional
``torch.compile`` unless ``--plain``, vocab-parallel cross-entropy, fp32 gradient buffers and
master weights, clipping, AdamW) and by ``transformers.LlamaForCausalLM`` with
``torch.optim.AdamW``: in fp32, and in bf16 with autocast (fp32 weights) plus
a pure-bf16 model under ``torch.compile``. The models alternate in blocks so
machine noise hits all of them. The same run times a large ``torch.mm`` per
dtype, the GEMM ceiling, and reports our FLOP rate as a fraction of it.

On a CPU without bf16 matrix units (``core.device.cpu_has_half_gemm_units``)
PyTorch's bf16 GEMM is a slow reference kernel: there the bf16 baselines run
one step each in a child process under ``--baseline-timeout`` seconds, and a
baseline that does not finish is reported as at most ``tokens / timeout``.

``--emulate-avx2`` runs the bench as on an AVX2-only CPU: it restarts itself with
``ATEN_CPU_CAPABILITY=avx2`` (PyTorch's own kernels) and ``ONEDNN_MAX_CPU_ISA=AVX2``
(oneDNN's), so PyTorch reports no bf16 support and its bf16 GEMM takes the slow
reference kernel, as on such a machine, and with inductor's cache in a directory of
its own (inductor's cache key does not include the capability: kernels compiled for
AVX512 and loaded under AVX2 give wrong numbers).
Prints one JSON line: the CPU, tokens/s of every model, ratios (``bf16_vs_fp32``:
our bf16 step against our fp32 step), MFU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional

import torch


@dataclass(frozen=True)
class Shape:
    """The Llama-shaped bench model and its micro-batch."""

    layers: int = 8
    hidden: int = 512
    heads: int = 8
    ffn: int = 1408
    vocab: int = 32000
    seq: int = 512
    micro_batch: int = 4

    def __str__(self) -> str:
        return (f"llama L{self.layers} h{self.hidden} heads{self.heads} ffn{self.ffn} V{self.vocab} s{self.seq} "
                f"mbs{self.micro_batch}")


BENCH, SMOKE = Shape(), Shape(layers=2, hidden=64, heads=4, ffn=128, vocab=256, seq=32, micro_batch=2)


FAST_FLAGS = ["--use-fused-rmsnorm", "--use-fused-swiglu", "--use-fused-rotary-pos-emb", "--use-torch-compile",
              "--cross-entropy-loss-fusion"]


def our_argv(shape: Shape, dtype: str, num_workers: int, fast: bool = False) -> List[str]:
    argv = ["--num-layers", str(shape.layers), "--hidden-size", str(shape.hidden),
            "--num-attention-heads", str(shape.heads), "--ffn-hidden-size", str(shape.ffn),
            "--seq-length", str(shape.seq), "--max-position-embeddings", str(shape.seq),
            "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
            "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--attention-dropout", "0",
            "--hidden-dropout", "0", "--micro-batch-size", str(shape.micro_batch),
            "--global-batch-size", str(shape.micro_batch), "--train-iters", "1000", "--lr", "1e-4", "--mock-data",
            "--tokenizer-type", "NullTokenizer", "--vocab-size", str(shape.vocab),
            "--make-vocab-size-divisible-by", "1", "--device", "cpu", "--eval-iters", "0",
            "--num-workers", str(num_workers)]
    return argv + (["--bf16"] if dtype == "bf16" else []) + (FAST_FLAGS if fast else [])


def our_step_fn(shape: Shape, dtype: str, num_workers: int, fast: bool):
    from mindspeed_llm.training.training import setup

    trainer = setup(our_argv(shape, dtype, num_workers, fast))
    iterator = trainer.train_iterator()
    return (lambda: trainer.train_step(iterator)), trainer


def hf_step_fn(shape: Shape, dtype: str, variant: str = "autocast") -> Callable[[], None]:
    """A transformers step: fp32, bf16 autocast over fp32 weights (``autocast``), or pure bf16 weights under
    ``torch.compile`` (``compiled``)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.ffn,
                         num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.heads, max_position_embeddings=shape.seq,
                         tie_word_embeddings=False, attention_dropout=0.0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).train()
    model.config._attn_implementation = "sdpa"
    compiled = dtype == "bf16" and variant == "compiled"
    if compiled:
        model = model.to(torch.bfloat16)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    forward = torch.compile(model) if compiled else model
    ids = torch.randint(0, shape.vocab, (shape.micro_batch, shape.seq + 1))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16" and not compiled):
            out = forward(input_ids=ids[:, :-1], labels=ids[:, :-1])
        out.loss.backward()
        optimizer.step()

    return step


def timed(step: Callable[[], object], count: int) -> List[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def gemm_tflops(dtype: str, size: int = 2048, reps: int = 5) -> float:
    """The GEMM ceiling: TFLOP/s of a ``size``-square ``torch.mm`` in ``dtype`` (the best of ``reps``)."""
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    a, b = torch.randn(size, size).to(torch_dtype), torch.randn(size, size).to(torch_dtype)
    from core.device import gemm_dtype

    compute = gemm_dtype(a)  # what our layers multiply in: fp32 on a CPU without bf16 units
    a, b = a.to(compute), b.to(compute)
    torch.mm(a, b)
    best = min(timed(lambda: torch.mm(a, b), reps))
    return 2 * size ** 3 / best / 1e12


def baseline_in_child(shape_name: str, dtype: str, variant: str, timeout: float) -> Optional[float]:
    """Seconds of one baseline step measured in a child process; None when it ran past ``timeout``."""
    command = [sys.executable, __file__, "--child", f"{shape_name}:{dtype}:{variant}"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=True)
    except subprocess.TimeoutExpired:
        return None
    return float(done.stdout.strip().splitlines()[-1])


def measure(shape: Shape, dtype: str, steps: int, warmup: int, rounds: int, fast: bool = True,
            baseline_timeout: float = 240.0, shape_name: str = "bench") -> Dict[str, object]:
    """Ours and the baselines in one process, alternating. Ours runs with no DataLoader processes: forked
    workers that stay alive make the baselines' steps in this process up to 1.8x slower (1.23 s -> 2.1-2.2 s
    for the bf16 autocast step on a Xeon with AMX; ours barely moves), which would inflate every ratio; our
    mock batches cost under 2 ms in this process."""
    from core.device import cpu_has_half_gemm_units, peak_tflops

    ours, trainer = our_step_fn(shape, dtype, 0, fast)
    timed(ours, warmup)  # compiles the layers when fast
    tokens = shape.micro_batch * shape.seq
    slow_bf16 = dtype == "bf16" and not cpu_has_half_gemm_units(torch.bfloat16)
    variants = ["autocast", "compiled"] if dtype == "bf16" else ["eager"]
    in_process = {} if slow_bf16 else {v: hf_step_fn(shape, dtype, v) for v in variants}
    for step in in_process.values():
        timed(step, warmup)
    times: Dict[str, List[float]] = {"ours": [], **{v: [] for v in in_process}}
    for _ in range(rounds):  # alternate blocks so drifts in machine speed hit every model
        times["ours"] += timed(ours, steps)
        for variant, step in in_process.items():
            times[variant] += timed(step, steps)
    ours_tps = tokens / statistics.median(times["ours"])
    tflops = trainer.flops_per_token * ours_tps / 1e12
    ceiling = gemm_tflops(dtype)
    result: Dict[str, object] = {"ours_tokens_per_s": round(ours_tps, 1), "ours_tflops": round(tflops, 3),
                                 "ours_mfu": round(tflops / peak_tflops(half_precision=dtype == "bf16"), 4),
                                 "gemm_tflops": round(ceiling, 3), "ours_of_gemm": round(tflops / ceiling, 3)}
    for variant in variants:
        if slow_bf16:  # one step in a child, bounded: PyTorch's reference bf16 GEMM can take many minutes
            seconds = baseline_in_child(shape_name, dtype, variant, baseline_timeout)
            hf_tps = tokens / (seconds if seconds is not None else baseline_timeout)
            result[f"hf_{variant}_finished"] = seconds is not None
        else:
            hf_tps = tokens / statistics.median(times[variant])
        result[f"hf_{variant}_tokens_per_s"] = round(hf_tps, 1)
        result[f"ratio_vs_hf_{variant}"] = round(ours_tps / hf_tps, 3)  # a lower bound when it did not finish
    return result


def child_step(spec: str) -> None:
    """``--child shape:dtype:variant``: print the seconds of one baseline step after one warm-up step."""
    shape_name, dtype, variant = spec.split(":")
    step = hf_step_fn(BENCH if shape_name == "bench" else SMOKE, dtype, variant)
    step()
    print(timed(step, 1)[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per block")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating blocks per model (a shared VM drifts by 5-10% over minutes)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one timed step per model and dtype")
    parser.add_argument("--plain", action="store_true", help="ours without the fused-kernel flags and compile")
    parser.add_argument("--baseline-timeout", type=float, default=240.0,
                        help="seconds for one bf16 baseline step on a CPU without bf16 units")
    parser.add_argument("--emulate-avx2", action="store_true",
                        help="restart as on an AVX2-only CPU (PyTorch and oneDNN limited to AVX2; module docstring)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.emulate_avx2 and os.environ.get("ATEN_CPU_CAPABILITY") != "avx2":
        restart_as_avx2()
    if args.child:
        child_step(args.child)
        return
    from core.device import cpu_has_half_gemm_units

    shape = SMOKE if args.smoke else BENCH
    if args.smoke:  # seconds: no compilation
        args.steps, args.rounds, args.plain = 1, 1, True
    result = {"bench": "train_throughput", "model": str(shape), "threads": torch.get_num_threads(),
              "cpu_capability": torch.backends.cpu.get_cpu_capability(),
              "cpu_bf16_units": cpu_has_half_gemm_units(torch.bfloat16), "emulated_avx2": args.emulate_avx2,
              "ours": "plain" if args.plain else "fused kernels + fused loss + regional torch.compile"}
    for dtype in args.dtypes.split(","):
        result[dtype] = measure(shape, dtype, args.steps, args.warmup, args.rounds,
                                fast=not args.plain, baseline_timeout=args.baseline_timeout,
                                shape_name="smoke" if args.smoke else "bench")
    if "fp32" in result and "bf16" in result:
        result["bf16_vs_fp32"] = round(result["bf16"]["ours_tokens_per_s"] / result["fp32"]["ours_tokens_per_s"], 3)
    print(json.dumps(result))


def restart_as_avx2() -> None:
    """Run this bench again, in place, with PyTorch and oneDNN limited to AVX2 (``--emulate-avx2``)."""
    cache = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"torchinductor_avx2_{os.getuid()}")
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2",
           "TORCHINDUCTOR_CACHE_DIR": cache}
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
