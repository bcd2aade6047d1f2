"""GPU MFU: a Llama-3.2-1B-shaped model in bf16, our trainer against transformers + torch.compile, same run.

    bash bench/gpu_mfu.sh                          # the device bench (sets PYTHONPATH to this checkout)
    TINY=1 bash bench/gpu_mfu.sh                   # a tiny model on the CPU, a few steps: seconds (CI)
    python bench/gpu_mfu.py [--steps 10] [--warmup 3] [--seq 4096] [--micro-batch 2] [--global-batch 8]
    python bench/gpu_mfu.py --smoke                # the same as --tiny
    python bench/gpu_mfu.py --tiny --variants on   # also the FSDP2 / TP2 variants, on 2 CPU processes (gloo)

Model: Llama-3.2-1B's shape (16 layers, hidden 2048, 32 heads, 8 KV heads, FFN 8192, vocabulary 128256,
rope base 500000, tied embeddings), random weights and ``--mock-data``: no internet, no files.

- ``ours``: ``mindspeed_llm.training.training.setup(argv)`` in this process with ``--bf16
  --use-distributed-optimizer`` and every flag of ``FAST_FLAGS`` that the parser knows (the others are
  listed under ``skipped_flags`` with the reason); one ``train_step`` per step (all micro-batches,
  gradient reduce, optimizer).
- ``baseline``: ``transformers.LlamaForCausalLM`` with pure bf16 parameters, ``torch.optim.AdamW(fused=True)``
  and ``torch.compile`` of the whole model (backend inductor; ``eager`` in tiny mode, where inductor's
  code generation alone takes about 40 s on 2 cores), the same micro-batches accumulated per step.
- ``variants``: ``fsdp2`` (``--use-torch-fsdp2``, DP 2) and ``tp2`` (``--tensor-model-parallel-size 2
  --sequence-parallel``), each a ``torchrun --nproc-per-node 2`` of this file with ``--variant``, when
  the machine has two devices (``--variants auto``); otherwise skipped with a note.

- ``ours_fp8``: ours again with FP8 linears (``--fp8-recipe``, default ``auto``: ``tensorwise`` in the hybrid format
  where ``core.device.fp8_matmul`` finds FP8 matrix units, skipped with the reason elsewhere), its MFU against the
  same dense bf16 peak (as TorchTitan reports Float8 runs) and ``ratio_fp8_vs_bf16``.

Both models are timed the same way (device-synchronised, the median of ``--steps`` steps after
``--warmup``), and both count the FLOPs of our documented formula
(``mindspeed_llm.training.metrics.training_flops_per_token``), so MFU is model FLOPs utilisation against
``core.device.peak_tflops`` (the dense bf16 figure of the device; ``--peak-tflops`` overrides). Prints one
JSON line: tokens/s, TFLOP/s per device, MFU and peak memory of each, and the ratio ours/baseline.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

# The fast paths we ask for when the parser has them; extend this list as flags land.
FAST_FLAGS: List[str] = ["--use-fused-rmsnorm", "--use-fused-swiglu", "--use-fused-rotary-pos-emb",
                         "--use-flash-attn", "--use-torch-compile", "--cross-entropy-loss-fusion"]
# Tiny mode: a fast flag goes with these companion flags, which keep it cheap on 2 cores, or is left out
# with the reason when the parser lacks them (inductor's code generation alone takes ~40 s there).
TINY_COMPANIONS: Dict[str, Tuple[List[str], str]] = {
    "--use-torch-compile": (["--torch-compile-backend", "eager"],
                            "tiny mode: inductor compilation takes ~40 s on 2 cores and this parser has no "
                            "--torch-compile-backend to choose eager")}
# Tiny mode: fast flags left out, with the reason (no cheap way to run them on 2 cores).
TINY_SKIPPED: Dict[str, str] = {
    "--cross-entropy-loss-fusion": "tiny mode: inductor compiles the loss's two kernels for ~20 s on 2 cores"}
VARIANTS: Tuple[str, ...] = ("fsdp2", "tp2")


@dataclass(frozen=True)
class Shape:
    """The Llama-3-shaped bench model and its batch (``micro_batch`` rows of ``seq`` tokens, per DP rank)."""

    layers: int = 16
    hidden: int = 2048
    heads: int = 32
    kv_heads: int = 8
    ffn: int = 8192
    vocab: int = 128256
    seq: int = 4096
    micro_batch: int = 2
    global_batch: int = 8  # per DP rank: global_batch / micro_batch micro-batches per step
    rope_base: float = 500000.0

    def __str__(self) -> str:
        return (f"llama3 L{self.layers} h{self.hidden} heads{self.heads} kv{self.kv_heads} ffn{self.ffn} "
                f"V{self.vocab} s{self.seq} mbs{self.micro_batch} gbs{self.global_batch}")

    @property
    def micro_batches(self) -> int:
        return self.global_batch // self.micro_batch


LLAMA_1B = Shape()
TINY = Shape(layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=256, seq=64, micro_batch=2, global_batch=4)


@dataclass
class Measured:
    """One model's timed steps."""

    step_seconds: List[float]
    tokens_per_step: float  # over every rank
    memory_gb: float

    @property
    def tokens_per_s(self) -> float:
        """Over every rank, at the median step."""
        return self.tokens_per_step / statistics.median(self.step_seconds)

    def summary(self, flops_per_token: float, world_size: int, peak: float) -> Dict[str, float]:
        step = statistics.median(self.step_seconds)
        tokens_per_s = self.tokens_per_s
        tflops = flops_per_token * tokens_per_s / world_size / 1e12  # per device
        return {"step_s": _figure(step), "tokens_per_s": _figure(tokens_per_s),
                "tokens_per_s_per_device": _figure(tokens_per_s / world_size),
                "tflops_per_device": _figure(tflops), "mfu": _figure(tflops / peak),
                "memory_gb": _figure(self.memory_gb)}


def _figure(value: float) -> float:
    """Four significant digits (a tiny model's TFLOP/s are not rounded to zero)."""
    return float(f"{value:.4g}")


# ---- flags ------------------------------------------------------------------------------------
def known_flags(candidates: List[str]) -> Tuple[List[str], Dict[str, str]]:
    """(the candidates our parser accepts, {each other one: why it was left out})."""
    from mindspeed_llm.arguments import build_parser

    options = build_parser()._option_string_actions  # every option string the parser accepts
    kept = [flag for flag in candidates if flag in options]
    return kept, {flag: "not a flag of this checkout's parser yet" for flag in candidates if flag not in options}


def fast_flags(base_argv: List[str], tiny: bool, world_size: int) -> Tuple[List[str], Dict[str, str]]:
    """The fast-path flags this run adds to ``base_argv`` (with their tiny-mode companions), and each skipped
    one with the reason: not a flag of this checkout, no cheap companion in tiny mode, or refused by the
    validation in this combination."""
    kept, skipped = known_flags(FAST_FLAGS)
    chosen: Dict[str, List[str]] = {}
    for flag in kept:
        if tiny and flag in TINY_SKIPPED:
            skipped[flag] = TINY_SKIPPED[flag]
            continue
        companions, why = TINY_COMPANIONS.get(flag, ([], "")) if tiny else ([], "")
        if companions and not known_flags(companions[:1])[0]:
            skipped[flag] = why
        else:
            chosen[flag] = [flag] + companions
    chosen, refused = validated_flags(base_argv, chosen, world_size)
    return [token for tokens in chosen.values() for token in tokens], {**skipped, **refused}


def validated_flags(base_argv: List[str], flags: Dict[str, List[str]],
                    world_size: int) -> Tuple[Dict[str, List[str]], Dict[str, str]]:
    """Drop each of ``flags`` (flag -> its argv tokens) that the validation refuses with ``base_argv``, its
    one-line error the reason."""
    from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args

    kept, refused = dict(flags), {}
    while True:
        try:
            validate_args(parse_args(base_argv + [token for tokens in kept.values() for token in tokens]), world_size)
            return kept, refused
        except ArgumentError as error:
            culprit = next((flag for flag in kept if flag in str(error)), None)
            if culprit is None:  # the bench's own flags are wrong: say so
                raise
            del kept[culprit]
            refused[culprit] = f"refused with these flags: {error}"


def our_argv(shape: Shape, variant: str, world_size: int, tiny: bool, peak: Optional[float]) -> List[str]:
    """Our trainer's flags for ``variant`` (single, fsdp2, tp2) on ``world_size`` ranks."""
    tp = 2 if variant == "tp2" else 1
    dp = world_size // tp
    argv = ["--num-layers", str(shape.layers), "--hidden-size", str(shape.hidden),
            "--num-attention-heads", str(shape.heads), "--group-query-attention",
            "--num-query-groups", str(shape.kv_heads), "--ffn-hidden-size", str(shape.ffn),
            "--seq-length", str(shape.seq), "--max-position-embeddings", str(shape.seq),
            "--position-embedding-type", "rope", "--rotary-base", str(shape.rope_base),
            "--normalization", "RMSNorm", "--norm-epsilon", "1e-5", "--swiglu", "--disable-bias-linear",
            "--attention-dropout", "0", "--hidden-dropout", "0",
            "--micro-batch-size", str(shape.micro_batch), "--global-batch-size", str(shape.global_batch * dp),
            "--train-iters", "1000", "--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", str(shape.vocab), "--make-vocab-size-divisible-by", "1", "--eval-iters", "0",
            "--num-workers", "0" if tiny else "2", "--bf16"]
    if tiny:
        argv += ["--device", "cpu"]
    if peak:
        argv += ["--peak-tflops", str(peak)]
    if variant == "fsdp2":
        argv += ["--use-torch-fsdp2"]  # shards the optimizer state itself: no --use-distributed-optimizer
    else:
        argv += ["--use-distributed-optimizer"]
    if tp > 1:
        argv += ["--tensor-model-parallel-size", str(tp), "--sequence-parallel"]
    return argv


# ---- timing -----------------------------------------------------------------------------------
def time_steps(step: Callable[[], Any], warmup: int, steps: int) -> List[float]:
    """Seconds of each of ``steps`` steps after ``warmup`` untimed ones, synchronised with the device."""
    from core.device import accelerator

    acc = accelerator()
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        acc.synchronize()
        start = time.perf_counter()
        step()
        acc.synchronize()
        times.append(time.perf_counter() - start)
    return times


def reset_memory() -> None:
    """Free what the last model left and restart the device's peak-memory counter."""
    from core.device import accelerator

    gc.collect()
    module = accelerator().module
    if module is not None:
        module.empty_cache()
        module.reset_peak_memory_stats()


# ---- the two models ---------------------------------------------------------------------------
def model_flops_per_token(argv: List[str], world_size: int) -> float:
    """Training FLOPs per token of the model ``argv`` describes (our documented formula, both models' MFU)."""
    from mindspeed_llm.arguments import parse_args, transformer_config_from_args, validate_args
    from mindspeed_llm.training.metrics import training_flops_per_token

    args = parse_args(argv)
    validate_args(args, world_size)
    return training_flops_per_token(transformer_config_from_args(args), args.seq_length)


def measure_ours(argv: List[str], warmup: int, steps: int) -> Tuple[Measured, int]:
    """Our trainer on ``argv``: (its steps, parameters on this rank)."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    tokens: List[float] = []

    def step() -> None:
        tokens.append(trainer.train_step(iterator).tokens)

    times = time_steps(step, warmup, steps)
    params = sum(_local(p).numel() for model in trainer.models for p in model.parameters())
    return Measured(times, tokens[-1], trainer.acc.max_memory_gb()), params  # the trainer is freed on return


def _local(param: torch.Tensor) -> torch.Tensor:
    """This rank's shard of an FSDP2 parameter (a DTensor); any other parameter itself."""
    return param.to_local() if hasattr(param, "to_local") else param


def hf_llama(shape: Shape, device: torch.device) -> torch.nn.Module:
    """transformers' Llama of ``shape``, random weights, pure bf16, on ``device``, in training mode."""
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.ffn,
                         num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.kv_heads, max_position_embeddings=shape.seq,
                         rope_theta=shape.rope_base, rms_norm_eps=1e-5, tie_word_embeddings=True,
                         attention_dropout=0.0, attn_implementation="sdpa")
    torch.manual_seed(0)
    with device:
        model = LlamaForCausalLM(config)
    return model.to(torch.bfloat16).train()


def measure_baseline(shape: Shape, backend: str, warmup: int, steps: int) -> Measured:
    """transformers + fused AdamW + torch.compile(``backend``), ``shape.micro_batches`` micro-batches a step."""
    from core.device import accelerator

    acc = accelerator()
    model = hf_llama(shape, acc.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    compiled = torch.compile(model, backend=backend)
    generator = torch.Generator().manual_seed(0)
    batches = [torch.randint(0, shape.vocab, (shape.micro_batch, shape.seq), generator=generator).to(acc.device)
               for _ in range(shape.micro_batches)]  # [b, s] each

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        for ids in batches:
            loss = compiled(input_ids=ids, labels=ids).loss / len(batches)  # labels shifted inside
            loss.backward()
        optimizer.step()

    times = time_steps(step, warmup, steps)
    return Measured(times, shape.global_batch * shape.seq, acc.max_memory_gb())


# ---- variants (torchrun) ----------------------------------------------------------------------
def shape_args(shape: Shape) -> List[str]:
    return ["--layers", str(shape.layers), "--hidden", str(shape.hidden), "--heads", str(shape.heads),
            "--kv-heads", str(shape.kv_heads), "--ffn", str(shape.ffn), "--vocab", str(shape.vocab),
            "--seq", str(shape.seq), "--micro-batch", str(shape.micro_batch),
            "--global-batch", str(shape.global_batch)]


def run_variant(variant: str, args: argparse.Namespace, shape: Shape, nproc: int = 2) -> Dict[str, Any]:
    """``torchrun --nproc-per-node 2`` of this file for one variant; its rank 0's JSON (or the failure)."""
    import core

    root = os.path.dirname(os.path.dirname(os.path.abspath(core.__file__)))  # the checkout the driver imports
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
               os.path.abspath(__file__), "--variant", variant, "--steps", str(args.steps),
               "--warmup", str(args.warmup), *shape_args(shape)]
    command += ["--tiny"] if args.tiny else []
    command += ["--peak-tflops", str(args.peak_tflops)] if args.peak_tflops else []
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.variant_timeout)
    sys.stderr.write(done.stderr[-4000:])
    records = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not records:
        return {"error": f"exit {done.returncode}: {(done.stderr.strip().splitlines() or [''])[-1][:300]}"}
    return json.loads(records[-1])


def variant_worker(args: argparse.Namespace, shape: Shape) -> None:
    """One rank of a torchrun variant: our trainer only; rank 0 prints the JSON line."""
    from core.device import peak_tflops

    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    argv = our_argv(shape, args.variant, world_size, args.tiny, args.peak_tflops)
    flags, skipped = fast_flags(argv, args.tiny, world_size)
    flops = model_flops_per_token(argv, world_size)
    with contextlib.redirect_stdout(sys.stderr):
        measured, params = measure_ours(argv + flags, args.warmup, args.steps)
        peak = peak_tflops(args.peak_tflops, half_precision=True)
    if int(os.environ.get("RANK", "0")) == 0:
        print(json.dumps({"world_size": world_size, "params_per_rank": params, "flags": flags,
                          "skipped_flags": skipped,
                          **measured.summary(flops, world_size, peak)}), flush=True)


def device_count() -> int:
    from core.device import accelerator

    module = accelerator().module
    return 1 if module is None else int(module.device_count())


def variants(args: argparse.Namespace, shape: Shape) -> Dict[str, Any]:
    """Each variant's figures, or why it was skipped."""
    count = device_count()
    if args.variants == "off":
        return {name: {"skipped": "--variants off"} for name in VARIANTS}
    if args.variants == "auto" and count < 2:
        return {name: {"skipped": f"{count} device(s): the variants need 2 (--variants on runs them on the CPU "
                                  "in tiny mode)"} for name in VARIANTS}
    if count < 2 and not args.tiny:
        return {name: {"skipped": f"{count} device(s) and not tiny: 2 devices needed"} for name in VARIANTS}
    return {name: run_variant(name, args, shape) for name in VARIANTS}


# ---- driver -----------------------------------------------------------------------------------
def bench(args: argparse.Namespace, shape: Shape) -> Dict[str, Any]:
    """Ours and the baseline on one device, then the variants: the JSON record."""
    from core.device import accelerator, init_accelerator, peak_tflops

    acc = init_accelerator("cpu" if args.tiny else None)
    argv = our_argv(shape, "single", 1, args.tiny, args.peak_tflops)
    flags, skipped = fast_flags(argv, args.tiny, 1)
    flops, peak = model_flops_per_token(argv, 1), peak_tflops(args.peak_tflops, half_precision=True)
    backend = args.compile_backend or ("eager" if args.tiny else "inductor")
    record: Dict[str, Any] = {
        "bench": "gpu_mfu", "mode": "tiny" if args.tiny else "full", "device": accelerator().name(),
        "device_type": acc.type, "device_count": device_count(), "peak_tflops": peak, "model": str(shape),
        "flops_per_token": flops, "dtype": "bf16", "threads": torch.get_num_threads(), "flags": flags,
        "skipped_flags": skipped}
    reset_memory()
    ours = guarded("ours", lambda: measure_ours(argv + flags, args.warmup, args.steps))
    reset_memory()
    baseline = guarded("baseline", lambda: measure_baseline(shape, backend, args.warmup, args.steps))
    reset_memory()
    if isinstance(ours, tuple):
        record["params"] = ours[1]
        ours = ours[0]
    record["ours"] = ours.summary(flops, 1, peak) if isinstance(ours, Measured) else ours
    name = f"transformers LlamaForCausalLM bf16 + AdamW(fused) + torch.compile({backend})"
    record["baseline"] = {"name": name, **(baseline.summary(flops, 1, peak) if isinstance(baseline, Measured)
                                           else baseline)}
    if isinstance(ours, Measured) and isinstance(baseline, Measured):
        record["ratio_ours_vs_baseline"] = _figure(ours.tokens_per_s / baseline.tokens_per_s)
    record["ours_fp8"] = fp8_row(args, acc.type, argv + flags, ours, flops, peak)
    record["variants"] = variants(args, shape)
    return record


FP8_FORMATS = {"rowwise": "e4m3", "blockwise": "e4m3"}  # the others: hybrid (E4M3 forward, E5M2 gradients)


def fp8_row(args: argparse.Namespace, device_type: str, argv: List[str], bf16: Any, flops: float,
            peak: float) -> Dict[str, Any]:
    """Our trainer again with FP8 linears (``--fp8-recipe``; auto: tensorwise where the device has FP8 matrix
    units), beside the bf16 row: tokens/s, MFU against the same dense bf16 peak, and the ratio to bf16."""
    from core.device import fp8_matmul

    recipe = args.fp8_recipe
    if recipe == "off":
        return {"skipped": "--fp8-recipe off"}
    if recipe == "auto":
        facts = fp8_matmul(device_type)
        if not facts.fast:
            return {"skipped": f"{facts.device}: {facts.why_not_fast} (--fp8-recipe R runs the emulation anyway)"}
        recipe = "tensorwise"
    fp8 = ["--fp8-format", FP8_FORMATS.get(recipe, "hybrid"), "--fp8-recipe", recipe]
    reset_memory()
    measured = guarded("ours_fp8", lambda: measure_ours(argv + fp8, args.warmup, args.steps))
    reset_memory()
    if not isinstance(measured, tuple):
        return {"flags": fp8, **measured}
    row = {"flags": fp8, **measured[0].summary(flops, 1, peak)}
    if isinstance(bf16, Measured):
        row["ratio_fp8_vs_bf16"] = _figure(measured[0].tokens_per_s / bf16.tokens_per_s)
    return row


def guarded(name: str, measure: Callable[[], Any]) -> Any:
    """``measure()``, or ``{"error": ...}`` when it fails (out of memory, say): the other runs still report."""
    try:
        return measure()
    except Exception as error:  # noqa: BLE001  (a bench reports every failure and goes on)
        traceback.print_exc()
        first_line = (str(error).strip().splitlines() or [""])[0][:300]
        print(f"{name} failed: {type(error).__name__}: {first_line}", file=sys.stderr)
        return {"error": f"{type(error).__name__}: {first_line}"}


def parse_args(argv: Optional[List[str]] = None) -> Tuple[argparse.Namespace, Shape]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="a tiny model on the CPU, a few steps: seconds")
    parser.add_argument("--smoke", action="store_true", help="the same as --tiny (the bench smoke test's flag)")
    parser.add_argument("--steps", type=int, default=None, help="timed steps (default 10; tiny 2)")
    parser.add_argument("--warmup", type=int, default=None, help="untimed steps first (default 3; tiny 1)")
    parser.add_argument("--variants", choices=("auto", "on", "off"), default="auto",
                        help="FSDP2 / TP2 on 2 processes: auto = when 2 devices exist; on = also on the CPU (tiny)")
    parser.add_argument("--variant", choices=("single",) + VARIANTS, default=None,
                        help="internal: run one variant as a torchrun rank")
    parser.add_argument("--variant-timeout", type=float, default=1200.0, help="seconds per variant launch")
    parser.add_argument("--compile-backend", default=None, help="the baseline's torch.compile backend "
                                                                "(default inductor; tiny: eager)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="MFU denominator (default: the device's)")
    parser.add_argument("--fp8-recipe", default="auto",
                        choices=("auto", "off", "delayed", "tensorwise", "rowwise", "blockwise", "mxfp8"),
                        help="our trainer once more with FP8 linears: auto = tensorwise on a device with FP8 "
                             "matrix units, skipped elsewhere; a recipe runs it anyway (emulated without units)")
    for field in dataclasses.fields(Shape):  # --layers, --hidden, ..., --global-batch: override the shape
        kind = float if field.type == "float" else int
        parser.add_argument("--" + field.name.replace("_", "-"), type=kind, default=None)
    args = parser.parse_args(argv)
    args.tiny = args.tiny or args.smoke
    if args.tiny:  # a tiny model's ops are too small to share out; on a loaded 2-core CI, threads only contend
        torch.set_num_threads(1)
    args.steps = args.steps or (2 if args.tiny else 10)
    args.warmup = args.warmup if args.warmup is not None else (1 if args.tiny else 3)
    base = TINY if args.tiny else LLAMA_1B
    overrides = {f.name: getattr(args, f.name) for f in dataclasses.fields(Shape) if getattr(args, f.name) is not None}
    shape = dataclasses.replace(base, **overrides)
    if shape.global_batch % shape.micro_batch:
        parser.error(f"--global-batch {shape.global_batch} must be a multiple of --micro-batch {shape.micro_batch}")
    return args, shape


def main() -> None:
    args, shape = parse_args()
    if args.variant is not None:
        variant_worker(args, shape)
        return
    with contextlib.redirect_stdout(sys.stderr):  # stdout carries the JSON line alone
        record = bench(args, shape)
    print(json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
