"""Full fine-tuning against LoRA r=16 and QLoRA: tokens/s, peak memory and optimizer bytes, as ratios to full.

    python bench/lora.py [--dtype bf16|fp32] [--steps 2] [--rounds 2] [--warmup 1]
    python bench/lora.py --smoke     # a tiny model, one timed step per mode: seconds

The Llama-shaped bench model of ``bench/train_throughput.py`` (8 layers, hidden 512, 8 heads, FFN 1408,
vocab 32000, untied embeddings, seq 512, micro batch 4; ``bench/activation_memory.py``'s flags, dropout 0)
is trained by our ``Trainer`` (Adam, one process) in three modes:

* ``full``: every parameter trained (the baseline);
* ``lora``: ``--lora-target-modules linear_qkv linear_proj linear_fc1 linear_fc2 --lora-r 16 --lora-alpha 32``;
* ``qlora``: the same with ``--qlora`` (those base linears stored as NF4, dequantised on the fly).

Per mode, after the warm-up steps (the optimizer state exists):

* ``static_mb``: what stays allocated between steps: weights (NF4 storage included), gradient buffers and
  optimizer state (the device allocator's count on a GPU/NPU; on the CPU those tensors' bytes summed);
* ``peak_mb``: ``static_mb`` plus the peak allocated above it during one training iteration (measured as
  ``bench/activation_memory.py`` does: allocator statistics on a device, storages counted on the CPU);
* ``optimizer_mb``: this rank's optimizer state: Adam's moments plus fp32 master weights where they are copies;
* ``trainable_share``: trained parameters over the full model's parameter count;
* ``tokens_per_s``: the median over timed steps, the modes alternating in blocks so machine drift hits all.

Each figure is also given as a ratio to ``full``. Prints one JSON line; ``lora_optimizer_under_2pct`` says
whether LoRA's optimizer memory is under 2% of full fine-tuning's (the target, on the bench model).
"""
from __future__ import annotations

import argparse
import gc
import json
from typing import Dict

import torch

from activation_memory import SHAPES, MemoryProbe, compare_modes, trainer_argv  # the same model and memory probe

TARGETS = ["--lora-target-modules", "linear_qkv", "linear_proj", "linear_fc1", "linear_fc2", "--lora-r", "16",
           "--lora-alpha", "32"]
MODES = {"full": [], "lora": TARGETS, "qlora": TARGETS + ["--qlora"]}
MB = 1024 ** 2


def _bytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def optimizer_bytes(trainer) -> int:
    """Adam's moments plus the fp32 master weights that are copies (not the model's own storage)."""
    optimizer = trainer.optimizer
    masters = [p.master for p in optimizer.pieces] if hasattr(optimizer, "pieces") else optimizer.master_params
    model_storage = {p.untyped_storage().data_ptr() for model in trainer.models for p in model.parameters()}
    for buffers in trainer.dp.grad_buffers:
        model_storage |= {b.param_data.untyped_storage().data_ptr() for b in buffers.buffers
                          if b.param_data is not None}
    copies = _bytes(m for m in masters if m.untyped_storage().data_ptr() not in model_storage)
    moments = _bytes(v for state in optimizer.optimizer.state.values() for k, v in state.items() if k != "step")
    return copies + moments


def static_bytes(trainer) -> int:
    """Weights (NF4 storage included), gradient buffers and optimizer state, summed (the CPU's account)."""
    from mindspeed_llm.transforms.qlora import base_weight_bytes

    grads = sum(_bytes(b.data for b in buffers.buffers) for buffers in trainer.dp.grad_buffers)
    return base_weight_bytes(trainer.models) + grads + optimizer_bytes(trainer)


def measure_mode(trainer, iterator) -> Dict[str, float]:
    probe = MemoryProbe()
    gc.collect()
    static = probe.module.memory_allocated() if probe.module is not None else static_bytes(trainer)
    with probe.measuring():
        trainer.train_step(iterator)
    return {"static_mb": static / MB, "peak_mb": (static + probe.peak_above_start()) / MB,
            "optimizer_mb": optimizer_bytes(trainer) / MB}


def run(shape: Dict[str, int], dtype: str, steps: int, rounds: int, warmup: int) -> Dict[str, Dict[str, float]]:
    from mindspeed_llm.training.training import setup

    precision = ["--bf16"] if dtype == "bf16" else []
    trainers = {mode: setup(trainer_argv(shape, "none") + ["--optimizer", "adam"] + precision + flags)
                for mode, flags in MODES.items()}
    results = compare_modes(trainers, measure_mode, steps, rounds, warmup, shape["mbs"] * shape["seq"])
    full_params = sum(p.numel() for p in trainers["full"].model.parameters())
    for mode, trainer in trainers.items():
        trained = sum(p.numel() for p in trainer.model.parameters() if p.requires_grad)
        results[mode]["trainable_share"] = trained / full_params
    return results


def with_ratios(results: Dict[str, Dict[str, float]]) -> Dict[str, Dict[str, float]]:
    full = results["full"]
    table = {}
    for mode, result in results.items():
        row = {key: round(value, 6 if key == "trainable_share" else 1) for key, value in result.items()}
        for key in ("tokens_per_s", "peak_mb", "static_mb", "optimizer_mb"):
            row[f"{key.replace('_mb', '')}_ratio"] = round(result[key] / max(full[key], 1e-9), 4)
        table[mode] = row
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", choices=("bf16", "fp32"), default="bf16")
    parser.add_argument("--steps", type=int, default=2, help="timed steps per mode per block")
    parser.add_argument("--rounds", type=int, default=2, help="alternating blocks")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="a tiny model and one timed step: seconds")
    args = parser.parse_args()
    shape = SHAPES["smoke" if args.smoke else "llama"]
    steps, rounds = (1, 1) if args.smoke else (args.steps, args.rounds)
    from core.device import accelerator

    table = with_ratios(run(shape, args.dtype, steps, rounds, args.warmup))
    result = {"bench": "lora", "model": "llama L{layers} h{hidden} heads{heads} ffn{ffn} V{vocab} s{seq} mbs{mbs}"
              .format(**shape), "dtype": args.dtype, "device": accelerator().type,
              "threads": torch.get_num_threads(), "modes": table,
              "lora_optimizer_under_2pct": table["lora"]["optimizer_ratio"] < 0.02}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
