"""The flat, typed configuration of the one decoder.

Families differ only in these behaviour flags (DESIGN.md, principle 4): the
registry in ``mindspeed_llm/models`` maps a Hugging Face ``config.json`` to
this dataclass and ``mindspeed_llm/arguments.py`` maps command-line flags to
it. Nothing in the model branches on a family name.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Dict, Optional, Tuple

import torch

NORMALIZATIONS = ("RMSNorm", "LayerNorm")
POSITION_EMBEDDINGS = ("rope", "none")
ROPE_SCALINGS = (None, "linear", "llama3")


def pad_vocab_size(vocab_size: int, divisible_by: int, tp: int) -> int:
    """Megatron's padding: round the vocabulary up to a multiple of divisible_by x TP."""
    multiple = divisible_by * tp
    return int(math.ceil(vocab_size / multiple) * multiple)


@dataclass
class TransformerConfig:
    """Architecture and numerics of a decoder-only transformer."""

    num_layers: int
    hidden_size: int
    num_attention_heads: int
    vocab_size: int
    ffn_hidden_size: Optional[int] = None
    num_query_groups: Optional[int] = None  # KV heads; None means multi-head attention
    kv_channels: Optional[int] = None  # head dim; None means hidden_size / heads
    max_position_embeddings: int = 4096
    make_vocab_size_divisible_by: int = 128
    normalization: str = "LayerNorm"
    norm_epsilon: float = 1e-5
    position_embedding_type: str = "rope"
    rotary_base: float = 10000.0
    rope_scaling_type: Optional[str] = None
    rope_scaling_factor: float = 1.0
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_max_position_embeddings: int = 8192
    swiglu: bool = False
    add_bias_linear: bool = True
    add_qkv_bias: bool = False
    untie_embeddings_and_output_weights: bool = False
    attention_dropout: float = 0.1
    hidden_dropout: float = 0.1
    init_method_std: float = 0.02
    params_dtype: torch.dtype = torch.float32
    tensor_model_parallel_size: int = 1
    sequence_parallel: bool = False
    noop_layers: Tuple[int, ...] = field(default_factory=tuple)
    sliding_window: Optional[int] = None  # each token attends to itself and the window - 1 before it
    # Activation recompute (Megatron/MindSpeed names): "full" or "selective"; "uniform" or "block"
    recompute_granularity: Optional[str] = None
    recompute_method: Optional[str] = None
    recompute_num_layers: Optional[int] = None
    recompute_activation_function: bool = False  # MindSpeed: recompute the MLP activation only

    def __post_init__(self) -> None:
        if self.ffn_hidden_size is None:
            self.ffn_hidden_size = 4 * self.hidden_size
        if self.num_query_groups is None:
            self.num_query_groups = self.num_attention_heads
        if self.kv_channels is None:
            self.kv_channels = self.hidden_size // self.num_attention_heads
        self.noop_layers = tuple(sorted(self.noop_layers))
        self.validate()

    def validate(self) -> None:
        """Reject inconsistent settings; messages name the flags."""
        tp = self.tensor_model_parallel_size
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"--normalization {self.normalization!r} is not one of {NORMALIZATIONS}")
        if self.position_embedding_type not in POSITION_EMBEDDINGS:
            raise ValueError(f"--position-embedding-type {self.position_embedding_type!r} "
                             f"is not one of {POSITION_EMBEDDINGS}")
        if self.rope_scaling_type not in ROPE_SCALINGS:
            raise ValueError(f"--rope-scaling-type {self.rope_scaling_type!r} is not one of {ROPE_SCALINGS}")
        if self.num_attention_heads % self.num_query_groups != 0:
            raise ValueError(f"--num-attention-heads ({self.num_attention_heads}) must be a multiple of "
                             f"--num-query-groups ({self.num_query_groups})")
        if self.num_attention_heads % tp != 0:
            raise ValueError(f"--num-attention-heads ({self.num_attention_heads}) is not divisible by "
                             f"--tensor-model-parallel-size ({tp}); choose a TP size that divides the heads")
        groups = self.num_query_groups
        if (groups >= tp and groups % tp != 0) or (groups < tp and tp % groups != 0):
            raise ValueError(f"--num-query-groups ({groups}) and --tensor-model-parallel-size ({tp}) must "
                             "divide one another (KV heads are split, or replicated when TP exceeds them)")
        if self.ffn_hidden_size % tp != 0:
            raise ValueError(f"--ffn-hidden-size ({self.ffn_hidden_size}) is not divisible by "
                             f"--tensor-model-parallel-size ({tp})")
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"--sliding-window {self.sliding_window} must be at least 1")
        bad_noop = [i for i in self.noop_layers if not 0 <= i < self.num_layers]
        if bad_noop:
            raise ValueError(f"--noop-layers {bad_noop} out of range [0, {self.num_layers}) of --num-layers")

    @property
    def padded_vocab_size(self) -> int:
        return pad_vocab_size(self.vocab_size, self.make_vocab_size_divisible_by, self.tensor_model_parallel_size)

    @property
    def num_key_value_heads(self) -> int:
        return int(self.num_query_groups)

    @property
    def query_projection_size(self) -> int:
        return self.num_attention_heads * self.kv_channels

    def to_dict(self) -> Dict[str, Any]:
        """Plain values (dtype as its name), for checkpoints and logs."""
        result = asdict(self)
        result["params_dtype"] = str(self.params_dtype).replace("torch.", "")
        result["noop_layers"] = list(self.noop_layers)
        return result

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "TransformerConfig":
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in known}
        if isinstance(kwargs.get("params_dtype"), str):
            kwargs["params_dtype"] = getattr(torch, kwargs["params_dtype"])
        kwargs["noop_layers"] = tuple(kwargs.get("noop_layers", ()))
        return cls(**kwargs)
