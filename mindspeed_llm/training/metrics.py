"""Throughput figures and the per-iteration log line.

FLOPs per token (documented formula, counted as Megatron does: matrix
multiplies only, 2 FLOPs per multiply-add, backward = 2 x forward, causal
attention counted over the full ``s x s`` score matrix, noop layers skipped):

    per layer, forward  = 2 h (q + 2 kv)        QKV projection   (q = heads x hn, kv = groups x hn)
                        + 2 q h                 output projection
                        + 4 s q                 scores QK^T and context x V
                        + 2 h f x (3 | 2)       MLP: SwiGLU has three h x f matrices, GELU two
    logits, forward     = 2 h V_padded
    training FLOPs/token = 3 x (layers x per-layer + logits)

MFU = achieved FLOP/s per device / peak FLOP/s of the device
(``--peak-tflops``, else a per-device default from core/device.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

from core.transformer.config import TransformerConfig


def training_flops_per_token(config: TransformerConfig, seq_length: int) -> float:
    h, hn = config.hidden_size, config.kv_channels
    q = config.num_attention_heads * hn
    kv = config.num_key_value_heads * hn
    mlp_matrices = 3 if config.gated_linear_unit else 2  # SwiGLU or GeGLU: gate, up, down
    per_layer = 2 * h * (q + 2 * kv) + 2 * q * h + 4 * seq_length * q + 2 * h * config.ffn_hidden_size * mlp_matrices
    layers = config.num_layers - len(config.noop_layers)
    logits = 2 * h * config.padded_vocab_size  # the output layer multiplies the padded vocabulary
    return 3.0 * (layers * per_layer + logits)


@dataclass
class IterationStats:
    iteration: int
    train_iters: int
    consumed_samples: int
    elapsed_ms: float
    learning_rate: float
    global_batch_size: int
    loss: float
    loss_scale: float
    grad_norm: Optional[float]
    skipped_iterations: int
    nan_iterations: int
    tokens_per_second: float
    tflops_per_device: float
    mfu: float
    memory_gb: float
    other_stats: Dict[str, float] = field(default_factory=dict)  # a task's statistics besides its loss


def format_log_line(s: IterationStats) -> str:
    """Megatron's iteration line (parsers keep working) with our fields appended."""
    grad_norm = "" if s.grad_norm is None else f" grad norm: {s.grad_norm:.3f} |"
    others = "".join(f" {name}: {value:.6E} |" for name, value in s.other_stats.items())
    return (f" iteration {s.iteration:8d}/{s.train_iters:8d} |"
            f" consumed samples: {s.consumed_samples:12d} |"
            f" elapsed time per iteration (ms): {s.elapsed_ms:.1f} |"
            f" learning rate: {s.learning_rate:.6E} |"
            f" global batch size: {s.global_batch_size:5d} |"
            f" lm loss: {s.loss:.6E} |{others}"
            f" loss scale: {s.loss_scale:.1f} |{grad_norm}"
            f" number of skipped iterations: {s.skipped_iterations:3d} |"
            f" number of nan iterations: {s.nan_iterations:3d} |"
            f" tokens per second: {s.tokens_per_second:.1f} |"
            f" TFLOP/s per device: {s.tflops_per_device:.2f} |"
            f" MFU: {100 * s.mfu:.1f}% |"
            f" memory (GB): {s.memory_gb:.2f} |")
