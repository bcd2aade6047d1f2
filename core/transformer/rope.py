"""Rotary position embeddings (RoPE) with linear, Llama-3 and YaRN frequency scaling.

Uses the half-rotation layout of Hugging Face checkpoints (first half of the
head dimension paired with the second half), so converted weights need no
permutation; ``--rope-interleaved`` pairs neighbouring dims instead (Helium). With ``--rotary-percent`` below 1 only the first
``config.rotary_dim`` dims of each head rotate (StableLM, Phi); the rest pass. With
``--local-rotary-base`` sliding-window layers use their own unscaled base
(Gemma3): the model then passes a :class:`LocalGlobalRotary`. YaRN also scales cos/sin by its attention
factor. With ``--attn-temperature-beta`` the rotary tuple carries a third tensor, the per-position query
scale ``[s, b|1, 1, 1]`` that attention applies after RoPE (Ministral3).

Applying RoPE goes through one dispatch (``core/fused.py``): with ``--use-fused-rotary-pos-emb``,
the vendor library's rotary multiply on an NPU, apex's ``fused_apply_rotary_pos_emb_cached`` on CUDA when apex is
installed, else a ``torch.compile``d :func:`apply_rotary`; the package kernels serve the half-rotation layout
over the whole head (and apex one angle table for the batch) and hand other calls to the reference.
``rotary_kernel(device_type, fused)`` says which.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple, Optional, Tuple, Union

import torch
from torch import nn

from core.device import VENDOR_KERNEL, kernels_by_device, vendor_op
from core.fused import FusedOp, decide_kernel, kernel_choice, register_fused_op
from core.transformer.config import TransformerConfig


class LocalGlobalRotary(NamedTuple):
    """``(cos, sin)`` of full-attention layers and of sliding-window layers (``--local-rotary-base``)."""

    full: Tuple[torch.Tensor, torch.Tensor]
    sliding: Tuple[torch.Tensor, torch.Tensor]


def layer_rotary(rotary: Union[None, Tuple[torch.Tensor, torch.Tensor], LocalGlobalRotary],
                 sliding: bool) -> Optional[Tuple[torch.Tensor, torch.Tensor]]:
    """The ``(cos, sin)`` a layer uses: its kind's when the model has per-kind tables."""
    if isinstance(rotary, LocalGlobalRotary):
        return rotary.sliding if sliding else rotary.full
    return rotary


def _default_inv_freq(dim: int, base: float) -> torch.Tensor:
    return 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))


def rope_inv_freq(config: TransformerConfig, local: bool = False) -> torch.Tensor:
    """Inverse frequencies ``[rotary_dim/2]`` (fp32) after the configured scaling; ``local``: those of
    sliding-window layers (``--local-rotary-base``, unscaled)."""
    dim = config.rope_dims(local)
    if local:
        return _default_inv_freq(dim, config.local_rotary_base)
    if config.rope_scaling_type == "proportional":
        return _proportional_inv_freq(dim, config)
    base = config.rotary_base
    if config.rope_ntk_alpha is not None:  # HunYuan: a fixed NTK stretch of the base
        base = base * config.rope_ntk_alpha ** (config.kv_channels / (config.kv_channels - 2))
    inv_freq = _default_inv_freq(dim, base)
    if config.rope_scaling_type == "linear":
        return inv_freq / config.rope_scaling_factor
    if config.rope_scaling_type == "llama3":
        return _llama3_scale(inv_freq, config)
    if config.rope_scaling_type == "yarn":
        return _yarn_inv_freq(config)
    return inv_freq


def _yarn_correction_dim(rotations: float, dim: int, base: float, context: int) -> float:
    """The dim whose wavelength fits ``rotations`` times into ``context`` positions."""
    return (dim * math.log(context / (rotations * 2 * math.pi))) / (2 * math.log(base))


def _yarn_inv_freq(config: TransformerConfig) -> torch.Tensor:
    """YaRN (transformers' ``_compute_yarn_parameters``): dims that rotate more than beta_fast times over the
    original context keep their frequency, those below beta_slow are divided by the factor, a linear ramp
    between; its bounds rounded out to whole dims unless --no-yarn-correction-range-round-to-int (GPT-OSS)."""
    dim, base, factor = config.rotary_dim, config.rotary_base, config.rope_scaling_factor
    context = config.rope_original_max_position_embeddings
    low = _yarn_correction_dim(config.rope_scaling_beta_fast, dim, base, context)
    high = _yarn_correction_dim(config.rope_scaling_beta_slow, dim, base, context)
    if config.yarn_correction_range_round_to_int:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # as transformers: no zero-width ramp
    pos_freqs = base ** (torch.arange(0, dim, 2).float() / dim)  # [rd/2]
    ramp = torch.clamp((torch.arange(dim // 2, dtype=torch.float32) - low) / (high - low), 0, 1)
    extrapolation = 1 - ramp  # share of the unscaled frequency per dim
    return (1.0 / (factor * pos_freqs)) * (1 - extrapolation) + (1.0 / pos_freqs) * extrapolation


def rope_attention_factor(config: TransformerConfig) -> float:
    """The factor on cos/sin (YaRN's mscale ratio; 1 otherwise)."""
    if config.rope_scaling_type != "yarn":
        return 1.0

    def mscale(scale: float, weight: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * weight * math.log(scale) + 1.0

    factor, weight, weight_all = (config.rope_scaling_factor, config.rope_scaling_mscale,
                                  config.rope_scaling_mscale_all_dim)
    if weight and weight_all:
        return float(mscale(factor, weight) / mscale(factor, weight_all))
    return mscale(factor)


def query_temperature(config: TransformerConfig, positions: torch.Tensor) -> torch.Tensor:
    """Per-position query scale ``1 + beta ln(1 + floor(p / length))`` for positions ``[s, b|1]`` (fp32),
    shaped ``[s, b|1, 1, 1]`` (``p + 1`` with ``--attn-temperature-nope-layers``: Llama 4)."""
    beta, length = config.attn_temperature_beta, config.attn_temperature_length
    if config.attn_temperature_nope_layers:  # Llama 4 counts positions from 1
        positions = positions + 1
    return (1 + beta * torch.log(1 + torch.floor(positions / length)))[..., None, None]


def _proportional_inv_freq(head_dim: int, config: TransformerConfig) -> torch.Tensor:
    """Gemma4's proportional RoPE over the whole head ``[head_dim/2]``: the first ``rotary_percent`` of the
    angles at ``base ** (-2i / head_dim)``, the rest 0 (those dims pass unrotated), all divided by the factor."""
    angles = int(config.rotary_percent * head_dim // 2)
    inv_freq = torch.zeros(head_dim // 2)
    inv_freq[:angles] = _default_inv_freq(head_dim, config.rotary_base)[:angles]
    return inv_freq / config.rope_scaling_factor


def _llama3_scale(inv_freq: torch.Tensor, config: TransformerConfig) -> torch.Tensor:
    """Llama 3.1: long wavelengths divided by the factor, short kept, a smooth ramp between."""
    factor = config.rope_scaling_factor
    low, high = config.rope_low_freq_factor, config.rope_high_freq_factor
    old_context = config.rope_original_max_position_embeddings
    low_freq_wavelen, high_freq_wavelen = old_context / low, old_context / high
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth = (old_context / wavelen - low) / (high - low)
    smoothed = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < high_freq_wavelen) & ~(wavelen > low_freq_wavelen)
    return torch.where(medium, smoothed, scaled)


class RotaryEmbedding(nn.Module):
    """Produces ``(cos, sin)`` of shape ``[s, 1, 1, rd] (rd = config.rotary_dim)`` for given positions
    (``(cos, sin, query_scale)`` with ``--attn-temperature-beta``)."""

    def __init__(self, config: TransformerConfig, local: bool = False) -> None:
        super().__init__()
        self.config, self.local = config, local
        self._cache: Optional[Tuple[int, torch.device, torch.Tensor, torch.Tensor]] = None

    def forward(self, seq_len: int, device: torch.device, dtype: torch.dtype,
                position_ids: Optional[torch.Tensor] = None) -> Tuple[torch.Tensor, ...]:
        if position_ids is not None:  # [b, s] -> cos/sin [s, b, 1, rd]
            return self._with_temperature(self._cos_sin(position_ids.t().float(), device, dtype),
                                          position_ids.t().float().to(device), dtype)
        if self._cache is None or self._cache[0] < seq_len or self._cache[1] != device:
            positions = torch.arange(seq_len, device=device, dtype=torch.float32)[:, None]  # [s, 1]
            cos, sin = self._cos_sin(positions, device, torch.float32)
            self._cache = (seq_len, device, cos, sin)
        _, _, cos, sin = self._cache
        positions = torch.arange(seq_len, device=device, dtype=torch.float32)[:, None]  # [s, 1]
        return self._with_temperature((cos[:seq_len].to(dtype), sin[:seq_len].to(dtype)), positions, dtype)

    def at(self, positions: torch.Tensor, dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(cos, sin)`` ``[n, b|1, 1, rd]`` of arbitrary positions ``[n, b|1]`` (DeepSeek-V4's compressed entries)."""
        return self._cos_sin(positions.float(), positions.device, dtype)

    def _with_temperature(self, cos_sin: Tuple[torch.Tensor, torch.Tensor], positions: torch.Tensor,
                          dtype: torch.dtype) -> Tuple[torch.Tensor, ...]:
        """``cos_sin``, plus the query scale ``[s, b|1, 1, 1]`` with ``--attn-temperature-beta``."""
        if self.config.attn_temperature_beta is None:
            return cos_sin
        return cos_sin + (query_temperature(self.config, positions).to(dtype),)

    def _cos_sin(self, positions: torch.Tensor, device: torch.device,
                 dtype: torch.dtype) -> Tuple[torch.Tensor, torch.Tensor]:
        inv_freq = rope_inv_freq(self.config, self.local).to(device)  # [rd/2]
        freqs = positions.to(device).unsqueeze(-1) * inv_freq  # [s, b|1, rd/2]
        if self.config.rope_interleaved:  # angle i on dims 2i and 2i + 1
            emb = freqs.repeat_interleave(2, dim=-1).unsqueeze(2)  # [s, b|1, 1, rd]
        else:  # angle i on dims i and i + rd/2
            emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(2)  # [s, b|1, 1, rd]
        factor = 1.0 if self.local else rope_attention_factor(self.config)  # YaRN's mscale
        return (emb.cos() * factor).to(dtype), (emb.sin() * factor).to(dtype)


def _rotate_half(x: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    if interleaved:  # pairs (x0, x1) -> (-x1, x0)
        even, odd = x[..., 0::2], x[..., 1::2]
        return torch.stack((-odd, even), dim=-1).flatten(-2)
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False) -> torch.Tensor:
    """Rotate ``x`` ``[s, b, heads, hn]`` by the angles in cos/sin ``[s, b|1, 1, rd]`` (first rd dims)."""
    rotary_dim = cos.size(-1)
    if rotary_dim < x.size(-1):  # partial rotary: the trailing dims pass unrotated
        rotated, passed = x[..., :rotary_dim], x[..., rotary_dim:]
        return torch.cat((rotated * cos + _rotate_half(rotated, interleaved) * sin, passed), dim=-1)
    return x * cos + _rotate_half(x, interleaved) * sin


RotaryKernel = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]


def _whole_head_half_layout(x: torch.Tensor, cos: torch.Tensor, interleaved: bool) -> bool:
    """The calls the package kernels serve: half-rotation pairs over the whole head."""
    return not interleaved and cos.size(-1) == x.size(-1)


def _vendor_rotary() -> Optional[RotaryKernel]:
    rotary_mul = vendor_op("rotary_mul")
    if rotary_mul is None:
        return None

    def kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
        if not _whole_head_half_layout(x, cos, interleaved):
            return apply_rotary(x, cos, sin, interleaved)
        return rotary_mul(x, cos, sin)
    return kernel


def _apex_rotary() -> Optional[RotaryKernel]:
    try:
        from apex.transformer.functional import fused_apply_rotary_pos_emb_cached
    except ImportError:  # apex is optional (and PyPI's "apex" is another project)
        return None

    def kernel(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool) -> torch.Tensor:
        # apex: x [s, b, heads, hn], cos/sin [s, 1, 1, hn] of x's dtype
        if not _whole_head_half_layout(x, cos, interleaved) or cos.size(1) != 1 or cos.dtype != x.dtype:
            return apply_rotary(x, cos, sin, interleaved)
        return fused_apply_rotary_pos_emb_cached(x, cos, sin)
    return kernel


ROTARY = FusedOp("rope", "--use-fused-rotary-pos-emb", apply_rotary,
                 kernels_by_device(vendor=(VENDOR_KERNEL, _vendor_rotary), apex=("apex", _apex_rotary)))


@kernel_choice
def rotary_kernel(device_type: str, fused: bool = False) -> Tuple[str, RotaryKernel]:
    """RoPE's kernel on ``device_type`` (the vendor's | "apex" | "compiled" | "reference"); ``fused``:
    ``--use-fused-rotary-pos-emb``."""
    return decide_kernel(ROTARY, device_type, fused)


register_fused_op("rope", "use_fused_rotary_pos_emb", rotary_kernel)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, interleaved: bool = False,
           fused: bool = False) -> torch.Tensor:
    """:func:`apply_rotary` through the kernel chosen for ``x``'s device; ``fused``: ``--use-fused-rotary-pos-emb``."""
    return rotary_kernel(x.device.type, fused)[1](x, cos, sin, interleaved)
