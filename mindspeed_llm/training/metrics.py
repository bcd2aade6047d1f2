"""Throughput figures and the per-iteration log line.

FLOPs per token (documented formula, counted as Megatron does: matrix
multiplies only, 2 FLOPs per multiply-add, backward = 2 x forward, causal
attention counted over the full ``s x s`` score matrix, noop layers skipped):

    per layer, forward  = 2 h (q + 2 kv)        QKV projection   (q = heads x hn, kv = groups x hn)
                        + 2 q h                 output projection
                        + 4 s q                 scores QK^T and context x V
                        + 2 h f x (3 | 2)       MLP: SwiGLU has three h x f matrices, GELU two
    (a hybrid pattern's layer counts only the branch it has: '*' attention, '-'/'E' the MLP)
    MoE layer's MLP, forward = 2 h E                           the router's scores over E experts
                        + k x 2 h f_e x (3 | 2)               the top-k experts a token visits (f_e: an expert's FFN)
                        + 2 h f_s x (3 | 2) [+ 2 h]            the shared expert (and its gate)
    MLA attention (``mla_attention_flops`` in core/transformer/mla.py), forward
                        = 2 h q_r + 2 q_r H (d + r)           queries through the latent (2 h H (d + r) without one)
                        + 2 h (c + r) + 2 c H (d + v)         the KV latent and its up projection
                        + 2 H v h                             output projection
                        + 2 s' H (d + r) + 2 s' H v           scores and context over s' keys (s' = s, or under
                                                              DSA the top-k, except in the dense warm-up)
                        (H heads, d/r/v: the nope/rope/value head dims, q_r/c: the q/kv latent ranks)
    DSA lightning indexer, forward = 2 q_r n_i d_i + 2 h d_i + 2 h n_i   its projections (layers that select)
                        + 2 s n_i d_i                          its scores over every key
    DeepSeek-V4 attention: its projections, the window and entries each query reads, the CSA indexer's scores
                        (``compressed_attention_flops`` in core/transformer/compressed_attention.py)
    gated DeltaNet, forward = 2 h (2 nk dk + 2 nv dv + 2 nv) + 2 nv dv h   in/out projections
                        + 6 nv dk dv                          the delta rule (state reads and update)
    Mamba layer, forward = 2 h (in_proj rows) + 2 d_inner h           in/out projections
                        + 2 d_inner (r + 2 n) + 2 r d_inner   Mamba1's x_proj and dt_proj (r: dt rank)
                        + 7/3 d_inner n                       the scan (Megatron's hybrid count: 7 d_inner n
                                                              per token for forward + backward)
    short-conv layer, forward = 2 h 3h + 2 h h + 2 k h  in_proj ([B; C; x]), out_proj and the depthwise conv of width k
                        + 2 h f x (3 | 2)             its MLP
    'Z' layer (Zamba), forward = the attention above over 2h input channels + the MLP + 2 h h (its projection)
                        + 2 r (h + fc1 rows) [+ 2 r (6h + q + 2 kv)]   its adapters (rank r; attention ones)
                        + the Mamba layer
    logits, forward     = 2 h V_padded
    MTP module, forward = 2 (2h) h n + per-layer + logits  eh_proj (per hyper-connection stream: n, else 1), its
                                                          transformer layer, the shared output layer
    training FLOPs/token = 3 x (layers x per-layer + logits + mtp_num_layers x MTP module)

With the base weights frozen (a model transform that trains adapters) the weight matmuls need no weight
gradient: they count twice, not three times (the adapters' own matmuls, rank r, are left out). A frozen
model's extra forward per trained token (DPO's reference, ``TrainingTask.reference_forwards``) adds the
forward FLOPs once more.
The tokens are the positions the trained model processes: rows x length of every micro-batch, a
preference pair being two rows and a micro-batch padded only to its longest sample counting that length.

MFU = achieved FLOP/s per device / peak FLOP/s of the device
(``--peak-tflops``, else a per-device default from core/device.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from core.transformer.compressed_attention import compressed_attention_flops
from core.transformer.mla import mla_attention_flops
from core.transformer.config import (ATTENTION_MIXER, GDN_MIXER, KDA_MIXER, LIGHTNING_MIXER, MAMBA_MIXER,
                                     MLSTM_MIXER, PARALLEL_HYBRID_MIXER, RG_LRU_MIXER, RWKV_CHANNEL_MIX, RWKV_TIME_MIX,
                                     MOE_MLP, SHARED_BLOCK_MAMBA_MIXER, SHORT_CONV_MIXER, TransformerConfig)


def forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """Forward FLOPs per token: (matrix multiplies by weights, those between activations: scores and scan),
    summed over the real layers by what each holds (``TransformerConfig.layer_parts``)."""
    h = config.hidden_size
    weights, activations = 0.0, 0.0
    for layer in range(config.num_layers):
        if layer in set(config.noop_layers):
            continue
        mixer, mlp = config.layer_parts(layer)
        mixer_weights, mixer_activations = mixer_flops(config, seq_length, layer, mixer)
        weights += mixer_weights + branch_mlp_flops(config, mlp)
        activations += mixer_activations
    logits = 2 * h * config.padded_vocab_size  # the output layer multiplies the padded vocabulary
    mtp = config.mtp_num_layers or 0  # --mtp-num-layers modules: eh_proj, a transformer layer, the output layer
    last = config.num_layers - 1  # an MTP module's layer is built as the last decoder layer
    mixer, mlp = config.layer_parts(last)
    mtp_weights, mtp_activations = mixer_flops(config, seq_length, last, mixer, config.mtp_attention_kind)
    streams = config.mhc_num_residual_streams if config.enable_mhc_connections else 1  # eh_proj reads each stream
    weights += logits + mtp * (2 * 2 * h * h * streams + mtp_weights + branch_mlp_flops(config, mlp) + logits)
    return weights, activations + mtp * mtp_activations


def mixer_flops(config: TransformerConfig, seq_length: int, layer: int, mixer: Optional[str],
                kind: Optional[str] = None) -> Tuple[float, float]:
    """Layer ``layer``'s token mixer (``TransformerConfig.layer_parts``): (weights, activations) per token; an
    attention layer by its kind (compressed attention, of the letter ``kind`` when given; MLA with DSA; standard)."""
    if mixer is None:
        return 0.0, 0.0
    if mixer == ATTENTION_MIXER and config.compressed_attention_pattern is not None:
        return compressed_attention_flops(config, seq_length, layer, kind)
    if mixer == ATTENTION_MIXER and config.multi_latent_attention:
        return mla_attention_flops(config, seq_length, layer)
    return MIXER_FLOPS[mixer](config, seq_length)


def branch_mlp_flops(config: TransformerConfig, mlp: Optional[str]) -> float:
    """A layer's MLP branch (``TransformerConfig.layer_parts``): dense, MoE or none."""
    if mlp is None:
        return 0.0
    return moe_forward_flops_per_token(config) if mlp == MOE_MLP else mlp_forward_flops_per_token(config)


def attention_forward_flops_per_token(config: TransformerConfig, seq_length: int,
                                      input_size: Optional[int] = None) -> Tuple[float, float]:
    """One attention branch reading ``input_size`` channels (the hidden size unless given): (QKV, the output gate
    and the output projection; scores and context)."""
    h, hn = config.hidden_size, config.kv_channels
    width = input_size or h
    q, kv = config.num_attention_heads * hn, config.num_key_value_heads * hn
    gate_rows = config.num_attention_heads if config.attention_output_gate_per_head else q
    gate = 2 * width * gate_rows if config.attention_output_gate else 0
    return 2 * width * (q + 2 * kv) + 2 * q * h + gate, 4 * seq_length * q


def shared_block_mamba_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """One 'Z' layer (Zamba): its shared block (attention over 2h channels, the MLP), its h x h projection,
    its adapters (rank r: down and up of the MLP's and, with attention adapters, of q, k and v) and its Mamba."""
    h, rank = config.hidden_size, config.shared_block_adapter_rank or 0
    attention = attention_forward_flops_per_token(config, seq_length, input_size=2 * h)
    mamba = mamba_forward_flops_per_token(config, seq_length)
    fc1_rows = config.ffn_hidden_size * (2 if config.gated_linear_unit else 1)
    adapters = 2 * rank * (h + fc1_rows)
    if config.shared_block_attention_adapters:
        q, kv = config.num_attention_heads * config.kv_channels, config.num_key_value_heads * config.kv_channels
        adapters += 2 * rank * (3 * 2 * h + q + 2 * kv)
    weights = attention[0] + mlp_forward_flops_per_token(config) + 2 * h * h + adapters + mamba[0]
    return weights, attention[1] + mamba[1]


def ffn_flops(config: TransformerConfig, ffn_hidden_size: int) -> float:
    """One feed-forward network of ``ffn_hidden_size``: three h x f matrices gated (SwiGLU), two otherwise."""
    return 2 * config.hidden_size * ffn_hidden_size * (3 if config.gated_linear_unit else 2)


def mlp_forward_flops_per_token(config: TransformerConfig) -> float:
    """One dense MLP branch (--ffn-hidden-size)."""
    return ffn_flops(config, config.ffn_hidden_size)


def moe_forward_flops_per_token(config: TransformerConfig) -> float:
    """One MoE branch per token: the router, the top-k experts it visits, the shared expert and its gate."""
    h = config.hidden_size
    flops = 2 * h * config.num_experts + config.moe_router_topk * ffn_flops(config, config.moe_expert_ffn_hidden_size)
    if config.moe_shared_expert_intermediate_size is not None:
        flops += ffn_flops(config, config.moe_shared_expert_intermediate_size)
        flops += 2 * h if config.shared_expert_gate else 0
    return flops


def gated_delta_net_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """One gated DeltaNet: (its projections; the delta rule, counted as the recurrence: per value head a
    key read of the state, its rank-one update and the query read, 2 dk dv each)."""
    h = config.hidden_size
    keys, values = config.linear_num_key_heads, config.linear_num_value_heads
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    in_rows = 2 * keys * dk + 2 * values * dv + 2 * values  # [q; k; v; z] and [b; a]
    return 2 * h * in_rows + 2 * values * dv * h, 6 * values * dk * dv


def kimi_delta_attention_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """One Kimi Delta Attention mixer: (its projections, the low-rank gates' up projections, or the full-rank
    gates; the delta rule as the gated DeltaNet's, the per-channel decay adding one elementwise pass over the
    state)."""
    h = config.hidden_size
    keys, values = config.linear_num_key_heads, config.linear_num_value_heads
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    if config.kda_full_rank_gates:  # [q; k; v; b; f; g], no up projections
        in_rows, up = 2 * keys * dk + values * dv + values + values * dk + values * dv, 0
    else:
        in_rows = 2 * keys * dk + values * dv + values + dk + dv  # [q; k; v; b; f_a; g_a]
        up = 2 * dk * values * dk + 2 * dv * values * dv  # f_b, g_b
    return 2 * h * in_rows + up + 2 * values * dv * h, 6 * values * dk * dv


def lightning_attention_forward_flops_per_token(config: TransformerConfig, seq_length: int
                                               ) -> Tuple[float, float]:
    """One lightning-attention mixer (MiniMax): (in_proj to [qkv; gate] and out_proj; the recurrence: per head
    the state update v k^T and the query read, 2 d^2 each)."""
    h, heads, d = config.hidden_size, config.linear_num_value_heads, config.linear_value_head_dim
    return 2 * h * 4 * heads * d + 2 * heads * d * h, 4 * heads * d * d


def short_conv_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """One short convolution (LFM2): in_proj to [B; C; x], out_proj and the depthwise conv (2 k h, a weight
    with its gradient like the projections); nothing between activations."""
    h = config.hidden_size
    return 2 * h * 3 * h + 2 * h * h + 2 * config.short_conv_kernel_size * h, 0.0


def training_flops_per_token(config: TransformerConfig, seq_length: int, frozen_weights: bool = False) -> float:
    """FLOPs of one training token: forward, input gradients and (unless the weights are frozen by a
    transform) weight gradients of every weight matmul; forward and both gradients of the score/scan matmuls."""
    weights, activations = forward_flops_per_token(config, seq_length)
    weight_passes = 2.0 if frozen_weights else 3.0  # a frozen weight needs no weight gradient
    return weight_passes * weights + 3.0 * activations


def mamba_forward_flops_per_token(config: TransformerConfig, seq_length: int = 0) -> Tuple[float, float]:
    """Forward FLOPs per token of one Mamba layer (module docstring): (its weight matmuls, the scan)."""
    h, inner, n = config.hidden_size, config.mamba_d_inner, config.mamba_state_dim
    if config.mamba_version == 1:
        r = config.mamba_dt_rank_or_default
        in_rows, extra = 2 * inner, 2 * inner * (r + 2 * n) + 2 * r * inner
    else:
        in_rows, extra = 2 * inner + 2 * config.mamba_num_groups * n + config.mamba_num_heads, 0
    return 2 * h * in_rows + 2 * inner * h + extra, 7 * inner * n / 3


def mamba_and_attention_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """One 'H' mixer (Falcon-H1): its Mamba mixer and its attention, side by side."""
    mamba, attention = (mamba_forward_flops_per_token(config, seq_length),
                        attention_forward_flops_per_token(config, seq_length))
    return mamba[0] + attention[0], mamba[1] + attention[1]


def rg_lru_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """One Griffin recurrent block: (linear_y, linear_x, linear_out, the two block-diagonal gates and the conv;
    nothing between activations: the recurrence is elementwise)."""
    h, w = config.hidden_size, config.lru_width_or_default
    block = w // config.num_attention_heads
    return 2 * h * 2 * w + 2 * w * h + 2 * 2 * w * block + 2 * config.lru_conv_width * w, 0.0


def rwkv_time_mix_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """RWKV-4 time mixing: (key, value, receptance and output; the WKV recurrence is elementwise)."""
    h, a = config.hidden_size, config.rwkv_attention_size_or_default
    return 2 * h * 3 * a + 2 * a * h, 0.0


def rwkv_channel_mix_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """RWKV-4 channel mixing: (key, value and the h x h receptance; nothing between activations)."""
    h, ffn = config.hidden_size, config.ffn_hidden_size
    return 2 * h * ffn * 2 + 2 * h * h, 0.0


def mlstm_forward_flops_per_token(config: TransformerConfig, seq_length: int) -> Tuple[float, float]:
    """One mLSTM mixer (xLSTM): (in_proj to [q; k; v; o], the gate projection and out_proj; the cell: per head the
    memory update k v^T and the query read, 2 dk dv each)."""
    h, heads = config.hidden_size, config.linear_num_value_heads
    dk, dv = config.linear_key_head_dim, config.linear_value_head_dim
    return 2 * h * heads * (2 * dk + 2 * dv) + 2 * h * 2 * heads + 2 * heads * dv * h, 4 * heads * dk * dv


# a layer's token mixer (TransformerConfig.layer_parts) -> its forward FLOPs per token (weights, activations)
MIXER_FLOPS: Dict[str, Callable[[TransformerConfig, int], Tuple[float, float]]] = {
    ATTENTION_MIXER: attention_forward_flops_per_token, MAMBA_MIXER: mamba_forward_flops_per_token,
    GDN_MIXER: gated_delta_net_forward_flops_per_token, KDA_MIXER: kimi_delta_attention_forward_flops_per_token,
    LIGHTNING_MIXER: lightning_attention_forward_flops_per_token, SHORT_CONV_MIXER: short_conv_forward_flops_per_token,
    PARALLEL_HYBRID_MIXER: mamba_and_attention_forward_flops_per_token, RG_LRU_MIXER: rg_lru_forward_flops_per_token,
    RWKV_TIME_MIX: rwkv_time_mix_forward_flops_per_token, RWKV_CHANNEL_MIX: rwkv_channel_mix_forward_flops_per_token,
    MLSTM_MIXER: mlstm_forward_flops_per_token, SHARED_BLOCK_MAMBA_MIXER: shared_block_mamba_forward_flops_per_token}


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


# --timing-log-level: the regions (core/timers.py) each level prints
TIMING_REGIONS = {1: ("forward-backward", "forward-compute", "backward-compute", "batch-generator", "grads-reduce",
                      "optimizer"),
                  2: ("pipeline-p2p", "rollout")}


def timing_regions(level: int) -> Tuple[str, ...]:
    """The regions ``--timing-log-level level`` prints."""
    return tuple(name for threshold, names in sorted(TIMING_REGIONS.items()) if level >= threshold for name in names)


def format_timing(names: Sequence[str], per_rank: Sequence[Sequence[float]], option: str) -> str:
    """Megatron's timer block: each region's milliseconds per step, as ``option`` (max, minmax or all) across
    ``per_rank`` (one list of values per rank, in ``names`` order)."""
    title = {"max": "max time across ranks (ms):", "minmax": "(min, max) time across ranks (ms):",
             "all": "times across ranks (ms):"}[option]
    lines = [title]
    for index, name in enumerate(names):
        values: List[float] = [rank[index] for rank in per_rank]
        if option == "max":
            shown = f"{max(values):.2f}"
        elif option == "minmax":
            shown = f"({min(values):.2f}, {max(values):.2f})"
        else:
            shown = "(" + ", ".join(f"{v:.2f}" for v in values) + ")"
        lines.append(f"    {name} {'.' * max(48 - len(name), 3)}: {shown}")
    return "\n".join(lines)
