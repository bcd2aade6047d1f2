"""The flat, typed configuration of the one decoder, and the one table of its fields.

Families differ only in these behaviour flags (DESIGN.md, principle 4): the
registry in ``mindspeed_llm/models`` maps a Hugging Face ``config.json`` to
this dataclass and ``mindspeed_llm/arguments.py`` maps command-line flags to
it. Nothing in the model branches on a family name.

Each field is declared once, with :func:`config_field`, in one of two
dataclasses (DESIGN.md, principle 15):

- :class:`ModelConfig`: the architecture, what the weights mean; a checkpoint
  stores these fields and a run that loads it must match them.
- :class:`RuntimeConfig`: how a run computes (parallel degrees and algorithms,
  recompute, activation swap, kernels, dtype, dropout, loss weights); free to
  differ from run to run.

:class:`TransformerConfig` is both (``class TransformerConfig(RuntimeConfig,
ModelConfig)``), so every layer keeps reading ``config.x``. A field's metadata
(:class:`FieldSpec`: its flag and aliases, argument group, help, the features
that read it) is what the parser, the args -> config step,
``--use-checkpoint-args``, the saved-settings check, the YAML keys and the
flag-coverage test are generated from: adding a field is one line here.
"""
from __future__ import annotations

import math
from dataclasses import MISSING, Field, asdict, dataclass, field, fields, replace
from typing import Any, Dict, List, Optional, Tuple

import torch

from core.parallel_state import expert_dimension
from core.quantization.fp8 import Fp8Recipe
from core.quantization.fp8_gemm import AUTO, GEMM_CHOICES

NORMALIZATIONS = ("RMSNorm", "LayerNorm")
POSITION_EMBEDDINGS = ("rope", "none", "alibi", "learned_absolute", "sinusoidal")
ROPE_SCALINGS = (None, "linear", "llama3", "yarn", "proportional")
SOFTMAX_TYPES = ("vanilla", "off-by-one", "learnable")
# --hybrid-override-pattern (Megatron-core's letters): each letter is one layer with one norm and one branch
LAYER_LETTERS: Dict[str, str] = {"M": "a Mamba layer", "G": "a gated DeltaNet layer",
                                 "K": "a Kimi Delta Attention layer", "L": "a lightning-attention layer",
                                 "*": "an attention layer",
                                 "H": "a Mamba2 and an attention side by side on one norm (Falcon-H1)",
                                 "R": "a Griffin recurrent block (RG-LRU, RecurrentGemma)",
                                 "W": "an RWKV-4 time-mixing layer", "C": "an RWKV-4 channel-mixing layer",
                                 "X": "an mLSTM layer (xLSTM's matrix memory)",
                                 "Z": "a Mamba layer whose input adds a shared attention block's output (Zamba)",
                                 "-": "an MLP layer", "E": "an MoE layer"}
LAYER_KINDS = tuple(LAYER_LETTERS)
# what each letter's layer holds: (its token mixer, its MLP); None for the branch it lacks
MAMBA_MIXER, GDN_MIXER, ATTENTION_MIXER, SHORT_CONV_MIXER = "mamba", "gated_delta_net", "attention", "short_conv"
KDA_MIXER, LIGHTNING_MIXER = "kimi_delta_attention", "lightning_attention"
PARALLEL_HYBRID_MIXER = "mamba_and_attention"  # 'H': both read the one normed input, their outputs are summed
RG_LRU_MIXER = "rg_lru"  # 'R': Griffin's recurrent block (RecurrentGemma)
RWKV_TIME_MIX, RWKV_CHANNEL_MIX = "rwkv_time_mix", "rwkv_channel_mix"  # 'W', 'C': RWKV-4's two mixers
MLSTM_MIXER = "mlstm"  # 'X': xLSTM's mLSTM
# 'Z': a Mamba layer that first runs one of the shared attention blocks on [hidden; word embeddings] (Zamba)
SHARED_BLOCK_MAMBA_MIXER = "shared_block_mamba"
# the mixers built from the --linear-* sizes (key/value heads and dims, conv width, chunk)
LINEAR_MIXERS = (GDN_MIXER, KDA_MIXER, LIGHTNING_MIXER, MLSTM_MIXER)
DENSE_MLP, MOE_MLP = "dense", "moe"
LETTER_PARTS: Dict[str, Tuple[Optional[str], Optional[str]]] = {
    "M": (MAMBA_MIXER, None), "G": (GDN_MIXER, None), "K": (KDA_MIXER, None), "L": (LIGHTNING_MIXER, None),
    "*": (ATTENTION_MIXER, None), "H": (PARALLEL_HYBRID_MIXER, None), "R": (RG_LRU_MIXER, None),
    "W": (RWKV_TIME_MIX, None), "C": (RWKV_CHANNEL_MIX, None), "X": (MLSTM_MIXER, None),
    "Z": (SHARED_BLOCK_MAMBA_MIXER, None), "-": (None, DENSE_MLP),
    "E": (None, MOE_MLP)}
# --experimental-attention-variant -> the token mixer of the layers --linear-attention-freq marks (Megatron-core
# spells the gated DeltaNet both ways; short_conv is LFM2's gated short convolution)
VARIANT_MIXERS: Dict[str, str] = {"gated_delta_net": GDN_MIXER, "gdn": GDN_MIXER, "kda": KDA_MIXER,
                                  "kimi_delta_attention": KDA_MIXER, "lightning": LIGHTNING_MIXER,
                                  "lightning_attention": LIGHTNING_MIXER, "short_conv": SHORT_CONV_MIXER,
                                  "rg_lru": RG_LRU_MIXER, "mlstm": MLSTM_MIXER}
# 'dsa' is not a mixer of marked layers: it makes every MLA layer DeepSeek Sparse Attention (Megatron-core's spelling)
DSA_VARIANT = "dsa"
EXPERIMENTAL_ATTENTION_VARIANTS = tuple(VARIANT_MIXERS) + (DSA_VARIANT,)
PREDICTION_HEAD_ACTIVATIONS = ("gelu", "gelu_tanh", "relu", "silu")
# --activation -> (the elementwise function, gated): a gated MLP computes act(gate) * up with a fused [gate; up]
ACTIVATIONS: Dict[str, Tuple[str, bool]] = {
    "gelu": ("gelu", False), "gelu_tanh": ("gelu_tanh", False), "relu": ("relu", False),
    "squared_relu": ("squared_relu", False), "xielu": ("xielu", False),
    "swiglu": ("silu", True), "geglu": ("gelu", True), "geglu_tanh": ("gelu_tanh", True),
    "quick_geglu": ("quick_gelu", True), "gated_relu": ("relu", True), "gated_squared_relu": ("squared_relu", True),
    "gated_xielu": ("xielu", True),
}
# The legacy boolean switches (Megatron/MindSpeed flags, and the fields of older checkpoints) that spell --activation
ACTIVATION_SWITCHES = ("swiglu", "geglu", "gelu_tanh", "relu", "squared_relu", "quick_geglu", "xielu", "gated_mlp")
# --qk-norm: the norm of each query and key, none or one kind (per_head: a weight per head dim shared by the heads,
# Qwen3; full_width: over all heads' channels, Olmo2; per_head_weights: a weight per head, Cohere; non_parametric:
# per head without weight, NanoChat; l2: weightless per head after RoPE on RoPE layers, Llama 4)
QK_NORMS = ("none", "per_head", "full_width", "per_head_weights", "non_parametric", "l2")
# the kinds that norm each head on its own, before RoPE unless --qk-layernorm-after-rope (HunYuan) moves them
PER_HEAD_QK_NORMS = ("per_head", "per_head_weights", "non_parametric")
# The legacy boolean switches (Megatron/MindSpeed flags, and the fields of older checkpoints) that spell --qk-norm
QK_NORM_SWITCHES = ("qk_layernorm", "qk_layernorm_full_width", "qk_layernorm_per_head_weights",
                    "non_parametric_qk_norm", "qk_l2_norm")
# the switch that, with --qk-layernorm, selects each kind but per_head
_QK_NORM_SWITCH_OF = {"full_width": "qk_layernorm_full_width", "per_head_weights": "qk_layernorm_per_head_weights",
                      "non_parametric": "non_parametric_qk_norm"}
MOE_SCORE_FUNCTIONS = ("softmax", "sigmoid", "sqrtsoftplus", "sparsemixer")
MOE_LOAD_BALANCING_TYPES = ("aux_loss", "seq_aux_loss", "none")
MOE_TOKEN_DISPATCHER_TYPES = ("allgather", "alltoall")
CONTEXT_PARALLEL_ALGORITHMS = ("megatron_cp_algo", "ulysses_cp_algo", "hybrid_cp_algo", "kvallgather_cp_algo")
# Features whose layers alone read some fields (FieldSpec.features): such a field set away from its default is
# refused when the model has no such layer
MOE, MAMBA, ATTENTION, LINEAR_ATTENTION, SHORT_CONV = "moe", "mamba", "attention", "linear_attention", "short_conv"
PARALLEL_HYBRID = "parallel_hybrid"  # the 'H' layers (Falcon-H1)
RG_LRU = "rg_lru"  # Griffin's recurrent blocks (RecurrentGemma)
RWKV = "rwkv"  # RWKV-4's time-mixing layers
MLSTM = "mlstm"  # xLSTM's mLSTM layers
SHARED_BLOCK = "shared_block"  # Zamba's shared attention blocks (the 'Z' layers)
DSA = "dsa"  # DeepSeek Sparse Attention's indexer and top-k (--experimental-attention-variant dsa)
COMPRESSED = "compressed_attention"  # DeepSeek-V4's attention (--compressed-attention-pattern)
MHC = "mhc"  # manifold-constrained hyper-connections (--enable-mhc-connections)
# --compressed-attention-pattern letters: sliding window only, compressed sparse (CSA), heavily compressed (HCA)
SLIDING_LETTER, CSA_LETTER, HCA_LETTER = "S", "C", "H"
COMPRESSED_LETTERS = {SLIDING_LETTER: "sliding window only", CSA_LETTER: "compressed sparse attention (CSA)",
                      HCA_LETTER: "heavily compressed attention (HCA)"}
_OWN_NAME = ""  # FieldSpec.flag before resolution: the flag is the field's name with dashes
FIELD_DEFAULT = "the field's default"  # FieldSpec.flag_default: the parser's default is the field's


def dsa_topk_source(layer_number: int, freq: int, offset: int) -> int:
    """The 0-based layer whose DSA top-k layer ``layer_number`` (0-based) attends with: itself when it computes
    one, else the last computing layer before it. Megatron-core's rule on 1-based L: L computes when
    ``max(L - max(offset, 1), 0)`` is a multiple of ``freq`` (--dsa-indexer-topk-freq/-skip-topk-offset)."""
    layer, offset = layer_number + 1, max(offset, 1)
    if layer <= offset:
        return layer_number
    return layer - (layer - offset) % freq - 1


def parse_layer_frequency(value: str, num_layers: int, flag: str) -> List[int]:
    """Megatron's layer-frequency argument: ``N`` (N - 1 ones then a zero, repeated) or a list expression of
    0/1 literals joined by ``+`` and ``*`` (``"([1]*3+[0])*2"``), one entry per layer."""
    import ast

    def evaluate(node: ast.AST) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.List):
            return [evaluate(item) for item in node.elts]
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            left, right = evaluate(node.left), evaluate(node.right)
            return left + right if isinstance(node.op, ast.Add) else left * right
        raise ValueError(f"{flag} {value!r}: only integers, lists, + and * are allowed")

    try:
        parsed = evaluate(ast.parse(value.strip(), mode="eval").body)
    except SyntaxError as error:
        raise ValueError(f"{flag} {value!r} is not an integer or a list expression like '([1]*3+[0])*2'") from error
    if isinstance(parsed, int):
        if parsed < 1:
            raise ValueError(f"{flag} {parsed} must be at least 1")
        return [int((i + 1) % parsed != 0) for i in range(num_layers)]
    if len(parsed) != num_layers or any(entry not in (0, 1) for entry in parsed):
        raise ValueError(f"{flag} {value!r} gives {len(parsed)} entries; it needs one 0 or 1 per layer "
                         f"(--num-layers {num_layers})")
    return list(parsed)


def pad_vocab_size(vocab_size: int, divisible_by: int, tp: int) -> int:
    """Megatron's padding: round the vocabulary up to a multiple of divisible_by x TP."""
    multiple = divisible_by * tp
    return int(math.ceil(vocab_size / multiple) * multiple)


# --------------------------------------------------------------------------- the field table

@dataclass(frozen=True)
class FieldSpec:
    """What the command line knows of a config field.

    ``flag`` is its option (None: no flag, a derivation in mindspeed_llm/arguments.py sets it); a bool field
    defaulting to True whose flag is not its own name (``--disable-bias-linear``) is a switch that turns it
    off. ``flag_default`` is the parser's default when it differs from the field's (None where the value is
    derived from other flags when not given). ``features`` name the layers that alone read the field
    (``MOE``, ``MAMBA``, ``ATTENTION``)."""
    flag: Optional[str] = _OWN_NAME
    aliases: Tuple[str, ...] = ()
    group: str = "network size"
    help: Optional[str] = None
    type: Optional[type] = None
    choices: Optional[Tuple[Any, ...]] = None
    metavar: Optional[str] = None
    features: Tuple[str, ...] = ()
    flag_default: Any = FIELD_DEFAULT


def config_field(default: Any = MISSING, **spec: Any) -> Any:
    """A config field with its :class:`FieldSpec` (keyword arguments); ``default`` omitted: a required field."""
    return field(default=default, metadata={"spec": FieldSpec(**spec)})


def field_spec(config_field_: Field) -> FieldSpec:
    """The field's spec, its flag resolved (``--`` + the name with dashes unless given)."""
    spec = config_field_.metadata.get("spec", FieldSpec())
    if spec.flag == _OWN_NAME:
        spec = replace(spec, flag="--" + config_field_.name.replace("_", "-"))
    return spec


def switches_off(config_field_: Field) -> bool:
    """A bool field defaulting to True whose flag turns it off (``--disable-bias-linear``, ``--no-layernorm-bias``)."""
    spec = field_spec(config_field_)
    return config_field_.default is True and spec.flag not in (None, "--" + config_field_.name.replace("_", "-"))


def field_flag(name: str) -> str:
    """The flag that sets TransformerConfig field ``name`` (``add_bias_linear`` -> ``--disable-bias-linear``)."""
    return field_spec(TransformerConfig.__dataclass_fields__[name]).flag or "--" + name.replace("_", "-")


def architecture_fields() -> Tuple[str, ...]:
    """The fields a checkpoint stores and a run that loads it must match (:class:`ModelConfig`'s)."""
    return tuple(f.name for f in fields(ModelConfig))


def runtime_fields() -> Tuple[str, ...]:
    """The run-time fields (:class:`RuntimeConfig`'s): free to differ from the checkpoint's."""
    return tuple(f.name for f in fields(RuntimeConfig))


def feature_fields(feature: str) -> Tuple[str, ...]:
    """The fields only ``feature``'s layers read, in declaration order."""
    return tuple(f.name for f in fields(TransformerConfig) if feature in field_spec(f).features)


# --------------------------------------------------------------------------- legacy activation switches

def _refuse_conflicting_switches(on: Dict[str, bool]) -> None:
    """The legacy switches' rules: one activation, and --gelu-tanh / --gated-mlp only where they mean something."""
    chosen = [f"--{name.replace('_', '-')}" for name in ("swiglu", "geglu", "relu", "squared_relu") if on[name]]
    if on["gelu_tanh"] and on["swiglu"]:
        raise ValueError("--gelu-tanh has no effect with --swiglu (SiLU); drop one of them")
    if len(chosen) > 1:
        raise ValueError(f"{' and '.join(chosen)} both set the MLP activation; choose one")
    if on["gelu_tanh"] and (on["relu"] or on["squared_relu"]):
        raise ValueError("--gelu-tanh has no effect with --relu/--squared-relu; drop one of them")
    if on["xielu"] and (on["swiglu"] or on["geglu"] or on["relu"] or on["squared_relu"] or on["gelu_tanh"]):
        raise ValueError("--xielu is the MLP activation; drop --swiglu/--geglu/--relu/--squared-relu/--gelu-tanh")
    if on["gated_mlp"] and (on["swiglu"] or on["geglu"] or on["quick_geglu"]):
        raise ValueError("--gated-mlp is implied by --swiglu/--geglu/--quick-geglu; drop --gated-mlp")
    if on["quick_geglu"] and any(on[name] for name in ("swiglu", "geglu", "relu", "squared_relu", "xielu",
                                                       "gelu_tanh")):
        raise ValueError("--quick-geglu is the MLP activation; drop --swiglu/--geglu/--relu/--squared-relu/"
                         "--xielu/--gelu-tanh")


def activation_from_switches(switches: Dict[str, Any]) -> str:
    """The ``activation`` the legacy switches spell (``{"geglu": True, "gelu_tanh": True}`` -> ``geglu_tanh``);
    ValueError naming the flags on a combination that spells none."""
    on = {name: bool(switches.get(name)) for name in ACTIVATION_SWITCHES}
    _refuse_conflicting_switches(on)
    if on["quick_geglu"] or on["swiglu"]:
        return "quick_geglu" if on["quick_geglu"] else "swiglu"
    function = next((name for name in ("xielu", "squared_relu", "relu", "gelu_tanh") if on[name]), "gelu")
    if on["geglu"] or on["gated_mlp"]:
        return {"gelu": "geglu", "gelu_tanh": "geglu_tanh"}.get(function, "gated_" + function)
    return function


def activation_switches(activation: str) -> Dict[str, bool]:
    """The legacy switches that spell ``activation`` (the inverse of :func:`activation_from_switches`)."""
    function, gated = ACTIVATIONS[activation]
    on = dict.fromkeys(ACTIVATION_SWITCHES, False)
    if activation in ("swiglu", "quick_geglu", "geglu"):
        on[activation] = True
    elif activation == "geglu_tanh":
        on.update(geglu=True, gelu_tanh=True)
    else:
        on["gated_mlp"] = gated
        if function != "gelu":
            on[function] = True
    return on


def activation_flags(activation: str) -> str:
    """The legacy switches that spell ``activation``, as a user writes them (``--geglu --gelu-tanh``)."""
    return " ".join("--" + name.replace("_", "-") for name, on in activation_switches(activation).items() if on)


# --------------------------------------------------------------------------- legacy q/k norm switches

def _refuse_conflicting_qk_switches(on: Dict[str, bool]) -> None:
    """The legacy q/k switches' rules: --qk-layernorm picks a norm, the others qualify it or replace it."""
    layernorm, full_width = on["qk_layernorm"], on["qk_layernorm_full_width"]
    if full_width and not layernorm:
        raise ValueError("--qk-layernorm-full-width needs --qk-layernorm and --normalization RMSNorm")
    if on["qk_layernorm_per_head_weights"] and (not layernorm or full_width):
        raise ValueError("--qk-layernorm-per-head-weights needs --qk-layernorm and excludes "
                         "--qk-layernorm-full-width (one weight layout per q/k norm)")
    if on["non_parametric_qk_norm"] and (not layernorm or full_width):
        raise ValueError("--non-parametric-qk-norm needs --qk-layernorm (per head, no --qk-layernorm-full-width)")
    if on["non_parametric_qk_norm"] and on["qk_layernorm_per_head_weights"]:
        raise ValueError("--non-parametric-qk-norm and --qk-layernorm-per-head-weights both set the q/k norm's "
                         "weight; choose one")
    if on["qk_l2_norm"] and layernorm:
        raise ValueError("--qk-l2-norm is a q/k norm of its own; drop --qk-layernorm (and it does not apply to "
                         "--multi-latent-attention)")


def qk_norm_from_switches(switches: Dict[str, Any]) -> str:
    """The ``qk_norm`` the legacy switches spell (``{"qk_layernorm": True, "qk_layernorm_full_width": True}`` ->
    ``full_width``); ValueError naming the flags on a combination that spells none."""
    on = {name: bool(switches.get(name)) for name in QK_NORM_SWITCHES}
    _refuse_conflicting_qk_switches(on)
    if on["qk_l2_norm"]:
        return "l2"
    if not on["qk_layernorm"]:
        return "none"
    return next((kind for kind, name in _QK_NORM_SWITCH_OF.items() if on[name]), "per_head")


def qk_norm_switches(qk_norm: str) -> Dict[str, bool]:
    """The legacy switches that spell ``qk_norm`` (the inverse of :func:`qk_norm_from_switches`)."""
    on = dict.fromkeys(QK_NORM_SWITCHES, False)
    if qk_norm == "l2":
        on["qk_l2_norm"] = True
    elif qk_norm != "none":
        on["qk_layernorm"] = True
        if qk_norm in _QK_NORM_SWITCH_OF:
            on[_QK_NORM_SWITCH_OF[qk_norm]] = True
    return on


def qk_norm_flags(qk_norm: str) -> str:
    """The legacy switches that spell ``qk_norm``, as a user writes them (``--qk-layernorm
    --qk-layernorm-full-width``)."""
    return " ".join("--" + name.replace("_", "-") for name, on in qk_norm_switches(qk_norm).items() if on)


# --------------------------------------------------------------------------- older checkpoints

def upgrade_legacy_settings(values: Dict[str, Any]) -> Dict[str, Any]:
    """Stored settings of an older checkpoint (the legacy activation and q/k norm switches as fields) in today's
    fields."""
    spellings = (("activation", ACTIVATION_SWITCHES, activation_from_switches),
                 ("qk_norm", QK_NORM_SWITCHES, qk_norm_from_switches))
    upgraded = dict(values)
    for name, switches, spell in spellings:
        legacy = {switch: upgraded.pop(switch) for switch in switches if switch in upgraded}
        if legacy:
            upgraded.setdefault(name, spell(legacy))
    return upgraded


# --------------------------------------------------------------------------- the fields

@dataclass
class ModelConfig:
    """The architecture: what a checkpoint's weights mean (its required fields first)."""

    num_layers: int = config_field(type=int)
    hidden_size: int = config_field(type=int)
    num_attention_heads: int = config_field(type=int)
    vocab_size: int = config_field(group="tokenizer",
                                   help="NullTokenizer's vocabulary (ids 0..N-1, N-1 is end-of-document); in "
                                        "training, the model's vocabulary before padding (default: the tokenizer's)")
    ffn_hidden_size: Optional[int] = config_field(None, type=int,
                                                  help="default 4 x hidden, or Megatron's 8/3 x hidden rounded to 64 "
                                                       "with --swiglu")
    # KV heads; None means multi-head attention
    num_query_groups: Optional[int] = config_field(None, type=int,
                                                   help="KV heads; needs --group-query-attention (which alone means "
                                                        "1)")
    # head dim; None means hidden_size / heads
    kv_channels: Optional[int] = config_field(None, type=int, help="head dim; default hidden / heads")
    max_position_embeddings: int = config_field(4096, flag_default=None, help="default --seq-length")
    make_vocab_size_divisible_by: int = config_field(128)
    normalization: str = config_field("LayerNorm", choices=("LayerNorm", "RMSNorm"))
    norm_epsilon: float = config_field(1e-5)
    position_embedding_type: str = config_field("rope",
                                                choices=POSITION_EMBEDDINGS,
                                                help="learned_absolute: a learned table added to the word embeddings "
                                                     "(GPT-2, OPT); sinusoidal: fairseq's fixed table (XGLM); alibi: "
                                                     "linear attention biases per head instead of RoPE (Bloom, MPT)")
    rotary_base: float = config_field(10000.0)
    rope_scaling_type: Optional[str] = config_field(None, choices=ROPE_SCALINGS[1:],
                                                    features=(ATTENTION,))
    rope_scaling_factor: float = config_field(1.0)
    rope_low_freq_factor: float = config_field(1.0, flag="--low-freq-factor")
    rope_high_freq_factor: float = config_field(4.0, flag="--high-freq-factor")
    rope_original_max_position_embeddings: int = config_field(
        8192, flag="--original-max-position-embeddings", aliases=("--rope-scaling-original-max-position-embeddings",))
    # YaRN (--rope-scaling-type yarn, with --rope-scaling-factor and --original-max-position-embeddings):
    # the ramp between interpolated and extrapolated dims [--rope-scaling-beta-fast, --rope-scaling-beta-slow];
    # cos/sin times the attention factor (0.1 ln(factor) mscale + 1) / (0.1 ln(factor) mscale_all_dim + 1)
    # when both are set, else 0.1 ln(factor) + 1 [--rope-scaling-mscale, --rope-scaling-mscale-all-dim]
    rope_scaling_beta_fast: float = config_field(32.0, aliases=("--beta-fast",),
                                                 help="YaRN: dims rotating more often than this over the original "
                                                      "context keep their frequency")
    rope_scaling_beta_slow: float = config_field(1.0, aliases=("--beta-slow",),
                                                 help="YaRN: dims rotating less often than this are interpolated by "
                                                      "the factor")
    rope_scaling_mscale: float = config_field(1.0, help="YaRN attention-factor numerator weight")
    rope_scaling_mscale_all_dim: float = config_field(0.0,
                                                      help="YaRN attention-factor denominator weight (0: the factor "
                                                           "is 0.1 ln(s) + 1)")
    # YaRN's ramp bounds rounded to whole dims (floor/ceil; transformers' truncate) or kept fractional (GPT-OSS)
    # [--yarn-correction-range-round-to-int / --no-yarn-correction-range-round-to-int, Megatron's flags]
    yarn_correction_range_round_to_int: bool = config_field(True,
                                                            help="YaRN: round the ramp's dim range out to whole dims "
                                                                 "(--no-...: keep it fractional, GPT-OSS; "
                                                                 "transformers' truncate)")
    # NTK scaling by a fixed alpha: the RoPE base times alpha ** (d / (d - 2)), d the head dim (HunYuan's
    # "dynamic" rope with alpha) [--rope-ntk-alpha]
    rope_ntk_alpha: Optional[float] = config_field(None, type=float,
                                                   help="RoPE base times alpha ** (d / (d - 2)), d the head dim "
                                                        "(HunYuan's NTK alpha)")
    # The MLP's activation: non-gated act(fc1 x) or gated act(gate) * up with a fused [gate; up] fc1 (ACTIVATIONS;
    # the legacy switches --swiglu, --geglu, --gelu-tanh, --relu, --squared-relu, --quick-geglu, --xielu and
    # --gated-mlp spell it too: activation_from_switches). xIELU (Apertus) has two learnable scalars per layer,
    # alpha_p and alpha_n; quick GELU is x * sigmoid(1.702 x) (GPT-OSS); BitNet's is gated ReLU squared.
    activation: str = config_field("gelu", choices=tuple(ACTIVATIONS), features=(ATTENTION,),
                                   help="the MLP's activation: gelu (default), gelu_tanh, relu, squared_relu, xielu; "
                                        "gated: swiglu, geglu, geglu_tanh, quick_geglu, gated_relu, "
                                        "gated_squared_relu, gated_xielu (also --swiglu, --geglu, ...)")
    add_bias_linear: bool = config_field(True, flag="--disable-bias-linear")
    add_qkv_bias: bool = config_field(False, features=(ATTENTION,))
    untie_embeddings_and_output_weights: bool = config_field(False)
    noop_layers: Tuple[int, ...] = config_field((), group="pipeline layout",
                                                help="global numbers of parameterless identity layers, e.g. 0,7 ('' "
                                                     "for none)")
    # each token attends to itself and the window - 1 before it
    sliding_window: Optional[int] = config_field(None, type=int, features=(ATTENTION,),
                                                 help="attend to at most this many tokens (the current one "
                                                      "included), as Mistral")
    # Behaviour flags of the model zoo (flag names in brackets)
    # norms scale by (1 + weight), weights stored as offsets (Gemma) [--apply-layernorm-1p]
    apply_layernorm_1p: bool = config_field(False,
                                            help="norms scale by (1 + weight), weights stored as offsets (Gemma)")
    # The norm of queries and keys (QK_NORMS; the legacy switches --qk-layernorm, --qk-layernorm-full-width,
    # --qk-layernorm-per-head-weights, --non-parametric-qk-norm and --qk-l2-norm spell it too: qk_norm_from_switches).
    # per_head: each head normed before RoPE with one weight per head dim, shared by the heads (Qwen3); full_width:
    # over all heads' channels at once, one weight per channel, the sum of squares all-reduced over TP (Olmo2,
    # RMSNorm only); per_head_weights: a weight per head, [heads, head_dim], split over TP with the heads (K's
    # replicated when TP exceeds the KV heads) (Cohere's use_qk_norm); non_parametric: per head without weight
    # (NanoChat); l2: each head's q and k scaled to unit RMS without weight (eps --norm-epsilon) after RoPE, on the
    # layers that apply RoPE (NoPE layers have none) (Llama 4's use_qk_norm; Megatron's --qk-l2-norm)
    qk_norm: str = config_field("none", choices=QK_NORMS, features=(ATTENTION,),
                                help="the q/k norm: none (default), per_head (Qwen3), full_width (Olmo2), "
                                     "per_head_weights (Cohere), non_parametric (NanoChat), l2 (Llama 4) (also "
                                     "--qk-layernorm, --qk-layernorm-full-width, ...)")
    # the per-head q/k norms act after RoPE (HunYuan) [--qk-layernorm-after-rope]
    qk_layernorm_after_rope: bool = config_field(False,
                                                 help="with --qk-layernorm: the q/k norms act after RoPE (HunYuan)")
    # norm on the attention and MLP outputs before the residual add (Gemma2) [--post-norm]
    post_norm: bool = config_field(False, features=(ATTENTION,),
                                   help="norm the attention and MLP outputs before the residual add (Gemma2)")
    # word embeddings multiplied by sqrt(hidden) (Gemma) [--input-embeds-norm]
    input_embeds_norm: bool = config_field(False, help="multiply word embeddings by sqrt(hidden) (Gemma)")
    # cap * tanh(scores / cap) [--attn-logit-softcapping]
    attn_logit_softcapping: Optional[float] = config_field(None, type=float, features=(ATTENTION,),
                                                           help="cap * tanh(score / cap) on attention scores (Gemma2)")
    # same on the logits [--output-logit-softcapping]
    output_logit_softcapping: Optional[float] = config_field(None, type=float,
                                                             help="cap * tanh(logit / cap) on the output logits "
                                                                  "(Gemma2)")
    # softmax scale scalar ** -0.5 [--query-pre-attn-scalar]
    query_pre_attn_scalar: Optional[float] = config_field(None, type=float, features=(ATTENTION,),
                                                          help="softmax scale = value ** -0.5 instead of head_dim ** "
                                                               "-0.5 (Gemma2)")
    # every Nth layer attends fully [--sliding-window-pattern]
    sliding_window_pattern: Optional[int] = config_field(None, type=int, features=(ATTENTION,),
                                                         help="with --sliding-window: every Nth layer attends fully "
                                                              "(Gemma2: 2)")
    # RoPE pairs dims (0, 1), (2, 3), ... (Helium, GPT-J) [--rope-interleaved]
    rope_interleaved: bool = config_field(False, features=(ATTENTION,),
                                          help="RoPE rotates neighbouring dim pairs (Helium, GPT-J) instead of halves")
    # share of the head dim RoPE rotates (the first dims) [--rotary-percent]
    rotary_percent: float = config_field(1.0, features=(ATTENTION,),
                                         help="share of each head's dims that RoPE rotates (StableLM: 0.25)")
    # norms on the attention and MLP outputs only, none before them (Olmo2) [--post-norm-only]
    post_norm_only: bool = config_field(False, features=(ATTENTION,),
                                        help="norms on the attention and MLP outputs only, none before them (Olmo2)")
    # Scales (Granite): embeddings times embedding_multiplier [--embedding-multiplier]; every branch's output
    # (attention, Mamba, MLP) times residual_multiplier before the residual add [--residual-multiplier]; the attention
    # softmax scale instead of 1/sqrt(head dim) (Megatron-core's softmax_scale) [--softmax-scale]; the
    # logits times output_multiplier_scale (MindSpeed's flag; Granite: 1 / logits_scaling) [--output-multiplier-scale]
    # unscaled RoPE base of sliding-window layers (Gemma3) [--local-rotary-base]
    local_rotary_base: Optional[float] = config_field(None, type=float, features=(ATTENTION,),
                                                      help="unscaled RoPE base of the sliding-window layers (Gemma3: "
                                                           "10000)")
    # hidden-size norms without weight or bias (Olmo) [--non-parametric-norm]
    non_parametric_norm: bool = config_field(False, help="hidden-size norms without weight or bias (Olmo)")
    # q, k and v clamped to [-clip, clip] after projection (Olmo) [--qkv-clip]
    qkv_clip: Optional[float] = config_field(None, type=float, features=(ATTENTION,),
                                             help="clamp q, k and v to [-value, value] after their projection "
                                                  "(Olmo's clip_qkv)")
    # global layers without RoPE (SmolLM3) [--no-rope-layers]
    no_rope_layers: Tuple[int, ...] = config_field((), features=(ATTENTION,), help="global layer numbers (from 0) that "
                                                   "use no position embedding (SmolLM3's NoPE layers)")
    embedding_multiplier: Optional[float] = config_field(None, type=float,
                                                         help="multiply the word embeddings by this (Granite)")
    # Residual path (MiniMax-Text-01): each add keeps the branch's normed input instead of the layer input
    # (Megatron's flag; transformers' MiniMax, BLOOM's apply_residual_connection_post_layernorm)
    # [--apply-residual-connection-post-layernorm]; the kept residual times alpha before the add (MiniMax's
    # *_alpha_factor, DeepNorm's alpha = (2 N)^(1/4)) [--residual-alpha]; the branch's own scale is
    # --residual-multiplier (MiniMax's *_beta_factor)
    apply_residual_connection_post_layernorm: bool = config_field(
        False, help="each residual add keeps the branch's normed input, not the layer input (Megatron; MiniMax)")
    residual_alpha: Optional[float] = config_field(None, type=float,
                                                   help="multiply the residual (skip) path by this before every "
                                                        "add (MiniMax's *_alpha_factor, DeepNorm's alpha)")
    residual_multiplier: Optional[float] = config_field(None, type=float,
                                                        help="multiply every branch's output (attention, Mamba, MLP) "
                                                             "by this before the residual add (Granite)")
    # muP scales of the gated MLP (Falcon-H1's mlp_multipliers): the gate times the first before the activation,
    # the output times the second [--mlp-multipliers]
    mlp_multipliers: Tuple[float, ...] = config_field((), type=float, features=(ATTENTION,), metavar="SCALE",
                                                      help="two scales of the gated MLP: its gate before the "
                                                           "activation and its output (Falcon-H1)")
    softmax_scale: Optional[float] = config_field(None, type=float, features=(ATTENTION,),
                                                  help="attention softmax scale instead of 1/sqrt(head dim) "
                                                       "(Granite's attention_multiplier)")
    output_multiplier_scale: Optional[float] = config_field(None, type=float,
                                                            help="multiply the output logits by this (Granite: 1 / "
                                                                 "logits_scaling)")
    # Biases by place, each on top of --add-bias-linear (all linears) and --add-qkv-bias (q/k/v only):
    # the attention output projection (GPT-Neo) [--add-dense-bias]
    add_dense_bias: bool = config_field(False, help="bias on the attention output projection (GPT-Neo), without "
                                             "--add-bias-linear")
    # both MLP linears (GPT-J, GPT-Neo) [--add-mlp-bias]
    add_mlp_bias: bool = config_field(False, help="biases on the MLP linears (GPT-J), without --add-bias-linear")
    # the output layer (lm_head; GPT-J, CodeGen, Phi); with tied embeddings a bias of its own next to the shared
    # weight (ModernBERT decoder) [--add-output-layer-bias]
    add_output_layer_bias: bool = config_field(False,
                                               help="bias on the output layer (GPT-J, CodeGen, Phi; tied: its own "
                                                    "next to the shared weight)")
    # LayerNorm has a bias; False: weight only (Cohere, MPT) [--no-layernorm-bias]
    layernorm_bias: bool = config_field(True, flag="--no-layernorm-bias",
                                        help="LayerNorm with a weight and no bias (Cohere, MPT)")
    # Parallel attention and MLP: both read the layer input, x + attn(norm1(x)) + mlp(norm2(x)) (GPT-NeoX)
    # [--parallel-residual]; with one norm feeding both, x + attn(norm(x)) + mlp(norm(x)) (GPT-J, Phi,
    # Cohere) [--parallel-residual-shared-norm, with --parallel-residual]
    parallel_residual: bool = config_field(False,
                                           help="attention and MLP both read the layer input: x + attn(ln1(x)) + "
                                                "mlp(ln2(x)) (GPT-NeoX)")
    parallel_residual_shared_norm: bool = config_field(False,
                                                       help="with --parallel-residual: one norm feeds both branches "
                                                            "(GPT-J, Phi, Cohere)")
    # a norm on the word embeddings (Bloom; MindSpeed's flag) [--embed-layernorm]
    embed_layernorm: bool = config_field(False, help="a norm on the word embeddings (Bloom)")
    # with --sliding-window: the global layers that attend fully, any pattern (GPT-Neo, Cohere2)
    full_attention_layers: Tuple[int, ...] = config_field(
        (), help="with --sliding-window: global layer numbers (from 0) that attend fully (GPT-Neo)")
    # Attention variants (Megatron's flags where they exist): tokens attend only within their chunk of this many
    # tokens, Llama 4's chunked layers (layers in --full-attention-layers attend fully) [--attention-chunk-size];
    # the attention output times sigmoid(gate) per channel, the gate a fourth segment of the fused QKV
    # projection (Qwen3-Next) [--attention-output-gate], or per head (LFM3) [--attention-output-gate-per-head];
    # the softmax: vanilla, off-by-one (an extra zero
    # logit in every row) or learnable (a trained extra logit per head: GPT-OSS's attention sinks) [--softmax-type]
    attention_chunk_size: Optional[int] = config_field(None, type=int,
                                                       help="tokens attend only within their chunk of this many "
                                                            "tokens (Llama 4)")
    attention_output_gate: bool = config_field(False,
                                               help="multiply the attention output by sigmoid of a gate projected "
                                                    "with q/k/v (Qwen3-Next)")
    attention_output_gate_per_head: bool = config_field(False,
                                                        help="with --attention-output-gate: one gate per query head "
                                                             "scaling all its channels (LFM3), not one per channel")
    softmax_type: str = config_field("vanilla", choices=SOFTMAX_TYPES,
                                     help="off-by-one: an extra zero logit per row; learnable: a trained one per "
                                          "head (GPT-OSS attention sinks)")
    # State-space layers, as Megatron's hybrid/Mamba models (flag names in brackets). hybrid_override_pattern has
    # one char per layer: 'M' a Mamba layer (norm -> mixer -> residual add, no attention, MLP or rope); None:
    # every layer a transformer layer [--hybrid-override-pattern]. mamba_version 1: Mamba's selective scan
    # over d_inner = expand x hidden channels split over TP; 2: Mamba2's SSD over heads of mamba_head_dim
    # channels (d_inner / head_dim heads split over TP) with mamba_num_groups B/C groups (split over TP, or
    # replicated when fewer than TP) [--mamba-version]. State size N [--mamba-state-dim], head dim
    # [--mamba-head-dim], groups [--mamba-num-groups], expand [--mamba-expand], depthwise conv width
    # [--mamba-d-conv] and its bias [--disable-mamba-conv-bias]; Mamba1's dt rank, None: ceil(hidden / 16)
    # [--mamba-dt-rank]; Mamba2's SSD chunk length [--mamba-chunk-size] and dt clamp (max None: unbounded)
    # [--mamba-dt-limit-min, --mamba-dt-limit-max]; weightless RMS norms on Mamba1's dt, B and C with this
    # eps (FalconMamba) [--mamba-mixer-rms-eps]. in/out projections have biases with add_bias_linear.
    hybrid_override_pattern: Optional[str] = config_field(
        None, type=str, aliases=("--hybrid-layer-pattern",),
        help="one letter per layer (Megatron-core's): M Mamba, G gated DeltaNet, K Kimi Delta Attention, L "
             "lightning attention, * attention, H Mamba2 beside attention (Falcon-H1), Z Mamba after a shared "
             "attention block (Zamba), - MLP, E MoE; each layer is "
             "its norm, that one branch and the residual add; '|' between pipeline stages (or virtual chunks) places "
             "them; default: transformer layers")
    mamba_version: int = config_field(2, choices=(1, 2), features=(MAMBA,),
                                      help="1: Mamba's selective scan over d_inner channels; 2: Mamba2's SSD over "
                                           "heads and groups")
    mamba_state_dim: int = config_field(128, features=(MAMBA,), help="SSM state size N")
    mamba_head_dim: int = config_field(64, features=(MAMBA,), help="Mamba2 head dim (heads = d_inner / head "
                                                                   "dim); Mamba1 with --mamba-num-heads: channels "
                                                                   "per SSM")
    mamba_num_groups: int = config_field(8, features=(MAMBA,), help="Mamba2 B/C groups")
    mamba_expand: int = config_field(2, features=(MAMBA,), help="d_inner = expand x hidden")
    mamba_heads: Optional[int] = config_field(None, type=int, flag="--mamba-num-heads", features=(MAMBA,),
                                              help="Mamba2 heads; d_inner = heads x --mamba-head-dim instead of "
                                                   "--mamba-expand x hidden (Megatron-core's --mamba-num-heads); "
                                                   "Mamba1: that many independent SSMs, each with its own x_proj "
                                                   "and dt_proj (Zamba)")
    mamba_d_conv: int = config_field(4, features=(MAMBA,), help="width of the causal depthwise conv")
    mamba_conv_bias: bool = config_field(True, flag="--disable-mamba-conv-bias", features=(MAMBA,),
                                         help="the depthwise conv has no bias")
    mamba_dt_rank: Optional[int] = config_field(None, type=int, features=(MAMBA,),
                                                help="Mamba1 dt rank (default ceil(hidden / 16))")
    mamba_chunk_size: int = config_field(256, features=(MAMBA,), help="Mamba2 SSD chunk length")
    mamba_dt_limit_min: float = config_field(0.0, features=(MAMBA,), help="Mamba2: clamp dt below")
    mamba_dt_limit_max: Optional[float] = config_field(None, type=float, features=(MAMBA,),
                                                       help="Mamba2: clamp dt above (default none)")
    mamba_mixer_rms_eps: Optional[float] = config_field(None, type=float, features=(MAMBA,),
                                                        help="Mamba1: weightless RMS norms on dt, B and C with this "
                                                             "eps (FalconMamba)")
    mamba_mixer_rms_weights: bool = config_field(False, features=(MAMBA,),
                                                 help="Mamba1: the dt, B and C norms of --mamba-mixer-rms-eps carry "
                                                      "weights (Jamba's dt/b/c_layernorm)")
    # Mamba2's output: the gated group norm norm(y silu(z)) (Megatron-core's MambaMixer rmsnorm=True,
    # norm_before_gate=False); with --mamba-norm-before-gate norm(y) silu(z); without the norm y silu(z)
    # (Falcon-H1's mamba_rms_norm=False) [--disable-mamba-rmsnorm, --mamba-norm-before-gate]
    mamba_rmsnorm: bool = config_field(True, flag="--disable-mamba-rmsnorm", features=(MAMBA,),
                                       help="Mamba2: no gated norm, the scan output times silu(z) goes straight to "
                                            "out_proj (Falcon-H1's mamba_rms_norm=False)")
    mamba_norm_before_gate: bool = config_field(False, features=(MAMBA,),
                                                help="Mamba2: norm the scan output, then gate it: norm(y) silu(z) "
                                                     "(Megatron-core's norm_before_gate)")
    # muP scales of the Mamba mixer (Falcon-H1): its input times ssm_in, in_proj's output parts [z; x; B; C; dt]
    # each times its own of five ssm_multipliers (the muP vector), its output times ssm_out
    # [--ssm-in-multiplier, --ssm-multipliers, --ssm-out-multiplier]
    ssm_in_multiplier: Optional[float] = config_field(None, type=float, features=(MAMBA,),
                                                      help="multiply the Mamba mixer's input by this (Falcon-H1)")
    ssm_multipliers: Tuple[float, ...] = config_field((), type=float, features=(MAMBA,), metavar="SCALE",
                                                      help="Mamba2: five scales of in_proj's output parts z, x, B, C "
                                                           "and dt (Falcon-H1's muP vector)")
    ssm_out_multiplier: Optional[float] = config_field(None, type=float, features=(MAMBA,),
                                                       help="multiply the Mamba mixer's output by this (Falcon-H1)")
    # The attention of an 'H' layer (Falcon-H1): its input times attention_in, its output times attention_out
    # before the sum with the Mamba mixer's [--attention-in-multiplier, --attention-out-multiplier]
    attention_in_multiplier: Optional[float] = config_field(None, type=float, features=(PARALLEL_HYBRID,),
                                                            help="'H' layers: multiply the attention's input by "
                                                                 "this (Falcon-H1)")
    attention_out_multiplier: Optional[float] = config_field(None, type=float, features=(PARALLEL_HYBRID,),
                                                             help="'H' layers: multiply the attention's output by "
                                                                  "this (Falcon-H1)")
    # Gated DeltaNet layers (Qwen3-Next, Qwen3.5), Megatron-core's flags: in a GPT model the layers that
    # --linear-attention-freq marks run the gated DeltaNet in place of attention, each with its MLP or MoE
    # [--experimental-attention-variant gated_delta_net]; N means N - 1 linear layers then one attention
    # layer, repeated; a list expression ("([1]*3+[0])*2") gives 1 (linear) or 0 (attention) per layer
    # [--linear-attention-freq]. 'G' letters of --hybrid-override-pattern are gated DeltaNet layers too.
    # Sizes: the short causal conv's width [--linear-conv-kernel-dim], key/value head dims and counts (value
    # heads a multiple of key heads) [--linear-key-head-dim, --linear-value-head-dim, --linear-num-key-heads,
    # --linear-num-value-heads]; the chunk of the pure-PyTorch chunked delta rule, which changes only speed and
    # rounding (flash-linear-attention's kernel keeps its own 64) [--linear-chunk-size].
    # Kimi Delta Attention layers (Kimi Linear) take the same sizes and places [--experimental-attention-variant
    # kda] ('K' letters): the delta rule with a decay per key channel and low-rank gates
    # (core/transformer/kimi_delta_attention.py). Lightning-attention layers (MiniMax) too [--experimental-
    # attention-variant lightning] ('L' letters): linear attention with a fixed per-head decay and no conv
    # (core/transformer/lightning_attention.py), one head count and head dim (key = value sizes).
    # Short-conv layers (LFM2) are placed the same way [--experimental-attention-variant short_conv]: the marked
    # layers run core/transformer/short_conv.py's gated causal conv of width [--short-conv-kernel-size] (HF's
    # conv_L_cache), with biases on its in_proj, conv and out_proj [--short-conv-bias] (HF's conv_bias).
    experimental_attention_variant: Optional[str] = config_field(
        None, type=str, choices=EXPERIMENTAL_ATTENTION_VARIANTS,
        help="the mixer of the layers --linear-attention-freq marks: gated_delta_net (or gdn) the gated DeltaNet, "
             "kda (or kimi_delta_attention) Kimi Delta Attention, lightning (or lightning_attention) MiniMax's "
             "lightning attention, short_conv LFM2's short convolution; dsa makes every MLA layer DeepSeek Sparse "
             "Attention (no --linear-attention-freq)")
    linear_attention_freq: Optional[str] = config_field(
        None, type=str,
        help="N: N - 1 layers of --experimental-attention-variant then one attention layer, repeated; or a list "
             "expression of 1 (the variant) and 0 (attention) per layer, e.g. '([1]*3+[0])*2'")
    linear_conv_kernel_dim: int = config_field(4, features=(LINEAR_ATTENTION,),
                                               help="gated DeltaNet: width of the short causal conv")
    linear_key_head_dim: int = config_field(128, features=(LINEAR_ATTENTION,), help="gated DeltaNet key head dim")
    linear_value_head_dim: int = config_field(128, features=(LINEAR_ATTENTION,),
                                              help="gated DeltaNet value head dim")
    linear_num_key_heads: int = config_field(16, features=(LINEAR_ATTENTION,), help="gated DeltaNet key heads")
    linear_num_value_heads: int = config_field(32, features=(LINEAR_ATTENTION,),
                                               help="gated DeltaNet value heads (a multiple of the key heads)")
    linear_chunk_size: int = config_field(64, features=(LINEAR_ATTENTION,),
                                          help="gated DeltaNet: chunk length of the chunked pure-PyTorch delta rule "
                                               "(flash-linear-attention's kernel, used in bf16/fp16 on CUDA, keeps "
                                               "its own 64); the result does not depend on it")
    # OLMo-Hybrid's gated DeltaNet: beta = 2 sigmoid(b) in (0, 2), so the state update may have negative eigenvalues
    # (flash-linear-attention's allow_neg_eigval) [--linear-allow-neg-eigval]; its gated output norm's eps when it is
    # not --norm-epsilon (OLMo-Hybrid: fla's 1e-5 beside rms_norm_eps 1e-6) [--linear-norm-epsilon]; under
    # --post-norm-only its DeltaNet layers keep Llama's pre-norms while its attention layers have Olmo3's output
    # norms only [--linear-attention-pre-norm]
    linear_allow_neg_eigval: bool = config_field(False, features=(LINEAR_ATTENTION,),
                                                 help="gated DeltaNet: beta = 2 sigmoid(b), in (0, 2) (OLMo-Hybrid; "
                                                      "flash-linear-attention's allow_neg_eigval)")
    linear_norm_epsilon: Optional[float] = config_field(None, type=float, features=(LINEAR_ATTENTION,),
                                                        help="gated DeltaNet: eps of its gated output norm (default "
                                                             "--norm-epsilon; OLMo-Hybrid: 1e-5)")
    # Kimi Delta Attention as Bailing's hybrids (Ling) shape it: the forget and output gates projected from the hidden
    # state at full rank instead of through rank-dk / rank-dv bottlenecks [--kda-full-rank-gates], and the bounded
    # ("safe") forget gate lower_bound * sigmoid(exp(A_log) (f + dt_bias)) in place of -exp(A_log) softplus(f +
    # dt_bias) [--kda-gate-lower-bound, a negative log decay]
    kda_full_rank_gates: bool = config_field(False, features=(LINEAR_ATTENTION,),
                                             help="Kimi Delta Attention: full-rank forget and output gate projections "
                                                  "(Bailing's f_proj, g_proj), not low-rank ones (Kimi Linear)")
    kda_gate_lower_bound: Optional[float] = config_field(None, type=float, features=(LINEAR_ATTENTION,),
                                                         help="Kimi Delta Attention: the bounded forget gate, its log "
                                                              "decay bound * sigmoid(...) in (bound, 0) (Bailing's "
                                                              "kda_lower_bound with kda_safe_gate)")
    linear_attention_pre_norm: bool = config_field(False, features=(LINEAR_ATTENTION,),
                                                   help="with --post-norm-only: the gated DeltaNet layers keep the "
                                                        "norms before their branches (OLMo-Hybrid)")
    # Griffin's recurrent blocks (RecurrentGemma; --experimental-attention-variant rg_lru or pattern letter 'R'): the
    # recurrence width, default the hidden size [--lru-width], and the width of their causal conv [--lru-conv-width];
    # their gates are block-diagonal with one block per attention head
    lru_width: Optional[int] = config_field(None, type=int, features=(RG_LRU,),
                                            help="Griffin's recurrent blocks: the RG-LRU width (default --hidden-size; "
                                                 "RecurrentGemma's lru_width)")
    lru_conv_width: int = config_field(4, features=(RG_LRU,),
                                       help="Griffin's recurrent blocks: the causal conv's width (RecurrentGemma's "
                                            "conv1d_width)")
    # RWKV-4 (pattern letters 'W' time mixing, 'C' channel mixing, the latter --ffn-hidden-size wide): the time
    # mixing's key/value/receptance width, default the hidden size (transformers' attention_hidden_size)
    # [--rwkv-attention-size]
    rwkv_attention_size: Optional[int] = config_field(None, type=int, features=(RWKV,),
                                                      help="RWKV-4 time mixing: the key/value/receptance width "
                                                           "(default --hidden-size; attention_hidden_size)")
    # xLSTM's mLSTM (pattern letter 'X'; heads and dims from the --linear-* sizes): the soft cap of its gate
    # pre-activations (gate_soft_cap; None: uncapped) and the eps of its read's denominator (eps)
    mlstm_gate_soft_cap: Optional[float] = config_field(15.0, type=float, features=(MLSTM,),
                                                        help="mLSTM layers: cap * tanh(x / cap) on the input and "
                                                             "forget gate pre-activations (xLSTM's gate_soft_cap)")
    mlstm_eps: float = config_field(1e-6, features=(MLSTM,),
                                    help="mLSTM layers: the eps added to the read's denominator (xLSTM's eps)")
    # Zamba's shared blocks (pattern letter 'Z'): num_shared_blocks blocks of attention over [hidden; word
    # embeddings] (2 x hidden wide, --num-attention-heads heads of --kv-channels) and a gated MLP, each 'Z'
    # layer running block (its rank among the 'Z' layers) mod N (Zamba2's num_mem_blocks)
    # [--num-shared-blocks]; with a rank each 'Z' layer adds its own low-rank adapters to the block's MLP input
    # projection (Zamba2's adapter_rank) [--shared-block-adapter-rank] and, with
    # --shared-block-attention-adapters, to its q/k/v projections (use_shared_attention_adapter)
    num_shared_blocks: int = config_field(1, features=(SHARED_BLOCK,),
                                          help="'Z' layers: how many shared attention blocks they take turns "
                                               "with (Zamba2's num_mem_blocks)")
    shared_block_adapter_rank: Optional[int] = config_field(
        None, type=int, features=(SHARED_BLOCK,),
        help="'Z' layers: the rank of each layer's own adapters on the shared block's MLP input projection "
             "(Zamba2's adapter_rank); default none")
    shared_block_attention_adapters: bool = config_field(
        False, features=(SHARED_BLOCK,),
        help="'Z' layers: adapters of --shared-block-adapter-rank on the shared attention's q, k and v too "
             "(Zamba2's use_shared_attention_adapter)")
    short_conv_kernel_size: int = config_field(3, features=(SHORT_CONV,),
                                               help="short-conv layers: width of the causal depthwise conv")
    short_conv_bias: bool = config_field(False, features=(SHORT_CONV,),
                                         help="short-conv layers: biases on in_proj, the conv and out_proj")
    # the global layers whose attention output projection has a bias, the others have none (GPT-NeoX-Japanese:
    # the last layer) [--dense-bias-layers]
    dense_bias_layers: Tuple[int, ...] = config_field((), help="global layer numbers (from 0) whose attention output "
                                                      "projection alone has a bias (GPT-NeoX-Japanese: the last "
                                                      "layer)")
    # with --position-embedding-type alibi (Bloom, MPT): head i of n (n rounded up to a power of 2) adds
    # slope 2 ** (-alibi_bias_max * i / n) times the key position to its scores (MPT's alibi_bias_max)
    # [--alibi-bias-max]
    alibi_bias_max: float = config_field(
        8.0, help="with --position-embedding-type alibi: head slopes 2^(-value * i / heads) (MPT's alibi_bias_max)")
    # queries times 1 + beta * ln(1 + floor(position / length)) after RoPE (Llama-4-style attention
    # temperature; Ministral3's llama_4_scaling_beta) [--attn-temperature-beta, --attn-temperature-length]
    attn_temperature_beta: Optional[float] = config_field(None, type=float,
                                                          help="queries times 1 + beta ln(1 + floor(pos / length)) "
                                                               "after RoPE (Ministral3)")
    attn_temperature_length: Optional[int] = config_field(None, type=int,
                                                          help="the position length of --attn-temperature-beta "
                                                               "(Ministral3: the original context)")
    # Llama 4's placement of that scale: on the NoPE layers (--no-rope-layers) only, the RoPE layers unscaled,
    # with positions counted from 1: 1 + beta * ln(1 + floor((position + 1) / length)) [--attn-temperature-nope-layers]
    attn_temperature_nope_layers: bool = config_field(False, features=(ATTENTION,),
                                                      help="--attn-temperature-beta scales the NoPE layers' queries "
                                                           "only, positions from 1 (Llama 4)")
    # RMSNorms over the full width just before the output linears (BitNet): on the attention context before the
    # output projection [--attn-sub-norm] and on the MLP activation before fc2 [--ffn-sub-norm]; at TP > 1 the
    # sum of squares is all-reduced over TP
    attn_sub_norm: bool = config_field(False,
                                       help="RMSNorm on the attention context before the output projection (BitNet)")
    ffn_sub_norm: bool = config_field(False, help="RMSNorm on the MLP activation before its second linear (BitNet)")
    # Absolute positions (core/transformer/position_embedding.py): --position-embedding-type learned_absolute
    # (GPT-2, OPT; a [max_position_embeddings + offset, h] table) or sinusoidal (XGLM's fixed fairseq table);
    # token j reads row position_j + offset (OPT, BioGpt, XGLM: 2) [--position-embedding-offset]
    position_embedding_offset: int = config_field(
        0, help="absolute positions read table row position + offset (OPT, BioGpt, XGLM: 2)")
    # the sinusoidal table's frequencies 10000^(-k / (d/2)) of tensor2tensor (CTRL) instead of fairseq's
    # 10000^(-k / (d/2 - 1)) [--sinusoidal-t2t-frequencies]
    sinusoidal_t2t_frequencies: bool = config_field(False, help="sinusoidal positions at tensor2tensor's frequencies "
                                                                "10000^(-k/(d/2)) (CTRL), not fairseq's")
    # False: layer 0 has no norm before attention (ModernBERT) [--no-first-input-layernorm]
    first_input_layernorm: bool = config_field(True, flag="--no-first-input-layernorm",
                                               help="layer 0 has no norm before attention (ModernBERT: the "
                                                    "embeddings are normed)")
    # A prediction head between the final norm and the output layer: norm(act(dense(x))), dense h -> h replicated
    # over TP, act one of PREDICTION_HEAD_ACTIVATIONS (ModernBERT) [--prediction-head ACT]; dense bias
    # [--prediction-head-bias]
    prediction_head: Optional[str] = config_field(None, metavar="ACT",
                                                  help="norm(ACT(dense(x))) between the final norm and the output "
                                                       "layer (ModernBERT: gelu)")
    prediction_head_bias: bool = config_field(False, help="a bias on the prediction head's dense")
    # V RMS-normalised over each head, without weight, before attention (Gemma4) [--value-norm]
    value_norm: bool = config_field(False,
                                    help="RMS-normalise V over each head, without weight, before attention (Gemma4)")
    # each layer's output (residual included) times a scalar of its own (Gemma4) [--layer-scalar]
    layer_scalar: bool = config_field(False,
                                      help="multiply each layer's output (residual included) by a scalar of its own "
                                           "(Gemma4)")
    # Full-attention layers with their own head dim and KV head count (Gemma4's global_head_dim and
    # num_global_key_value_heads; needs --sliding-window and --local-rotary-base) [--global-kv-channels,
    # --global-num-query-groups]; their values are their keys' projection, no V projection of their own
    # (Gemma4's attention_k_eq_v) [--global-attention-k-eq-v]
    global_kv_channels: Optional[int] = config_field(None, type=int,
                                                     help="head dim of the full-attention layers when it differs "
                                                          "(Gemma4's global_head_dim)")
    global_num_query_groups: Optional[int] = config_field(None, type=int,
                                                          help="KV heads of the full-attention layers (Gemma4's "
                                                               "num_global_key_value_heads)")
    global_attention_k_eq_v: bool = config_field(False,
                                                 help="full-attention layers use their keys' projection as values "
                                                      "(Gemma4's attention_k_eq_v)")
    # Multi-latent attention (DeepSeek-V2/V3, MiniCPM3; core/transformer/mla.py) [--multi-latent-attention]:
    # q = W_qb(norm(W_qa x)) with a q latent of q_lora_rank channels [--q-lora-rank], or W_q x when None; the
    # kv latent W_kva x = [compressed kv (kv_lora_rank) [--kv-lora-rank]; a rope key shared by all heads
    # (qk_pos_emb_head_dim) [--qk-pos-emb-head-dim]]; W_kvb(norm(compressed kv)) gives each head its unrotated
    # key (qk_head_dim) [--qk-head-dim] and value (v_head_dim) [--v-head-dim]. RoPE rotates the last
    # qk_pos_emb_head_dim dims of q and k; softmax scale 1/sqrt(qk_head_dim + qk_pos_emb_head_dim), times YaRN's
    # mscale(factor, mscale_all_dim)^2 when --rope-scaling-mscale-all-dim is set. The q and kv latent norms use
    # mla_latent_norm_epsilon (None: --norm-epsilon; transformers' MLA families fix 1e-6)
    # [--mla-latent-norm-epsilon]
    multi_latent_attention: bool = config_field(False, aliases=("--multi-head-latent-attention",),
                                                help="multi-latent attention (DeepSeek-V2/V3's MLA)")
    q_lora_rank: Optional[int] = config_field(None, type=int,
                                              help="MLA: channels of the query latent (omit: a plain query "
                                                   "projection)")
    kv_lora_rank: Optional[int] = config_field(None, type=int, help="MLA: channels of the compressed key/value latent")
    qk_head_dim: int = config_field(128, aliases=("--qk-nope-head-dim",),
                                    help="MLA: per-head query/key dims without RoPE")
    qk_pos_emb_head_dim: int = config_field(64, aliases=("--qk-rope-head-dim",),
                                            help="MLA: per-head query/key dims with RoPE (the key part shared by all "
                                                 "heads)")
    v_head_dim: int = config_field(128, help="MLA: per-head value dims")
    mla_latent_norm_epsilon: Optional[float] = config_field(None, type=float,
                                                            help="MLA: eps of the q/kv latent norms (default "
                                                                 "--norm-epsilon)")
    # DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5; core/transformer/sparse_attention.py), Megatron-core's flags:
    # every MLA layer runs a lightning indexer and attends to each query's top-k keys only
    # [--experimental-attention-variant dsa]. The indexer's heads and head dim [--dsa-indexer-n-heads,
    # --dsa-indexer-head-dim], the keys kept per query [--dsa-indexer-topk]; cross-layer sharing (GLM-5): layer L
    # (1-based) computes its own top-k when max(L - max(offset, 1), 0) is a multiple of freq, else reuses the last
    # computing layer's [--dsa-indexer-topk-freq, --dsa-indexer-skip-topk-offset]; the indexer's RoPE on pairs
    # (2i, 2i + 1) rather than half-split [--dsa-indexer-rope-interleaved] (GLM-5; DeepSeek-V3.2: half-split); the
    # eps of its key LayerNorm (None: --norm-epsilon) [--dsa-indexer-k-norm-epsilon]
    dsa_indexer_n_heads: Optional[int] = config_field(None, type=int, features=(DSA,),
                                                      help="DSA: the lightning indexer's heads")
    dsa_indexer_head_dim: Optional[int] = config_field(None, type=int, features=(DSA,),
                                                       help="DSA: the lightning indexer's head dim")
    dsa_indexer_topk: Optional[int] = config_field(None, type=int, features=(DSA,),
                                                   help="DSA: the keys each query attends to")
    dsa_indexer_topk_freq: int = config_field(1, features=(DSA,),
                                              help="DSA: every N-th layer computes the top-k, the others reuse it "
                                                   "(GLM-5's cross-layer sharing)")
    dsa_indexer_skip_topk_offset: int = config_field(0, features=(DSA,),
                                                     help="DSA: the 1-based layer the --dsa-indexer-topk-freq "
                                                          "pattern counts from (0 acts as 1)")
    dsa_indexer_rope_interleaved: bool = config_field(False, features=(DSA,),
                                                      help="DSA: the indexer rotates pairs (2i, 2i + 1) (GLM-5), "
                                                           "not half-split ones (DeepSeek-V3.2)")
    dsa_indexer_k_norm_epsilon: Optional[float] = config_field(None, type=float, features=(DSA,),
                                                               help="DSA: eps of the indexer's key LayerNorm "
                                                                    "(default --norm-epsilon)")
    # DeepSeek-V4's attention (core/transformer/compressed_attention.py) in every layer, one letter per layer
    # [--compressed-attention-pattern]: 'S' a sliding window only, 'C' CSA (the window plus the top-k
    # [--dsa-indexer-topk] of overlapping windows of --csa-compress-ratio tokens compressed into one entry each,
    # picked by a lightning indexer of --dsa-indexer-n-heads x --dsa-indexer-head-dim), 'H' HCA (the window plus
    # every entry of non-overlapping windows of --hca-compress-ratio tokens). One shared key/value head of
    # --kv-channels, RoPE on its trailing --rotary-percent (interleaved pairs; the 'S' layers use
    # --local-rotary-base, the others --rotary-base with its scaling), a per-head sink logit, and the grouped
    # output projection: --o-groups groups of heads each projected to --o-lora-rank, then mixed to the hidden size
    compressed_attention_pattern: Optional[str] = config_field(
        None, features=(ATTENTION,), help="DeepSeek-V4's attention: a letter per layer, S sliding window only, C "
                                          "compressed sparse (CSA), H heavily compressed (HCA)")
    csa_compress_ratio: int = config_field(4, features=(COMPRESSED,),
                                           help="DeepSeek-V4: tokens per compressed entry of the CSA layers")
    hca_compress_ratio: int = config_field(128, features=(COMPRESSED,),
                                           help="DeepSeek-V4: tokens per compressed entry of the HCA layers")
    o_groups: Optional[int] = config_field(None, type=int, features=(COMPRESSED,),
                                           help="DeepSeek-V4: head groups of the grouped output projection")
    o_lora_rank: Optional[int] = config_field(None, type=int, features=(COMPRESSED,),
                                              help="DeepSeek-V4: each head group's projected width")
    # Manifold-constrained hyper-connections (DeepSeek-V4; Megatron-core's flags): the residual stream is
    # --mhc-num-residual-streams copies of the hidden state ([s, b, n h] between layers and pipeline stages); each
    # attention and MLP branch reads a learned mix of them and writes back through a learned expansion, the streams
    # mixed by a doubly stochastic matrix (--mhc-sinkhorn-iterations Sinkhorn-Knopp steps, --mhc-eps its floor);
    # a last learned mix (the hyper head) collapses them before the final norm. DeepSeek-V4's formulation
    # (transformers' DeepseekV4HyperConnection), not Megatron-core's HyperConnectionModule
    enable_mhc_connections: bool = config_field(False, help="DeepSeek-V4's manifold-constrained hyper-connections "
                                                            "in place of the residual")
    mhc_num_residual_streams: int = config_field(4, features=(MHC,), help="mHC: the residual streams")
    mhc_sinkhorn_iterations: int = config_field(20, features=(MHC,),
                                                help="mHC: Sinkhorn-Knopp iterations of the stream mixing")
    mhc_eps: float = config_field(1e-6, features=(MHC,), help="mHC: the floor added to the mixing weights")
    # The residual stream in fp32 while parameters and branch compute keep params_dtype (Megatron; HF Mamba's
    # residual_in_fp32): the embedding output is cast to fp32; norms read the fp32 stream and their outputs (a
    # Mamba layer's input, as HF and Megatron cast it before its norm) are cast to the parameters' dtype; branch
    # outputs are added in fp32; pipeline stages exchange fp32; the final norm's output is cast back before the
    # output layer. A no-op with fp32 parameters [--fp32-residual-connection]
    fp32_residual_connection: bool = config_field(False,
                                                  help="keep the residual stream (and pipeline messages) in fp32 "
                                                       "under --bf16/--fp16 (HF Mamba's residual_in_fp32)")
    # Mixture of experts (core/transformer/moe/; Megatron/MindSpeed flag names). num_experts None: dense MLPs
    # [--num-experts]; each token goes to moe_router_topk experts [--moe-router-topk] of FFN size
    # moe_ffn_hidden_size (None: --ffn-hidden-size) [--moe-ffn-hidden-size]. The router (a replicated
    # [experts, hidden] linear, fp32 logits) scores with softmax or sigmoid [--moe-router-score-function];
    # softmax: over all experts then top-k (pre-softmax) [--moe-router-pre-softmax] or top-k logits then a
    # softmax over those k (weights sum to one). norm_topk_prob divides the top-k weights by their sum (pre-softmax
    # softmax and sigmoid; the plain softmax is normalised already) [--norm-topk-prob]. Group-limited routing:
    # experts in moe_router_num_groups groups, a group scored by the sum of its top (topk / group_topk) scores,
    # top-k taken within the best moe_router_group_topk groups [--moe-router-num-groups,
    # --moe-router-group-topk]; moe_router_group_score_topk, when set, sums that many of a group's best scores
    # instead (1: the group's max, DeepSeek-V2; 2: DeepSeek-V3's noaux_tc) [--moe-router-group-score-topk].
    # The weights times moe_router_topk_scaling_factor [--moe-router-topk-scaling-factor].
    # Aux-loss-free balancing: a per-expert bias added to the scores for the selection only, moved by
    # +-rate towards the mean token count after every optimizer step [--moe-router-enable-expert-bias,
    # --moe-router-bias-update-rate]. Load-balancing loss aux_loss (over the micro-batch) / seq_aux_loss (per
    # sequence) / none [--moe-router-load-balancing-type] times --moe-aux-loss-coeff; z-loss
    # mean(logsumexp(logits)^2) times --moe-z-loss-coeff.
    # SparseMixer routing (Phi-3.5-MoE) [--moe-router-score-function sparsemixer]: k rounds, each picks the
    # best remaining logit m, keeps the experts with (m - s) / max(|s|, m) <= 2 eps
    # [--moe-router-sparsemixer-eps] and weights the pick by its softmax over those (earlier picks excluded).
    # This is the deterministic (eval-mode) SparseMixer in training too: its Gumbel sampling and Heun-method
    # gradient estimate are not reproduced (the gradient flows through the softmax).
    num_experts: Optional[int] = config_field(None, group="mixture of experts", type=int,
                                              help="experts per MoE layer; none: dense MLPs")
    moe_router_topk: int = config_field(2, group="mixture of experts", features=(MOE,),
                                        help="experts each token is routed to")
    moe_ffn_hidden_size: Optional[int] = config_field(None, group="mixture of experts", type=int, features=(MOE,),
                                                      help="one expert's FFN size; default --ffn-hidden-size")
    moe_router_score_function: str = config_field("softmax", group="mixture of experts",
                                                  choices=MOE_SCORE_FUNCTIONS, features=(MOE,))
    moe_router_pre_softmax: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                                help="softmax over all experts before the top-k (default: softmax "
                                                     "over the top-k logits)")
    norm_topk_prob: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                        help="divide the top-k weights by their sum")
    # DeepSeek-V4's hash routing: layers 0 .. N - 1 (MoE layers) pick each token's experts from a fixed table indexed by
    # its token id (the router's ``tid2eid`` buffer [vocab, topk]); their router weighs the picks by its scores
    moe_hash_layers: int = config_field(0, group="mixture of experts", features=(MOE,),
                                        help="layers 0..N-1 (MoE) route by a fixed token-id -> experts table "
                                             "(DeepSeek-V4's hash routing)")
    moe_router_sparsemixer_eps: float = config_field(0.01, group="mixture of experts", features=(MOE,),
                                                     help="SparseMixer: experts within this relative distance (x 2) "
                                                          "of the pick share its softmax")
    # The router's linear, scores and the weighted sum of the experts' outputs in fp32 or fp64 (Megatron's
    # --moe-router-dtype; None: the router's linear in the model dtype, scores in fp32, the sum in the model dtype)
    moe_router_dtype: Optional[str] = config_field(None, group="mixture of experts", choices=("fp32", "fp64"),
                                                   features=(MOE,),
                                                   help="the router and the weighted sum of the experts' outputs in "
                                                        "this dtype (default: the model's, scores in fp32)")
    moe_router_num_groups: Optional[int] = config_field(None, group="mixture of experts", type=int, features=(MOE,),
                                                        help="expert groups for group-limited routing")
    moe_router_group_topk: Optional[int] = config_field(None, group="mixture of experts", type=int, features=(MOE,),
                                                        help="groups each token may route to")
    moe_router_group_score_topk: Optional[int] = config_field(None, group="mixture of experts", type=int,
                                                              features=(MOE,),
                                                              help="a group's score sums its best N expert scores "
                                                                   "(default topk / group-topk; 1: the max)")
    moe_router_topk_scaling_factor: Optional[float] = config_field(None, group="mixture of experts", type=float,
                                                                   features=(MOE,),
                                                                   help="the top-k weights times this factor")
    moe_router_enable_expert_bias: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                                       help="aux-loss-free balancing: a per-expert selection bias "
                                                            "updated from token counts")
    # the expert bias added to the router's logits, before the sigmoid, for the choice (Kolibri-1), not to the
    # sigmoid scores (DeepSeek-V3) [--moe-router-expert-bias-on-logits]
    moe_router_expert_bias_on_logits: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                                          help="choose the experts by logits + expert bias (Kolibri-1) "
                                                               "instead of sigmoid scores + expert bias")
    # an RMSNorm/LayerNorm on the MoE block's output (routed + shared) before the residual add, on MoE layers only
    # (A.X-K1) [--moe-output-norm]
    moe_output_norm: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                         help="a norm on each MoE layer's output before the residual add (A.X-K1)")
    moe_router_bias_update_rate: float = config_field(1e-3, group="mixture of experts", features=(MOE,),
                                                      help="the expert bias moves by this much per optimizer step")
    moe_router_load_balancing_type: str = config_field("aux_loss", group="mixture of experts",
                                                       choices=MOE_LOAD_BALANCING_TYPES, features=(MOE,))
    moe_aux_loss_coeff: float = config_field(0.0, group="mixture of experts", features=(MOE,),
                                             help="load-balancing loss coefficient")
    moe_z_loss_coeff: Optional[float] = config_field(None, group="mixture of experts", type=float, features=(MOE,),
                                                     help="router z-loss coefficient")
    moe_expert_capacity_factor: Optional[float] = config_field(None, group="mixture of experts", type=float,
                                                               features=(MOE,),
                                                               help="tokens per expert at most ceil(tokens x topk / "
                                                                    "experts x factor); default dropless")
    # Shared expert: a dense MLP of this FFN size every token of an MoE layer goes through (Megatron's
    # --moe-shared-expert-intermediate-size; MindSpeed's --n-shared-experts N sets N x --moe-ffn-hidden-size),
    # its output times sigmoid(x . w) per token with --shared-expert-gate (Qwen2-MoE). MoE layers: layer i
    # (0-based) when i % moe_layer_freq == 0 [--moe-layer-freq] and i >= first_k_dense_replace
    # [--first-k-dense-replace]; the others keep the dense MLP.
    moe_shared_expert_intermediate_size: Optional[int] = config_field(None, group="mixture of experts", type=int,
                                                                      features=(MOE,),
                                                                      help="FFN size of the shared expert every "
                                                                           "token goes through")
    shared_expert_gate: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                            help="the shared expert's output times sigmoid(x . w) per token "
                                                 "(Qwen2-MoE)")
    # the shared expert's output times a constant (Cohere2-MoE's "average" combination: (routed + shared) / 2 is
    # this 0.5 with --moe-router-topk-scaling-factor 0.5) [--moe-shared-expert-scale]
    moe_shared_expert_scale: Optional[float] = config_field(None, group="mixture of experts", type=float,
                                                            features=(MOE,),
                                                            help="the shared expert's output times this constant "
                                                                 "(Cohere2-MoE's average: 0.5)")
    moe_layer_freq: int = config_field(1, group="mixture of experts", features=(MOE,),
                                       help="every Nth layer (0, N, 2N, ...) is an MoE layer")
    first_k_dense_replace: int = config_field(0, group="mixture of experts", features=(MOE,),
                                              help="the first K layers keep dense MLPs")
    # top-1 routing: the expert reads its token times the routing weight and its output is added unscaled
    # (Llama 4; Megatron's flag) [--moe-apply-probs-on-input]
    moe_apply_probs_on_input: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                                  help="top-1: the routing weight scales the expert's input, not its "
                                                       "output (Llama 4)")
    # Multi-token prediction (DeepSeek-V3; Megatron's flags; core/transformer/multi_token_prediction.py): D modules
    # on the last pipeline stage [--mtp-num-layers D]; module k (1..D) reads the hidden states h^{k-1} (the decoder
    # output after its final norm for k = 1, module k-1's normed output after) and the embeddings of the tokens
    # shifted by k: eh_proj(cat[enorm(emb), hnorm(h)]) ([2h] -> [h], no bias), one transformer layer built as the
    # last decoder layer is (MoE when that layer is), a final norm of its own, then the shared output layer
    # predicts the tokens shifted by k + 1. The loss adds --mtp-loss-scaling-factor / D times the sum over k of
    # each module's masked mean cross-entropy [--mtp-loss-scaling-factor].
    mtp_num_layers: Optional[int] = config_field(None, group="mixture of experts", type=int,
                                                 help="multi-token prediction: D DeepSeek-V3 MTP modules on the last "
                                                      "stage (omit: none)")
    # Biases of MoE layers (GPT-OSS): the experts' linears have biases with --add-bias-linear or --add-mlp-bias
    # (fc1 bias [experts, (2) ffn] split over TP like fc1; fc2 bias [experts, h] added by TP rank 0 only, its
    # gradient marked partial over TP); the router's linear has one with --add-bias-linear (Megatron) or, without
    # biases elsewhere in attention, --add-router-bias (our flag: Megatron has none of its own)
    add_router_bias: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                         help="a bias on the router's linear without --add-bias-linear (GPT-OSS "
                                              "without attention bias)")
    # Gated-MLP variants (Megatron's flags; GPT-OSS's clamped SwiGLU is --activation quick_geglu with 7.0 and 1.0):
    # before the activation the gate clamped to at most the value and the up half to [-value, value]
    # [--activation-func-clamp-value]; act(gate) * (up + offset) [--glu-linear-offset]. They apply to the dense
    # MLPs, shared experts and experts alike.
    activation_func_clamp_value: Optional[float] = config_field(None, type=float, features=(ATTENTION,),
                                                                help="gated MLP: clamp the gate to at most this and "
                                                                     "the up half to [-value, value] (GPT-OSS: 7)")
    glu_linear_offset: float = config_field(0.0, features=(ATTENTION,),
                                            help="gated MLP: act(gate) * (up + offset) (GPT-OSS: 1)")


@dataclass
class RuntimeConfig:
    """How a run computes: parallel degrees and algorithms, recompute, swap, kernels, dtype, dropout,
    loss weights. None is architecture: a checkpoint need not match them."""

    attention_dropout: float = config_field(0.1, group="regularization")
    hidden_dropout: float = config_field(0.1, group="regularization")
    init_method_std: float = config_field(0.02, group="initialization")
    params_dtype: torch.dtype = config_field(torch.float32, flag=None)
    # FP8 linears (core/quantization/fp8.py, applied by mindspeed_llm/transforms/fp8.py; Megatron-core's flags): the
    # element format [--fp8-format: e4m3, hybrid = E4M3 forward and E5M2 gradients, hif8 = HiFloat8] and how scales
    # are taken [--fp8-recipe: delayed (its history: --fp8-amax-history-len, --fp8-amax-compute-algo, --fp8-margin),
    # tensorwise, rowwise, blockwise, mxfp8]; the decoder layers' linears quantise their
    # inputs, weights and output gradients, the embeddings and output layer stay in high precision, and so do the
    # first and last layers with --first-last-layers-bf16 [--num-layers-at-start-in-bf16, --num-layers-at-end-in-bf16];
    # the GEMMs run through one backend [--fp8-gemm: core/quantization/fp8_gemm.py]
    fp8_format: Optional[str] = config_field(None, group="mixed precision", choices=("e4m3", "hybrid", "hif8"),
                                             help="FP8 linears in this format (with --fp8-recipe): e4m3; hybrid (E4M3 "
                                                  "forward, E5M2 gradients); hif8 (HiFloat8)")
    fp8_recipe: Optional[str] = config_field(None, group="mixed precision",
                                             choices=("delayed", "tensorwise", "rowwise", "blockwise", "mxfp8"),
                                             help="FP8 scaling: delayed (per tensor, from the amax history of "
                                                  "earlier steps), tensorwise (current per-tensor amax), rowwise "
                                                  "(per row along each GEMM's reduction, power-of-two scales), "
                                                  "blockwise (1x128 tiles, 128x128 weight blocks), mxfp8 (32-element "
                                                  "blocks, E8M0 scales)")
    fp8_gemm: str = config_field(AUTO, group="mixed precision", choices=GEMM_CHOICES,
                                 help="the FP8 linears' GEMMs: auto (torch._scaled_mm on a CUDA device of compute "
                                      "capability 8.9+ for the delayed, tensorwise and rowwise recipes in e4m3/"
                                      "hybrid, else emulated), scaled_mm (forced, also on the CPU), emulated "
                                      "(quantise, dequantise, fp32 product)")
    fp8_amax_history_len: int = config_field(1, group="mixed precision",
                                             help="--fp8-recipe delayed: steps of amax history per tensor")
    fp8_amax_compute_algo: str = config_field("most_recent", group="mixed precision", choices=("most_recent", "max"),
                                              help="--fp8-recipe delayed: the amax a scale uses, the newest entry of "
                                                   "the history or its max")
    fp8_margin: int = config_field(0, group="mixed precision",
                                   help="--fp8-recipe delayed: scale down by 2^margin below the format's range")
    first_last_layers_bf16: bool = config_field(False, group="mixed precision",
                                                help="with --fp8-format: keep the first and last decoder layers' "
                                                     "linears in high precision")
    num_layers_at_start_in_bf16: int = config_field(1, group="mixed precision",
                                                    help="with --first-last-layers-bf16: how many first layers")
    num_layers_at_end_in_bf16: int = config_field(1, group="mixed precision",
                                                  help="with --first-last-layers-bf16: how many last layers")
    # FP4 linears (the same transform; Megatron-core's flags): E2M1 elements [--fp4-format e2m1] scaled per
    # [--fp4-recipe: nvfp4 = 1 x 16 blocks with E4M3 scales under a tensor scale, 16 x 16 weight blocks; mxfp4 =
    # OCP blocks of 32 with E8M0 scales]; gradients round stochastically, the weight gradient's operands are
    # Hadamard-transformed per 16 tokens
    fp4_format: Optional[str] = config_field(None, group="mixed precision", choices=("e2m1",),
                                             help="FP4 linears with E2M1 elements (with --fp4-recipe)")
    fp4_recipe: str = config_field("nvfp4", group="mixed precision", choices=("nvfp4", "mxfp4"),
                                   help="--fp4-format's scaling: nvfp4 (16-element blocks, E4M3 scales, a tensor "
                                        "scale; 16 x 16 weight blocks) or mxfp4 (32-element blocks, E8M0 scales)")
    # DSA's two training stages (DeepSeek-V3.2): the indexer learns the KL divergence from the main attention's
    # distribution (summed over heads, normalised) to its own, times the coefficient [--dsa-indexer-loss-coeff,
    # Megatron's]; over the selected keys only in the sparse stage [--dsa-indexer-use-sparse-loss], over every
    # causal key in the dense warm-up, where attention stays dense and only the indexer trains
    # [--dsa-dense-warmup]. The indexer's inputs are detached: the LM loss never reaches it.
    dsa_indexer_loss_coeff: float = config_field(0.0, group="training", features=(DSA,),
                                                 help="DSA: coefficient of the indexer's KL loss (0: no indexer loss, "
                                                      "the indexer does not train)")
    dsa_indexer_use_sparse_loss: bool = config_field(False, group="training", features=(DSA,),
                                                     help="DSA: the indexer loss over each query's selected keys "
                                                          "only (V3.2's sparse stage)")
    dsa_dense_warmup: bool = config_field(False, group="training", features=(DSA,),
                                          help="DSA: V3.2's dense warm-up stage: dense attention, every parameter "
                                               "but the indexers' frozen, the indexer loss over all causal keys")
    # QK-clip (MuonClip, Kimi K2; Megatron-core's flags): each step the attention records every head's largest
    # logit; after the optimizer step a head (a KV group under GQA) whose largest logit S passed the threshold has
    # its query rows scaled by eta^alpha and its key rows by eta^(1 - alpha), eta = threshold / S (MLA: the rope
    # query by eta, the shared rope key untouched) [--qk-clip, --qk-clip-threshold, --qk-clip-alpha]
    qk_clip: bool = config_field(False, group="training",
                                 help="rescale the query and key projections of heads whose largest attention logit "
                                      "passes --qk-clip-threshold, after each optimizer step (MuonClip)")
    qk_clip_threshold: float = config_field(100.0, group="training", help="--qk-clip: the largest logit allowed")
    qk_clip_alpha: float = config_field(0.5, group="training",
                                        help="--qk-clip: the share of the rescaling on the queries (the keys get "
                                             "the rest)")
    tensor_model_parallel_size: int = config_field(1, group="distributed")
    sequence_parallel: bool = config_field(False, group="distributed")
    # Context parallelism (runtime settings, not architecture; core/transformer/context_parallel.py): the
    # algorithm [--context-parallel-algo], the Ulysses degree of the hybrid [--ulysses-degree-in-cp], the
    # ring's causal load balancing ("causal") or contiguous parts ("general") [--attention-mask-type], the
    # ring's exchange overlapped with compute [--use-cp-send-recv-overlap], KV heads repeated to the query
    # heads before Ulysses' all-to-all [--kv-head-repeat-before-uly-alltoall]
    context_parallel_algo: str = config_field("megatron_cp_algo", group="distributed",
                                              choices=CONTEXT_PARALLEL_ALGORITHMS,
                                              help="ring (megatron_cp_algo), Ulysses all-to-all, both (hybrid) or a "
                                                   "K/V all-gather")
    ulysses_degree_in_cp: Optional[int] = config_field(None, group="distributed", type=int,
                                                       help="hybrid_cp_algo: CP ranks per Ulysses group; the ring "
                                                            "runs across the groups")
    attention_mask_type: str = config_field("causal", group="distributed", choices=("causal", "general"),
                                            help="ring CP: causal (load-balanced chunks, skipped blocks) or general "
                                                 "(contiguous parts, every block masked)")
    cp_send_recv_overlap: bool = config_field(False, flag="--use-cp-send-recv-overlap", group="distributed",
                                              help="ring CP: post the next K/V exchange before computing the current "
                                                   "block")
    kv_head_repeat_before_uly_alltoall: bool = config_field(False, group="distributed",
                                                            help="Ulysses: repeat KV heads to the query heads before "
                                                                 "the all-to-all")
    # Activation recompute (Megatron/MindSpeed names): "full" or "selective"; "uniform" or "block"
    recompute_granularity: Optional[str] = config_field(None, group="training", choices=("full", "selective"))
    recompute_method: Optional[str] = config_field(None, group="training", choices=("uniform", "block"))
    recompute_num_layers: Optional[int] = config_field(None, group="training", type=int)
    # MindSpeed: recompute the MLP activation only
    recompute_activation_function: bool = config_field(False, group="training",
                                                       help="recompute the MLP activation in the backward (MindSpeed)")
    # MindSpeed's activation offload: what autograd saves in these sub-modules of each transformer layer waits
    # in host memory until the backward (core/transformer/swap_attention.py) [--swap-attention, --swap-modules]
    swap_attention: bool = config_field(False, group="training",
                                        help="keep the activations each layer's --swap-modules save in host memory "
                                             "until the backward, prefetched a layer ahead (MindSpeed); with "
                                             "--recompute-num-layers N alone the MLPs of the first N layers of each "
                                             "model chunk are recomputed")
    swap_modules: Tuple[str, ...] = config_field(("input_norm", "self_attention", "post_attention_norm"),
                                                 group="training", type=str,
                                                 help="comma-separated layer sub-modules for --swap-attention "
                                                      "(default input_norm,self_attention,post_attention_norm; also "
                                                      "input_layernorm, pre_mlp_layernorm, mlp, "
                                                      "post_self_attn_layernorm, post_mlp_layernorm)")
    # The training loss's output layer and cross-entropy run together over chunks of this many vocabulary
    # entries (core/tensor_parallel/cross_entropy.py), so the [s, b, v/tp] fp32 logits never exist; 0 materialises
    # them. None chooses by the dtype the output layer's GEMM runs in (core.device.gemm_dtype): chunks of
    # CROSS_ENTROPY_CHUNK in bf16/fp16 (as fast and far smaller), the logits in fp32 (the chunked backward
    # recomputes the product, a GEMM that fp32 pays in full), also for bf16 weights on a CPU without bf16 units
    # [--cross-entropy-chunk-size]
    cross_entropy_chunk_size: Optional[int] = config_field(None, group="regularization", type=int, metavar="ENTRIES",
                                                           help="compute the output layer and the loss over chunks "
                                                                "of this many vocabulary entries, never "
                                                                "materialising the [s, b, v/tp] logits; 0 "
                                                                "materialises them; default: chunks of 2048 in "
                                                                "bf16/fp16, the logits in fp32")
    # The loss's elementwise work on each block of logits (raise, scale, cap, online log-sum-exp; softmax minus
    # target in the backward) as fused kernels: a torch.compile'd region per pass; the materialised path then
    # saves the logits in their dtype instead of an fp32 softmax (core/tensor_parallel/cross_entropy.py)
    # [--cross-entropy-loss-fusion]
    cross_entropy_loss_fusion: bool = config_field(False, group="regularization",
                                                   help="the loss's elementwise work per block of logits as fused "
                                                        "kernels (a torch.compile'd region), one or two passes "
                                                        "instead of one per operation")
    # A scalar score head on the final hidden states instead of the logits: a reward model (set by
    # posttrain.py --stage orm, not a flag; core/models/gpt_model.ValueHead)
    value_head: bool = config_field(False, flag=None)
    # Experts (core/transformer/moe/experts.py): the products as one torch._grouped_mm per linear instead of a
    # loop over experts, same numbers [--moe-grouped-gemm]; at most ceil(tokens x topk / experts x factor)
    # tokens per expert, the lowest-weight ones dropped (None: dropless) [--moe-expert-capacity-factor].
    # Experts use the dense MLP's activation flags (and biases: see add_router_bias below).
    moe_grouped_gemm: bool = config_field(False, group="mixture of experts", features=(MOE,),
                                          help="expert products as torch._grouped_mm (where available) instead of a "
                                               "loop")
    # Expert parallelism: the experts split over --expert-model-parallel-size ranks, each expert split over
    # --expert-tensor-parallel-size ranks: None or TP (the default) splits it like the dense MLP, the EP ranks
    # carved out of data parallelism; 1 keeps experts whole and spreads them over TP x (EP / TP) ranks, as
    # Megatron's expert mesh does (needs SP and EP a multiple of TP). Tokens travel by all-to-all or all-gather
    # [--moe-token-dispatcher-type] (Megatron's default: allgather). Every layout gives the numbers of EP 1.
    expert_model_parallel_size: int = config_field(1, group="distributed", features=(MOE,))
    expert_tensor_parallel_size: Optional[int] = config_field(
        None, group="mixture of experts", type=int, features=(MOE,),
        help="TP size of each expert: --tensor-model-parallel-size (default) or 1 (whole experts over TP x EP ranks, "
             "with --sequence-parallel)")
    moe_token_dispatcher_type: str = config_field("allgather", group="mixture of experts",
                                                  choices=MOE_TOKEN_DISPATCHER_TYPES, features=(MOE,),
                                                  help="how tokens reach the experts' ranks under expert parallelism")
    mtp_loss_scaling_factor: float = config_field(0.1, group="mixture of experts",
                                                  help="the MTP loss (mean over the D modules) is added to the LM "
                                                       "loss times this factor")
    # Fused kernels (run-time choices, not architecture; core/fused.py): each selects per device type
    # a fast kernel behind one function with a pure-PyTorch reference, same numerics up to kernel rounding. Where
    # the device has no package kernel, the first three compile the reference with torch.compile, and
    # --use-flash-attn keeps scaled_dot_product_attention (a warning says so). RMSNorm: torch_npu / apex
    # (Megatron's default even without the flag) [--use-fused-rmsnorm, needs --normalization RMSNorm];
    # SwiGLU silu(gate) * up: torch_npu [--use-fused-swiglu, needs plain --swiglu]; RoPE: torch_npu / apex
    # [--use-fused-rotary-pos-emb, needs rotary embeddings]; causal attention over a whole sequence: flash-attn
    # on CUDA, npu_fusion_attention on an NPU, other calls on the SDPA path [--use-flash-attn]
    use_fused_rmsnorm: bool = config_field(False, group="fused kernels",
                                           help="RMSNorm through the NPU's or apex's kernel, else a torch.compile'd "
                                                "reference")
    use_fused_swiglu: bool = config_field(False, group="fused kernels",
                                          help="SwiGLU through the NPU's kernel, else a torch.compile'd reference")
    use_fused_rotary_pos_emb: bool = config_field(False, group="fused kernels",
                                                  help="RoPE through the NPU's or apex's kernel, else a "
                                                       "torch.compile'd reference")
    use_flash_attn: bool = config_field(False, group="fused kernels",
                                        help="causal attention through flash-attn (CUDA) or the NPU's fusion "
                                             "attention; elsewhere scaled_dot_product_attention, with a warning")


@dataclass
class TransformerConfig(RuntimeConfig, ModelConfig):
    """Architecture and numerics of a decoder-only transformer: every field of both tables."""

    def __post_init__(self) -> None:
        if self.ffn_hidden_size is None:
            self.ffn_hidden_size = 4 * self.hidden_size
        if self.num_query_groups is None:
            self.num_query_groups = self.num_attention_heads
        if self.kv_channels is None:
            self.kv_channels = self.hidden_size // self.num_attention_heads
        self.noop_layers = tuple(sorted(self.noop_layers))
        self.no_rope_layers = tuple(sorted(self.no_rope_layers))
        self.full_attention_layers = tuple(sorted(self.full_attention_layers))
        self.dense_bias_layers = tuple(sorted(self.dense_bias_layers))
        self.validate()

    def validate(self) -> None:
        """Reject inconsistent settings; messages name the flags."""
        self._validate_swap_attention()
        self._validate_fp8()
        self._validate_qk_clip()
        if self.normalization not in NORMALIZATIONS:
            raise ValueError(f"--normalization {self.normalization!r} is not one of {NORMALIZATIONS}")
        if self.position_embedding_type not in POSITION_EMBEDDINGS:
            raise ValueError(f"--position-embedding-type {self.position_embedding_type!r} "
                             f"is not one of {POSITION_EMBEDDINGS}")
        if self.rope_scaling_type not in ROPE_SCALINGS:
            raise ValueError(f"--rope-scaling-type {self.rope_scaling_type!r} is not one of {ROPE_SCALINGS}")
        self._validate_hybrid()
        self._validate_moe()
        if self.has_attention_layers:
            self._validate_attention()
        if self.sliding_window is not None and self.sliding_window < 1:
            raise ValueError(f"--sliding-window {self.sliding_window} must be at least 1")
        if self.attention_output_gate_per_head and not self.attention_output_gate:
            raise ValueError("--attention-output-gate-per-head sets the gate's granularity: add "
                             "--attention-output-gate (or drop it)")
        self._validate_mla()
        self._validate_compressed_attention()
        self._validate_mhc()
        self._validate_behaviour()
        self._validate_mtp()
        self._validate_fused_kernels()
        bad_noop = [i for i in self.noop_layers if not 0 <= i < self.num_layers]
        if bad_noop:
            raise ValueError(f"--noop-layers {bad_noop} out of range [0, {self.num_layers}) of --num-layers")

    def _validate_fused_kernels(self) -> None:
        """A fused-kernel flag must have its operation in the model (else it would change nothing)."""
        if self.use_fused_rmsnorm and self.normalization != "RMSNorm":
            raise ValueError(f"--use-fused-rmsnorm fuses RMSNorm, and --normalization is {self.normalization}: "
                             "drop the flag")
        if self.use_fused_swiglu and not (self.activation == "swiglu" and self.activation_func_clamp_value is None
                                          and self.glu_linear_offset == 0.0):
            raise ValueError("--use-fused-swiglu fuses plain SwiGLU: it needs --swiglu without "
                             "--activation-func-clamp-value/--glu-linear-offset; drop the flag")
        if self.use_fused_rotary_pos_emb and self.position_embedding_type != "rope":
            raise ValueError(f"--use-fused-rotary-pos-emb fuses RoPE, and --position-embedding-type is "
                             f"{self.position_embedding_type}: drop the flag")

    def _validate_attention(self) -> None:
        """Heads, KV groups and FFN against TP (only when some layer has attention and an MLP)."""
        tp = self.tensor_model_parallel_size
        if self.num_query_groups < 1 or self.num_attention_heads % self.num_query_groups != 0:
            raise ValueError(f"--num-attention-heads ({self.num_attention_heads}) must be a multiple of "
                             f"--num-query-groups ({self.num_query_groups}); choose a group count that divides "
                             "the heads")
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

    def _validate_hybrid(self) -> None:
        """The layer pattern, the linear-attention layers and the Mamba mixer's sizes against TP."""
        pattern = self.hybrid_override_pattern
        if pattern is not None:
            bad = sorted(set(pattern) - set(LAYER_KINDS))
            if bad:
                letters = ", ".join(f"{letter} {what}" for letter, what in LAYER_LETTERS.items())
                raise ValueError(f"--hybrid-override-pattern {pattern!r}: unknown letter {bad[0]!r}; the letters "
                                 f"are {letters}")
            if len(pattern) != self.num_layers:
                raise ValueError(f"--hybrid-override-pattern {pattern!r} has {len(pattern)} letters and "
                                 f"--num-layers is {self.num_layers}: give one letter per layer")
        if not self.has_mamba_layers:
            self._refuse_unused(MAMBA, "applies to Mamba layers; add --hybrid-override-pattern with 'M' layers or "
                                       "drop it")
        self._validate_linear_attention()
        self._validate_short_conv()
        self._validate_rg_lru()
        self._validate_rwkv()
        self._validate_shared_blocks()
        if MLSTM_MIXER not in self.layer_mixers:
            self._refuse_unused(MLSTM, "applies to mLSTM layers ('X' in --hybrid-override-pattern, or "
                                       "--experimental-attention-variant mlstm); add them or drop it")
        if not self.has_parallel_hybrid_layers:
            self._refuse_unused(PARALLEL_HYBRID, "applies to the 'H' layers of --hybrid-override-pattern (a Mamba2 "
                                                 "beside an attention, Falcon-H1); add them or drop it")
        self._validate_mlp_multipliers()
        if pattern is None:
            return
        if self.has_parallel_hybrid_layers and self.multi_latent_attention:
            raise ValueError(f"the 'H' layers of --hybrid-override-pattern {pattern!r} pair Mamba2 with standard "
                             "attention; drop --multi-latent-attention")
        if not self.has_softmax_attention and self.position_embedding_type != "none":
            raise ValueError(f"--hybrid-override-pattern {pattern!r} has no attention layer ('*') to use a "
                             "position embedding; set --position-embedding-type none")
        if not self.has_attention_layers:
            self._refuse_unused(ATTENTION, f"applies to attention or MLP layers, which --hybrid-override-pattern "
                                           f"{pattern!r} has none of; drop it")
        if "E" in pattern and self.num_experts is None:
            raise ValueError(f"--hybrid-override-pattern {pattern!r} has MoE layers ('E'); add --num-experts")
        moe_placement = self._changed(("moe_layer_freq", "first_k_dense_replace"))
        if moe_placement:
            raise ValueError(f"{moe_placement[0]} places MoE layers, which --hybrid-override-pattern places by its "
                             "'E' letters; drop it")
        if self.has_mamba_layers:
            self._validate_mamba()

    def _validate_linear_attention(self) -> None:
        """--experimental-attention-variant with --linear-attention-freq, or 'G' / 'K' / 'L' letters, and the
        --linear-* sizes."""
        variant, pattern = self.experimental_attention_variant, self.hybrid_override_pattern
        if variant == DSA_VARIANT:
            self._validate_dsa()
            variant = None  # no layer of a linear-attention variant
        elif CSA_LETTER not in (self.compressed_attention_pattern or ""):  # CSA's indexer reads them too
            self._refuse_unused(DSA, "applies to DeepSeek Sparse Attention; add --experimental-attention-variant "
                                     "dsa (with --multi-latent-attention) or drop it")
        if variant is not None and pattern is not None:
            raise ValueError(f"--experimental-attention-variant {variant} places its layers in a GPT model by "
                             "--linear-attention-freq, --hybrid-override-pattern by its letters ('G' gated "
                             "DeltaNet, 'K' Kimi Delta Attention, 'L' lightning attention); drop one of them")
        if variant is not None and self.linear_attention_freq is None:
            raise ValueError(f"--experimental-attention-variant {variant} needs --linear-attention-freq (which "
                             f"layers are {variant} layers)")
        if variant is None and self.linear_attention_freq is not None:
            raise ValueError("--linear-attention-freq needs --experimental-attention-variant (one of "
                             f"{', '.join(EXPERIMENTAL_ATTENTION_VARIANTS)})")
        if variant is not None and not any(self.linear_attention_layers):
            raise ValueError(f"--linear-attention-freq {self.linear_attention_freq!r} marks no layer as a "
                             f"{variant} layer; mark some with 1 or drop --experimental-attention-variant")
        if not self.has_linear_attention_layers:
            self._refuse_unused(LINEAR_ATTENTION, "applies to gated DeltaNet, Kimi Delta Attention, lightning "
                                                  "and mLSTM layers; add --experimental-attention-variant "
                                                  "gated_delta_net (or kda, lightning, mlstm) or 'G' ('K', 'L', 'X') "
                                                  "letters in --hybrid-override-pattern, or drop it")
            return
        for flag, value in (("--linear-conv-kernel-dim", self.linear_conv_kernel_dim),
                            ("--linear-key-head-dim", self.linear_key_head_dim),
                            ("--linear-value-head-dim", self.linear_value_head_dim),
                            ("--linear-num-key-heads", self.linear_num_key_heads),
                            ("--linear-num-value-heads", self.linear_num_value_heads),
                            ("--linear-chunk-size", self.linear_chunk_size)):
            if value < 1:
                raise ValueError(f"{flag} {value} must be at least 1")
        keys, values, tp = self.linear_num_key_heads, self.linear_num_value_heads, self.tensor_model_parallel_size
        if values % keys:
            raise ValueError(f"--linear-num-value-heads ({values}) must be a multiple of --linear-num-key-heads "
                             f"({keys})")
        if keys % tp:
            raise ValueError(f"--linear-num-key-heads ({keys}) must be divisible by --tensor-model-parallel-size "
                             f"({tp}): TP splits the gated DeltaNet (and KDA) by key heads")
        if GDN_MIXER not in self.layer_mixers:
            gdn_only = self._changed(("linear_allow_neg_eigval", "linear_norm_epsilon"))
            if gdn_only:
                raise ValueError(f"{gdn_only[0]} applies to gated DeltaNet layers, which this model has none of; "
                                 "drop it")
        if KDA_MIXER not in self.layer_mixers:
            kda_only = self._changed(("kda_full_rank_gates", "kda_gate_lower_bound"))
            if kda_only:
                raise ValueError(f"{kda_only[0]} applies to Kimi Delta Attention layers, which this model has none "
                                 "of; drop it")
        if not self.layer_mixers & {GDN_MIXER, KDA_MIXER} and self._changed(("linear_conv_kernel_dim",)):
            raise ValueError("--linear-conv-kernel-dim applies to the short conv of gated DeltaNet and Kimi Delta "
                             "Attention layers; lightning and mLSTM layers have none: drop it")
        if self.kda_gate_lower_bound is not None and self.kda_gate_lower_bound >= 0:
            raise ValueError(f"--kda-gate-lower-bound {self.kda_gate_lower_bound} must be negative (a log decay)")
        lightning = LIGHTNING_MIXER in self.layer_mixers
        if lightning and (keys != values or self.linear_key_head_dim != self.linear_value_head_dim):
            raise ValueError(f"lightning-attention layers have one head count and head dim: --linear-num-key-heads "
                             f"({keys}) must equal --linear-num-value-heads ({values}) and --linear-key-head-dim "
                             f"({self.linear_key_head_dim}) --linear-value-head-dim ({self.linear_value_head_dim})")
        mlstm = MLSTM_MIXER in self.layer_mixers
        if mlstm and keys != values:
            raise ValueError(f"mLSTM layers have one head count for q, k and v: --linear-num-key-heads ({keys}) must "
                             f"equal --linear-num-value-heads ({values})")

    def _validate_shared_blocks(self) -> None:
        """The shared-block fields only with 'Z' layers; the adapters' rank."""
        if not self.has_shared_blocks:
            self._refuse_unused(SHARED_BLOCK, "applies to the 'Z' layers of --hybrid-override-pattern (Zamba's "
                                              "shared attention blocks); add them or drop it")
            return
        if self.num_shared_blocks < 1:
            raise ValueError(f"--num-shared-blocks {self.num_shared_blocks} must be at least 1")
        rank = self.shared_block_adapter_rank
        if rank is not None and rank < 1:
            raise ValueError(f"--shared-block-adapter-rank {rank} must be at least 1")
        if self.shared_block_attention_adapters and rank is None:
            raise ValueError("--shared-block-attention-adapters needs --shared-block-adapter-rank (the adapters' "
                             "rank)")
        if self.multi_latent_attention:
            raise ValueError("the shared blocks of the 'Z' layers hold standard attention; drop "
                             "--multi-latent-attention")
        unsupported = {"--mtp-num-layers": self.mtp_num_layers is not None,
                       "--residual-multiplier": self.residual_multiplier is not None,
                       "--residual-alpha": self.residual_alpha is not None,
                       "--apply-residual-connection-post-layernorm": self.apply_residual_connection_post_layernorm,
                       "--attention-output-gate": self.attention_output_gate}
        named = [flag for flag, given in unsupported.items() if given]
        if named:
            raise ValueError(f"{named[0]} is not defined for the 'Z' layers of --hybrid-override-pattern (Zamba's "
                             "shared blocks); drop it")

    @property
    def has_shared_blocks(self) -> bool:
        """Some layer is a 'Z' layer: the model holds Zamba's shared blocks and carries the word embeddings."""
        return "Z" in (self.hybrid_override_pattern or "")

    @property
    def pipeline_hidden_width(self) -> int:
        """The last dim of what pipeline stages send: the hidden states, and beside them the word embeddings
        when the shared blocks of 'Z' layers read them."""
        return 2 * self.hidden_size if self.has_shared_blocks else self.pipeline_stream_width

    def shared_block_of(self, layer_number: int) -> int:
        """The shared block that 'Z' layer ``layer_number`` runs: its rank among the 'Z' layers mod
        --num-shared-blocks."""
        return self.shared_block_depth(layer_number) % self.num_shared_blocks

    def shared_block_depth(self, layer_number: int) -> int:
        """The rank of 'Z' layer ``layer_number`` among the 'Z' layers (0 for the first)."""
        return self.hybrid_override_pattern[:layer_number].count("Z")

    def _validate_short_conv(self) -> None:
        """The short-conv fields only with short-conv layers, and their sizes against TP."""
        if not self.has_short_conv_layers:
            self._refuse_unused(SHORT_CONV, "applies to short-conv layers; add --experimental-attention-variant "
                                            "short_conv with --linear-attention-freq, or drop it")
            return
        if self.short_conv_kernel_size < 1:
            raise ValueError(f"--short-conv-kernel-size {self.short_conv_kernel_size} must be at least 1")
        tp = self.tensor_model_parallel_size
        if self.hidden_size % tp:
            raise ValueError(f"--hidden-size ({self.hidden_size}) is not divisible by --tensor-model-parallel-size "
                             f"({tp}): TP splits the short conv's channels")

    def _validate_rg_lru(self) -> None:
        """The RG-LRU fields only with Griffin's recurrent blocks, and their width against the heads and TP."""
        if RG_LRU_MIXER not in self.layer_mixers:
            self._refuse_unused(RG_LRU, "applies to Griffin's recurrent blocks; add --experimental-attention-variant "
                                        "rg_lru with --linear-attention-freq (or 'R' letters), or drop it")
            return
        width, heads, tp = self.lru_width_or_default, self.num_attention_heads, self.tensor_model_parallel_size
        if self.lru_conv_width < 1 or width < 1:
            raise ValueError(f"--lru-width ({width}) and --lru-conv-width ({self.lru_conv_width}) must be at least 1")
        if width % heads or heads % tp:
            raise ValueError(f"--lru-width ({width}) must be a multiple of --num-attention-heads ({heads}), one gate "
                             f"block per head, and the heads divisible by --tensor-model-parallel-size ({tp})")

    def _validate_rwkv(self) -> None:
        """--rwkv-attention-size only with time-mixing layers; the RWKV widths against TP."""
        kinds = self.layer_mixers
        if RWKV_TIME_MIX not in kinds:
            self._refuse_unused(RWKV, "applies to RWKV time-mixing layers ('W' in --hybrid-override-pattern); drop it")
        tp = self.tensor_model_parallel_size
        if RWKV_TIME_MIX in kinds and self.rwkv_attention_size_or_default % tp:
            raise ValueError(f"--rwkv-attention-size ({self.rwkv_attention_size_or_default}) is not divisible by "
                             f"--tensor-model-parallel-size ({tp})")
        if RWKV_CHANNEL_MIX in kinds and (self.ffn_hidden_size % tp or self.hidden_size % tp):
            raise ValueError(f"--ffn-hidden-size ({self.ffn_hidden_size}) and --hidden-size ({self.hidden_size}) "
                             f"must be divisible by --tensor-model-parallel-size ({tp}) for RWKV channel mixing")

    @property
    def rwkv_attention_size_or_default(self) -> int:
        """RWKV-4 time mixing's width: --rwkv-attention-size, else the hidden size."""
        return self.rwkv_attention_size if self.rwkv_attention_size is not None else self.hidden_size

    @property
    def lru_width_or_default(self) -> int:
        """The RG-LRU width: --lru-width, else the hidden size."""
        return self.lru_width if self.lru_width is not None else self.hidden_size

    @property
    def linear_attention_layers(self) -> Tuple[bool, ...]:
        """Per layer, whether --linear-attention-freq makes it a layer of --experimental-attention-variant (all
        False without it)."""
        freq = self.linear_attention_freq
        if freq is None:
            return (False,) * self.num_layers
        marks = parse_layer_frequency(freq, self.num_layers, "--linear-attention-freq")
        return tuple(bool(mark) for mark in marks)

    def layer_parts(self, layer_number: int) -> Tuple[Optional[str], Optional[str]]:
        """(token mixer, MLP) of global layer ``layer_number``: a mixer of ``MAMBA_MIXER``, ``GDN_MIXER``,
        ``SHORT_CONV_MIXER``, ``ATTENTION_MIXER`` or None, an MLP of ``DENSE_MLP``, ``MOE_MLP`` or None."""
        pattern = self.hybrid_override_pattern
        if pattern is not None:
            return LETTER_PARTS[pattern[layer_number]]
        marked = self.linear_attention_layers[layer_number]
        mixer = VARIANT_MIXERS[self.experimental_attention_variant] if marked else ATTENTION_MIXER
        return mixer, MOE_MLP if self.is_moe_layer(layer_number) else DENSE_MLP

    @property
    def has_mamba_layers(self) -> bool:
        """Some layer holds a Mamba mixer ('M'; 'H' beside an attention; 'Z' after a shared block)."""
        return bool(set(self.hybrid_override_pattern or "") & {"M", "H", "Z"})

    @property
    def has_parallel_hybrid_layers(self) -> bool:
        """Some layer runs a Mamba2 and an attention side by side ('H', Falcon-H1)."""
        return "H" in (self.hybrid_override_pattern or "")

    @property
    def has_linear_attention_layers(self) -> bool:
        """Some layer is a gated DeltaNet, Kimi Delta Attention, lightning or mLSTM layer ('G', 'K', 'L', 'X', or
        marked by --linear-attention-freq): the layers the --linear-* sizes describe."""
        return bool(self.layer_mixers & set(LINEAR_MIXERS))

    @property
    def layer_mixers(self) -> frozenset:
        """The token mixers the layers hold (:meth:`layer_parts`' first part; None for a layer without one)."""
        return frozenset(self.layer_parts(i)[0] for i in range(self.num_layers))

    @property
    def has_short_conv_layers(self) -> bool:
        """Some layer is a short-conv layer (--experimental-attention-variant short_conv)."""
        return SHORT_CONV_MIXER in self.layer_mixers

    @property
    def has_softmax_attention(self) -> bool:
        """Some layer attends with softmax attention (the layers that read positions)."""
        softmax = (ATTENTION_MIXER, PARALLEL_HYBRID_MIXER, SHARED_BLOCK_MAMBA_MIXER)
        return bool(self.layer_mixers & set(softmax))

    def _validate_moe(self) -> None:
        """The router's settings against the expert count (refused without --num-experts)."""
        experts, topk = self.num_experts, self.moe_router_topk
        if experts is None:
            self._refuse_unused(MOE, "applies to MoE layers; add --num-experts or drop it")
            return
        if experts < 1 or not 1 <= topk <= experts:
            raise ValueError(f"--moe-router-topk {topk} must be between 1 and --num-experts {experts}")
        if self.moe_router_score_function not in MOE_SCORE_FUNCTIONS:
            raise ValueError(f"--moe-router-score-function {self.moe_router_score_function!r} is not one of "
                             f"{MOE_SCORE_FUNCTIONS}")
        if self.moe_router_load_balancing_type not in MOE_LOAD_BALANCING_TYPES:
            raise ValueError(f"--moe-router-load-balancing-type {self.moe_router_load_balancing_type!r} is not one "
                             f"of {MOE_LOAD_BALANCING_TYPES}")
        if self.moe_router_pre_softmax and self.moe_router_score_function != "softmax":
            raise ValueError("--moe-router-pre-softmax needs --moe-router-score-function softmax")
        if self.norm_topk_prob and self.moe_router_score_function == "softmax" and not self.moe_router_pre_softmax:
            raise ValueError("--norm-topk-prob has no effect on the top-k softmax (its weights sum to one); add "
                             "--moe-router-pre-softmax or drop it")
        if (self.moe_router_num_groups is None) != (self.moe_router_group_topk is None):
            raise ValueError("--moe-router-num-groups and --moe-router-group-topk go together; set both or none")
        if self.moe_router_num_groups is not None:
            self._validate_moe_groups()
        elif self.moe_router_group_score_topk is not None:
            raise ValueError("--moe-router-group-score-topk scores expert groups; add --moe-router-num-groups and "
                             "--moe-router-group-topk or drop it")
        if self.moe_router_dtype not in (None, "fp32", "fp64"):
            raise ValueError(f"--moe-router-dtype {self.moe_router_dtype!r} is not one of fp32, fp64")
        if self.moe_hash_layers:
            self._validate_hash_layers()
        if self.moe_router_score_function == "sparsemixer":
            self._validate_sparsemixer()
        elif self._changed(("moe_router_sparsemixer_eps",)):
            raise ValueError("--moe-router-sparsemixer-eps applies to --moe-router-score-function sparsemixer; "
                             "add it or drop the eps")
        if self.moe_router_expert_bias_on_logits and not (self.moe_router_enable_expert_bias
                                                          and self.moe_router_score_function == "sigmoid"
                                                          and self.moe_router_num_groups is None):
            raise ValueError("--moe-router-expert-bias-on-logits moves the expert bias onto the logits: it needs "
                             "--moe-router-score-function sigmoid with --moe-router-enable-expert-bias and no groups")
        if self.moe_output_norm and self.output_norm:
            raise ValueError("--moe-output-norm norms the MoE layers' outputs, which --post-norm already norms; drop one")
        if self.moe_shared_expert_scale is not None and self.moe_shared_expert_intermediate_size is None:
            raise ValueError("--moe-shared-expert-scale scales the shared expert's output: add "
                             "--moe-shared-expert-intermediate-size (or --n-shared-experts) or drop it")
        for flag, value in (("--moe-ffn-hidden-size", self.moe_ffn_hidden_size),
                            ("--moe-router-topk-scaling-factor", self.moe_router_topk_scaling_factor),
                            ("--moe-z-loss-coeff", self.moe_z_loss_coeff)):
            if value is not None and value <= 0:
                raise ValueError(f"{flag} {value} must be positive")
        if self.moe_aux_loss_coeff < 0 or self.moe_router_bias_update_rate < 0:
            raise ValueError("--moe-aux-loss-coeff and --moe-router-bias-update-rate must be 0 or more")
        self._validate_experts()

    def _validate_hash_layers(self) -> None:
        """--moe-hash-layers N: layers 0 .. N - 1 are MoE layers, routed by the token-id table."""
        hashed = self.moe_hash_layers
        if not 0 < hashed <= self.num_layers or any(self.layer_parts(i)[1] != MOE_MLP for i in range(hashed)):
            raise ValueError(f"--moe-hash-layers {hashed} must count leading MoE layers (between 1 and --num-layers "
                             f"{self.num_layers}, none of them dense: see --first-k-dense-replace/--moe-layer-freq)")
        if self.moe_router_score_function == "sparsemixer" or self.moe_expert_capacity_factor is not None:
            raise ValueError("--moe-hash-layers picks experts from a table: drop --moe-router-score-function "
                             "sparsemixer and --moe-expert-capacity-factor")

    def is_hash_routed(self, layer_number: int) -> bool:
        """Layer ``layer_number``'s MoE picks its experts by token id (--moe-hash-layers)."""
        return layer_number < self.moe_hash_layers

    def _validate_sparsemixer(self) -> None:
        """SparseMixer picks and weights by itself: the other selection and weighting options do not apply."""
        if self.moe_router_sparsemixer_eps < 0:
            raise ValueError(f"--moe-router-sparsemixer-eps {self.moe_router_sparsemixer_eps} must be 0 or more")
        for flag, on in (("--norm-topk-prob", self.norm_topk_prob),
                         ("--moe-router-num-groups", self.moe_router_num_groups is not None),
                         ("--moe-router-enable-expert-bias", self.moe_router_enable_expert_bias)):
            if on:
                raise ValueError(f"{flag} does not apply to --moe-router-score-function sparsemixer; drop it")

    def _validate_experts(self) -> None:
        """What the expert MLPs support (checked after the router, whose errors come first)."""
        if self.moe_expert_capacity_factor is not None and self.moe_expert_capacity_factor <= 0:
            raise ValueError(f"--moe-expert-capacity-factor {self.moe_expert_capacity_factor} must be positive")
        ffn, tp = self.moe_expert_ffn_hidden_size, self.tensor_model_parallel_size
        if ffn % tp != 0:
            raise ValueError(f"--moe-ffn-hidden-size ({ffn}) is not divisible by --tensor-model-parallel-size ({tp})")
        if self.mlp_function == "xielu" or self.ffn_sub_norm:
            raise ValueError("--num-experts: expert MLPs do not support --xielu or --ffn-sub-norm; drop them")
        shared = self.moe_shared_expert_intermediate_size
        if shared is not None and (shared < 1 or shared % tp != 0):
            raise ValueError(f"--moe-shared-expert-intermediate-size ({shared}) must be positive and divisible by "
                             f"--tensor-model-parallel-size ({tp})")
        if self.shared_expert_gate and shared is None:
            raise ValueError("--shared-expert-gate needs a shared expert (--moe-shared-expert-intermediate-size or "
                             "--n-shared-experts)")
        if self.moe_apply_probs_on_input and self.moe_router_topk != 1:
            raise ValueError(f"--moe-apply-probs-on-input needs --moe-router-topk 1 (got {self.moe_router_topk}): "
                             "one weight per token scales its expert's input")
        if self.moe_layer_freq < 1 or self.first_k_dense_replace < 0:
            raise ValueError("--moe-layer-freq must be at least 1 and --first-k-dense-replace 0 or more")
        self._validate_expert_parallel()

    def _validate_expert_parallel(self) -> None:
        ep, etp, tp = self.expert_model_parallel_size, self.expert_tensor_parallel_size, self.tensor_model_parallel_size
        if ep < 1 or self.num_experts % ep != 0:
            raise ValueError(f"--num-experts {self.num_experts} is not divisible by --expert-model-parallel-size {ep}")
        if etp is not None and etp not in (1, tp):
            raise ValueError(f"--expert-tensor-parallel-size {etp} must be 1 (whole experts) or "
                             f"--tensor-model-parallel-size {tp} (experts split like the dense MLP)")
        if etp == 1 and tp > 1:
            if not self.sequence_parallel:
                raise ValueError("--expert-tensor-parallel-size 1 with --tensor-model-parallel-size > 1 needs "
                                 "--sequence-parallel (each TP rank dispatches its own sequence shard)")
            expert_dimension(tp, ep, etp)  # EP a multiple of TP
        if self.moe_token_dispatcher_type not in MOE_TOKEN_DISPATCHER_TYPES:
            raise ValueError(f"--moe-token-dispatcher-type {self.moe_token_dispatcher_type!r} is not one of "
                             f"{MOE_TOKEN_DISPATCHER_TYPES}")

    def is_moe_layer(self, layer_number: int) -> bool:
        """Whether global layer ``layer_number`` (0-based) has an MoE layer instead of the dense MLP ('E' in
        --hybrid-override-pattern, else --moe-layer-freq and --first-k-dense-replace)."""
        if self.hybrid_override_pattern is not None:
            return self.hybrid_override_pattern[layer_number] == "E"
        return (self.num_experts is not None and layer_number >= self.first_k_dense_replace
                and layer_number % self.moe_layer_freq == 0)

    def _validate_moe_groups(self) -> None:
        groups, group_topk, topk = self.moe_router_num_groups, self.moe_router_group_topk, self.moe_router_topk
        if groups < 1 or self.num_experts % groups != 0:
            raise ValueError(f"--moe-router-num-groups {groups} must divide --num-experts {self.num_experts}")
        score_topk = self.moe_router_group_score_topk
        if not 1 <= group_topk <= min(groups, topk) or (score_topk is None and topk % group_topk != 0):
            raise ValueError(f"--moe-router-group-topk {group_topk} must divide --moe-router-topk {topk} (unless "
                             f"--moe-router-group-score-topk is set) and be at most --moe-router-num-groups {groups}")
        if score_topk is not None and not 1 <= score_topk <= self.num_experts // groups:
            raise ValueError(f"--moe-router-group-score-topk {score_topk} must be between 1 and the experts of a "
                             f"group ({self.num_experts // groups})")
        if topk > group_topk * (self.num_experts // groups):
            raise ValueError(f"--moe-router-topk {topk} exceeds the experts of --moe-router-group-topk "
                             f"{group_topk} groups")

    @property
    def moe_expert_ffn_hidden_size(self) -> int:
        """One expert's FFN size: --moe-ffn-hidden-size, else --ffn-hidden-size."""
        return self.moe_ffn_hidden_size if self.moe_ffn_hidden_size is not None else self.ffn_hidden_size

    def _refuse_unused(self, feature: str, why: str) -> None:
        """Refuse a field only ``feature``'s layers read, set away from its default in a model without them:
        ``{its flag} {why}``."""
        unused = self._changed(feature_fields(feature))
        if unused:
            raise ValueError(f"{unused[0]} {why}")

    def _changed(self, names: Tuple[str, ...]) -> List[str]:
        """The flags of the fields in ``names`` set away from their defaults."""
        table = self.__dataclass_fields__
        spelled = {"activation": activation_flags(self.activation), "qk_norm": qk_norm_flags(self.qk_norm)}
        return [spelled.get(name) or field_flag(name) for name in names if getattr(self, name) != table[name].default]

    def _validate_mlp_multipliers(self) -> None:
        """--mlp-multipliers: a gate scale and an output scale of the dense gated MLP."""
        scales = self.mlp_multipliers
        if not scales:
            return
        if len(scales) != 2:
            raise ValueError(f"--mlp-multipliers takes two scales (the gate's, the output's); got {len(scales)}")
        if not self.gated_linear_unit:
            raise ValueError(f"--mlp-multipliers scales a gated MLP's gate; --activation {self.activation} has none")
        if self.num_experts is not None:
            raise ValueError("--mlp-multipliers applies to the dense MLP; the MoE experts do not read it: drop it "
                             "or --num-experts")

    def _validate_mamba(self) -> None:
        tp = self.tensor_model_parallel_size
        if self.mamba_version not in (1, 2):
            raise ValueError(f"--mamba-version {self.mamba_version} is not one of (1, 2)")
        for flag, value in (("--mamba-state-dim", self.mamba_state_dim), ("--mamba-expand", self.mamba_expand),
                            ("--mamba-d-conv", self.mamba_d_conv), ("--mamba-head-dim", self.mamba_head_dim),
                            ("--mamba-num-groups", self.mamba_num_groups),
                            ("--mamba-chunk-size", self.mamba_chunk_size), ("--mamba-dt-rank", self.mamba_dt_rank),
                            ("--mamba-mixer-rms-eps", self.mamba_mixer_rms_eps),
                            ("--mamba-num-heads", self.mamba_heads)):
            if value is not None and value <= 0:
                raise ValueError(f"{flag} {value} must be positive")
        upper = self.mamba_dt_limit_max
        if self.mamba_dt_limit_min < 0 or (upper is not None and upper <= self.mamba_dt_limit_min):
            raise ValueError(f"--mamba-dt-limit-min {self.mamba_dt_limit_min} must be >= 0 and below "
                             f"--mamba-dt-limit-max {upper}")
        inner = self.mamba_d_inner
        if self.mamba_mixer_rms_weights and self.mamba_mixer_rms_eps is None:
            raise ValueError("--mamba-mixer-rms-weights gives weights to the dt/B/C norms; add --mamba-mixer-rms-eps")
        if self.mamba_version == 1:
            mamba2_only = self._changed(("mamba_rmsnorm", "mamba_norm_before_gate", "ssm_multipliers"))
            if mamba2_only:
                raise ValueError(f"{mamba2_only[0]} applies to --mamba-version 2 (Mamba1 has no gated norm or "
                                 "[z; x; B; C; dt] projection)")
            if self.mamba_heads is not None and self.mamba_heads % tp:
                raise ValueError(f"--mamba-num-heads {self.mamba_heads} (Mamba1's independent SSMs) is not "
                                 f"divisible by --tensor-model-parallel-size ({tp})")
            if self.mamba1_heads > 1 and self.mamba_mixer_rms_eps is not None:
                raise ValueError("--mamba-mixer-rms-eps (norms on dt, B and C) with a multi-head Mamba1 "
                                 "(--mamba-num-heads) is not supported: no published model has both")
            if inner % tp:
                raise ValueError(f"--mamba-expand x --hidden-size ({inner} Mamba channels) is not divisible by "
                                 f"--tensor-model-parallel-size ({tp})")
            return
        if self.mamba_mixer_rms_eps is not None or self.mamba_mixer_rms_weights:
            raise ValueError("--mamba-mixer-rms-eps/--mamba-mixer-rms-weights (norms on dt, B and C) apply to "
                             "--mamba-version 1 only")
        if self.mamba_norm_before_gate and not self.mamba_rmsnorm:
            raise ValueError("--mamba-norm-before-gate places the gated norm, which --disable-mamba-rmsnorm removes; "
                             "drop one of them")
        if self.ssm_multipliers and len(self.ssm_multipliers) != 5:
            raise ValueError(f"--ssm-multipliers takes five scales (in_proj's z, x, B, C and dt parts); got "
                             f"{len(self.ssm_multipliers)}")
        heads, groups = inner // self.mamba_head_dim, self.mamba_num_groups
        if inner % self.mamba_head_dim or heads % groups or heads % tp:
            raise ValueError(f"--mamba-expand x --hidden-size ({inner}) must be a multiple of --mamba-head-dim "
                             f"({self.mamba_head_dim}), giving heads ({heads}) divisible by --mamba-num-groups "
                             f"({groups}) and by --tensor-model-parallel-size ({tp})")
        if (groups >= tp and groups % tp) or (groups < tp and tp % groups):
            raise ValueError(f"--mamba-num-groups ({groups}) and --tensor-model-parallel-size ({tp}) must divide "
                             "one another (groups are split, or replicated when TP exceeds them)")

    def _validate_behaviour(self) -> None:
        for flag, cap in (("--attn-logit-softcapping", self.attn_logit_softcapping),
                          ("--output-logit-softcapping", self.output_logit_softcapping),
                          ("--query-pre-attn-scalar", self.query_pre_attn_scalar),
                          ("--embedding-multiplier", self.embedding_multiplier),
                          ("--residual-multiplier", self.residual_multiplier),
                          ("--softmax-scale", self.softmax_scale),
                          ("--output-multiplier-scale", self.output_multiplier_scale),
                          ("--qkv-clip", self.qkv_clip)):
            if cap is not None and cap <= 0:
                raise ValueError(f"{flag} {cap} must be positive")
        if self.cross_entropy_chunk_size is not None and self.cross_entropy_chunk_size < 0:
            raise ValueError(f"--cross-entropy-chunk-size {self.cross_entropy_chunk_size} must be 0 (materialise "
                             "the logits) or a positive number of vocabulary entries")
        if self.local_rotary_base is not None and (self.sliding_window is None or self.local_rotary_base <= 0
                                                   or self.position_embedding_type != "rope"):
            raise ValueError(f"--local-rotary-base {self.local_rotary_base} must be positive and needs "
                             "--sliding-window and --position-embedding-type rope")
        if self.non_parametric_norm and self.apply_layernorm_1p:
            raise ValueError("--non-parametric-norm has no weight for --apply-layernorm-1p to offset; drop one")
        bad_nope = [i for i in self.no_rope_layers if not 0 <= i < self.num_layers]
        if bad_nope:
            raise ValueError(f"--no-rope-layers {bad_nope} out of range [0, {self.num_layers}) of --num-layers")
        if self.softmax_scale is not None and self.query_pre_attn_scalar is not None:
            raise ValueError("--softmax-scale and --query-pre-attn-scalar both set the attention scale; choose one")
        if self.sliding_window_pattern is not None:
            if self.sliding_window is None or self.sliding_window_pattern < 1:
                raise ValueError(f"--sliding-window-pattern {self.sliding_window_pattern} needs --sliding-window "
                                 "and must be at least 1")
        self._validate_layer_shapes()
        self._validate_alibi()
        self._validate_positions()
        self._validate_absolute_positions()
        self._validate_global_layers()
        if self.qk_norm == "full_width" and self.normalization != "RMSNorm":
            raise ValueError("--qk-layernorm-full-width needs --qk-layernorm and --normalization RMSNorm")
        if not 0.0 < self.rotary_percent <= 1.0 or self.rotary_dim % 2:
            raise ValueError(f"--rotary-percent {self.rotary_percent} must be in (0, 1] and give an even number "
                             f"of rotated dims of --kv-channels {self.kv_channels}")

    def _validate_positions(self) -> None:
        """RoPE scaling, q/k norm placement and the attention temperature."""
        if self.qk_layernorm_after_rope and self.qk_norm not in PER_HEAD_QK_NORMS:
            raise ValueError("--qk-layernorm-after-rope needs --qk-layernorm (per-head norms, without "
                             "--qk-layernorm-full-width)")
        if self.rope_scaling_type == "yarn" and (self.rope_scaling_factor < 1.0
                                                 or self.rope_original_max_position_embeddings < 1):
            raise ValueError(f"--rope-scaling-type yarn needs --rope-scaling-factor >= 1 (got "
                             f"{self.rope_scaling_factor}) and a positive --original-max-position-embeddings")
        if not self.yarn_correction_range_round_to_int and self.rope_scaling_type != "yarn":
            raise ValueError("--no-yarn-correction-range-round-to-int needs --rope-scaling-type yarn")
        if self.rope_ntk_alpha is not None and (self.rope_ntk_alpha <= 0 or self.rope_scaling_type is not None
                                                or self.rotary_percent != 1.0 or self.kv_channels < 4):
            raise ValueError(f"--rope-ntk-alpha {self.rope_ntk_alpha} must be positive and excludes "
                             "--rope-scaling-type and --rotary-percent below 1")
        if (self.attn_temperature_beta is None) != (self.attn_temperature_length is None):
            raise ValueError("--attn-temperature-beta and --attn-temperature-length go together; set both or none")
        if self.attn_temperature_length is not None and (self.attn_temperature_length < 1
                                                         or self.position_embedding_type != "rope"):
            raise ValueError(f"--attn-temperature-length {self.attn_temperature_length} must be at least 1 and "
                             "needs --position-embedding-type rope")
        if self.attn_temperature_nope_layers and (self.attn_temperature_beta is None or not self.no_rope_layers):
            raise ValueError("--attn-temperature-nope-layers needs --attn-temperature-beta/--attn-temperature-length "
                             "and --no-rope-layers (the layers it scales)")
        if self.qk_norm == "l2" and self.multi_latent_attention:
            raise ValueError("--qk-l2-norm is a q/k norm of its own; drop --qk-layernorm (and it does not apply to "
                             "--multi-latent-attention)")
    def _validate_global_layers(self) -> None:
        """Full-attention layers with their own attention shape (Gemma4)."""
        own = [flag for flag, on in (("--global-kv-channels", self.global_kv_channels is not None),
                                     ("--global-num-query-groups", self.global_num_query_groups is not None),
                                     ("--global-attention-k-eq-v", self.global_attention_k_eq_v)) if on]
        if own and (self.sliding_window is None or self.local_rotary_base is None):
            raise ValueError(f"{' '.join(own)} need --sliding-window and --local-rotary-base (sliding layers keep "
                             "--kv-channels and their own RoPE table)")
        if self.global_kv_channels is not None and (self.global_kv_channels < 2 or self.global_kv_channels % 2):
            raise ValueError(f"--global-kv-channels {self.global_kv_channels} must be a positive even head dim")
        groups, tp = self.global_num_query_groups, self.tensor_model_parallel_size
        if groups is not None and (groups < 1 or self.num_attention_heads % groups
                                   or (groups >= tp and groups % tp) or (groups < tp and tp % groups)):
            raise ValueError(f"--global-num-query-groups {groups} must divide --num-attention-heads "
                             f"({self.num_attention_heads}) and divide or be divided by --tensor-model-parallel-size "
                             f"({tp})")

    def _validate_layer_shapes(self) -> None:
        """Activations, biases, residual layout and per-layer attention patterns."""
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"--activation {self.activation!r} is not one of {tuple(ACTIVATIONS)}")
        if self.qk_norm not in QK_NORMS:
            raise ValueError(f"--qk-norm {self.qk_norm!r} is not one of {QK_NORMS}")
        if not self.first_input_layernorm and not self.pre_norm:
            raise ValueError("--no-first-input-layernorm drops a norm before attention; --post-norm-only has none")
        if self.prediction_head not in (None,) + PREDICTION_HEAD_ACTIVATIONS:
            raise ValueError(f"--prediction-head {self.prediction_head!r} is not one of {PREDICTION_HEAD_ACTIVATIONS}")
        if self.prediction_head_bias and self.prediction_head is None:
            raise ValueError("--prediction-head-bias needs --prediction-head ACT")
        if self.parallel_residual_shared_norm and not self.parallel_residual:
            raise ValueError("--parallel-residual-shared-norm needs --parallel-residual")
        if self.parallel_residual and (self.apply_residual_connection_post_layernorm
                                       or self.residual_alpha is not None):
            raise ValueError("--parallel-residual adds both branches to one residual; it does not take "
                             "--apply-residual-connection-post-layernorm or --residual-alpha")
        if self.linear_attention_pre_norm and not self.post_norm_only:
            raise ValueError("--linear-attention-pre-norm keeps pre-norms in the linear-attention layers of a "
                             "--post-norm-only model; add --post-norm-only or drop it")
        if self.post_norm_only and self.apply_residual_connection_post_layernorm:
            raise ValueError("--apply-residual-connection-post-layernorm keeps the norm before each branch, which "
                             "--post-norm-only drops; drop one of them")
        if self.parallel_residual and self.post_norm_only:
            raise ValueError("--parallel-residual needs the norms before attention and MLP; drop --post-norm-only")
        if not self.layernorm_bias and (self.normalization != "LayerNorm" or self.non_parametric_norm):
            raise ValueError("--no-layernorm-bias needs --normalization LayerNorm with weights "
                             "(no --non-parametric-norm)")
        self._validate_modern_mlp_and_norms()
        if self.full_attention_layers:
            bad = [i for i in self.full_attention_layers if not 0 <= i < self.num_layers]
            if bad:
                raise ValueError(f"--full-attention-layers {bad} out of range [0, {self.num_layers}) of --num-layers")
            if (self.sliding_window is None and self.attention_chunk_size is None) \
                    or self.sliding_window_pattern is not None:
                raise ValueError("--full-attention-layers needs --sliding-window or --attention-chunk-size and "
                                 "excludes --sliding-window-pattern (two ways to say which layers attend fully)")
        self._validate_attention_variants()

    def _validate_attention_variants(self) -> None:
        chunk = self.attention_chunk_size
        if chunk is not None:
            if chunk < 1:
                raise ValueError(f"--attention-chunk-size {chunk} must be at least 1")
            if self.sliding_window is not None or self.position_embedding_type == "alibi":
                raise ValueError("--attention-chunk-size excludes --sliding-window and --position-embedding-type "
                                 "alibi; choose one way to restrict attention")
        if self.softmax_type not in SOFTMAX_TYPES:
            raise ValueError(f"--softmax-type {self.softmax_type!r} is not one of {SOFTMAX_TYPES}")
        self._validate_dense_bias_layers()

    def _validate_dense_bias_layers(self) -> None:
        if not self.dense_bias_layers:
            return
        bad = [i for i in self.dense_bias_layers if not 0 <= i < self.num_layers]
        if bad:
            raise ValueError(f"--dense-bias-layers {bad} out of range [0, {self.num_layers}) of --num-layers")
        if self.add_bias_linear or self.add_dense_bias:
            raise ValueError("--dense-bias-layers has no effect when every layer's attention output has a bias "
                             "(--add-bias-linear or --add-dense-bias); drop one")

    def _validate_dsa(self) -> None:
        """--experimental-attention-variant dsa: MLA layers, the indexer's sizes, the sharing pattern, the stages."""
        if self.linear_attention_freq is not None or self.hybrid_override_pattern is not None:
            raise ValueError("--experimental-attention-variant dsa makes every MLA layer sparse: drop "
                             "--linear-attention-freq / --hybrid-override-pattern")
        if not self.multi_latent_attention:
            raise ValueError("--experimental-attention-variant dsa attends on top of multi-latent attention: add "
                             "--multi-latent-attention (with its ranks and head dims)")
        if self.position_embedding_type != "rope":
            raise ValueError("--experimental-attention-variant dsa: the indexer rotates its queries and keys; it needs "
                             f"--position-embedding-type rope (got {self.position_embedding_type})")
        sizes = (("--dsa-indexer-n-heads", self.dsa_indexer_n_heads), ("--dsa-indexer-head-dim",
                 self.dsa_indexer_head_dim), ("--dsa-indexer-topk", self.dsa_indexer_topk))
        for flag, value in sizes:
            if value is None or value < 1:
                raise ValueError(f"--experimental-attention-variant dsa needs a positive {flag} (got {value})")
        if self.dsa_indexer_head_dim < self.qk_pos_emb_head_dim:
            raise ValueError(f"--dsa-indexer-head-dim {self.dsa_indexer_head_dim} must hold the "
                             f"{self.qk_pos_emb_head_dim} rotary dims of --qk-pos-emb-head-dim")
        if self.dsa_indexer_topk_freq < 1 or self.dsa_indexer_skip_topk_offset < 0:
            raise ValueError(f"--dsa-indexer-topk-freq ({self.dsa_indexer_topk_freq}) must be at least 1 and "
                             f"--dsa-indexer-skip-topk-offset ({self.dsa_indexer_skip_topk_offset}) at least 0")
        if self.dsa_indexer_k_norm_epsilon is not None and self.dsa_indexer_k_norm_epsilon <= 0:
            raise ValueError(f"--dsa-indexer-k-norm-epsilon {self.dsa_indexer_k_norm_epsilon} must be positive")
        for flag, on in (("--add-bias-linear", self.add_bias_linear), ("--sliding-window", self.sliding_window),
                         ("--attention-output-gate", self.attention_output_gate)):
            if on:
                raise ValueError(f"--experimental-attention-variant dsa does not support {flag}: drop it")
        self._validate_dsa_training()

    def _validate_dsa_training(self) -> None:
        """The indexer loss and the two stages."""
        coeff = self.dsa_indexer_loss_coeff
        if coeff < 0:
            raise ValueError(f"--dsa-indexer-loss-coeff {coeff} must be 0 or more")
        if coeff == 0 and (self.dsa_dense_warmup or self.dsa_indexer_use_sparse_loss):
            flag = "--dsa-dense-warmup" if self.dsa_dense_warmup else "--dsa-indexer-use-sparse-loss"
            raise ValueError(f"{flag} shapes the indexer loss, and --dsa-indexer-loss-coeff is 0: give it a "
                             "positive coefficient")
        if self.dsa_dense_warmup and self.dsa_indexer_use_sparse_loss:
            raise ValueError("--dsa-dense-warmup trains the indexer on every causal key; "
                             "--dsa-indexer-use-sparse-loss is the sparse stage's: drop one")

    def dsa_topk_source(self, layer_number: int) -> int:
        """The 0-based layer whose top-k selection layer ``layer_number`` (0-based) attends with
        (:func:`dsa_topk_source`)."""
        return dsa_topk_source(layer_number, self.dsa_indexer_topk_freq, self.dsa_indexer_skip_topk_offset)

    def computes_topk(self, layer_number: int) -> bool:
        """Layer ``layer_number`` runs a lightning indexer of its own (a DSA layer that does not share, or a CSA
        layer of --compressed-attention-pattern): the layers that add to the indexer loss."""
        if self.is_dsa:
            return self.dsa_topk_source(layer_number) == layer_number
        return (self.compressed_attention_pattern or "")[layer_number:layer_number + 1] == CSA_LETTER

    @property
    def has_lightning_indexer(self) -> bool:
        """Some layer picks its keys with a lightning indexer (DSA, or DeepSeek-V4's CSA layers)."""
        return self.is_dsa or CSA_LETTER in (self.compressed_attention_pattern or "")

    @property
    def is_dsa(self) -> bool:
        """Every MLA layer is DeepSeek Sparse Attention (--experimental-attention-variant dsa)."""
        return self.experimental_attention_variant == DSA_VARIANT

    def _validate_mla(self) -> None:
        """Multi-latent attention's ranks and head dims (--multi-latent-attention)."""
        if not self.multi_latent_attention:
            compressed = self.compressed_attention_pattern is not None  # DeepSeek-V4's queries come from a latent
            if (self.q_lora_rank is not None and not compressed) or self.kv_lora_rank is not None:
                raise ValueError("--q-lora-rank/--kv-lora-rank need --multi-latent-attention (--q-lora-rank also "
                                 "serves --compressed-attention-pattern)")
            if compressed and (self.q_lora_rank is None or self.q_lora_rank < 1):
                raise ValueError("--compressed-attention-pattern (DeepSeek-V4) reads its queries from a latent: set "
                                 "a positive --q-lora-rank")
            if self.mla_latent_norm_epsilon is not None:
                raise ValueError("--mla-latent-norm-epsilon needs --multi-latent-attention")
            return
        if self.kv_lora_rank is None or self.kv_lora_rank < 1:
            raise ValueError("--multi-latent-attention needs a positive --kv-lora-rank (the compressed kv width)")
        if self.q_lora_rank is not None and self.q_lora_rank < 1:
            raise ValueError(f"--q-lora-rank {self.q_lora_rank} must be positive (omit it for a plain q projection)")
        if self.mla_latent_norm_epsilon is not None and self.mla_latent_norm_epsilon <= 0:
            raise ValueError(f"--mla-latent-norm-epsilon {self.mla_latent_norm_epsilon} must be positive")
        if self.qk_head_dim < 1 or self.v_head_dim < 1 or self.qk_pos_emb_head_dim < 2 or self.qk_pos_emb_head_dim % 2:
            raise ValueError(f"--qk-head-dim ({self.qk_head_dim}) and --v-head-dim ({self.v_head_dim}) must be "
                             f"positive and --qk-pos-emb-head-dim ({self.qk_pos_emb_head_dim}) positive and even")
        if self.position_embedding_type not in ("rope", "none") or self.rotary_percent != 1.0:
            raise ValueError("--multi-latent-attention needs --position-embedding-type rope with --rotary-percent 1 "
                             "(--qk-pos-emb-head-dim sets the rotated dims), or none (Kimi Linear: the "
                             "--qk-pos-emb-head-dim dims of the shared key stay unrotated)")
        if self.num_query_groups != self.num_attention_heads:
            raise ValueError(f"--multi-latent-attention gives every head its own key and value: drop "
                             f"--num-query-groups {self.num_query_groups} (or set it to the head count)")
        unsupported = [flag for flag, on in (
            ("--qk-layernorm", self.qk_norm not in ("none", "l2")),
            ("--attn-sub-norm", self.attn_sub_norm), ("--value-norm", self.value_norm),
            ("--global-kv-channels", self.global_kv_channels is not None),
            ("--softmax-type", self.softmax_type != "vanilla"),
            ("--attn-logit-softcapping", self.attn_logit_softcapping is not None),
            ("--rope-scaling-type proportional", self.rope_scaling_type == "proportional"),
            ("--rope-ntk-alpha", self.rope_ntk_alpha is not None),
            ("--local-rotary-base", self.local_rotary_base is not None)) if on]
        if unsupported:
            raise ValueError(f"--multi-latent-attention does not support {', '.join(unsupported)}; drop it")

    @property
    def mla_softmax_scale(self) -> float:
        """MLA's softmax scale: --softmax-scale, else 1/sqrt(qk + rope head dims) times YaRN's
        mscale(factor, mscale_all_dim)^2 (DeepSeek) when --rope-scaling-mscale-all-dim is set."""
        if self.attention_scale is not None:
            return self.attention_scale
        scale = (self.qk_head_dim + self.qk_pos_emb_head_dim) ** -0.5
        if self.rope_scaling_type == "yarn" and self.rope_scaling_mscale_all_dim and self.rope_scaling_factor > 1:
            mscale = 0.1 * self.rope_scaling_mscale_all_dim * math.log(self.rope_scaling_factor) + 1.0
            scale *= mscale * mscale
        return scale

    def _validate_compressed_attention(self) -> None:
        """DeepSeek-V4's attention (--compressed-attention-pattern): the letters, the shared KV head, the grouped
        output projection against TP, the indexer of the CSA layers."""
        pattern = self.compressed_attention_pattern
        if pattern is None:
            self._refuse_unused(COMPRESSED, "applies to DeepSeek-V4's attention; add --compressed-attention-pattern "
                                            "or drop it")
            return
        bad = sorted(set(pattern) - set(COMPRESSED_LETTERS))
        if bad or len(pattern) != self.num_layers:
            letters = ", ".join(f"{letter} {what}" for letter, what in COMPRESSED_LETTERS.items())
            raise ValueError(f"--compressed-attention-pattern {pattern!r} needs one letter per layer "
                             f"(--num-layers {self.num_layers}) out of {letters}")
        others = [flag for flag, on in (
            ("--multi-latent-attention", self.multi_latent_attention),
            ("--experimental-attention-variant", self.experimental_attention_variant is not None),
            ("--hybrid-override-pattern", self.hybrid_override_pattern is not None),
            ("--qk-layernorm", self.qk_norm != "none"),
            ("linear biases (add --disable-bias-linear, no --add-qkv-bias)", self.qkv_bias),
            ("--softmax-type", self.softmax_type != "vanilla"), ("--attention-output-gate", self.attention_output_gate),
            ("--attn-logit-softcapping", self.attn_logit_softcapping is not None),
            ("--position-embedding-type " + self.position_embedding_type, self.position_embedding_type != "rope"))
            if on]
        if others:
            raise ValueError(f"--compressed-attention-pattern (DeepSeek-V4's attention) does not support {others[0]}; "
                             "drop it")
        idle = [field_flag(name) for name, letter in (("csa_compress_ratio", CSA_LETTER),
                                                      ("hca_compress_ratio", HCA_LETTER))
                if letter not in pattern and self._changed((name,))]
        if idle:
            raise ValueError(f"{idle[0]} sizes the entries of layers --compressed-attention-pattern {pattern!r} has "
                             "none of; drop it")
        if self.local_rotary_base is not None and SLIDING_LETTER not in pattern and not self.mtp_num_layers:
            raise ValueError(f"--local-rotary-base is the RoPE base of the sliding-window-only layers ('S'), which "
                             f"--compressed-attention-pattern {pattern!r} has none of (nor MTP layers); drop it")
        if self.num_query_groups != 1:
            raise ValueError(f"--compressed-attention-pattern shares one key/value head among all heads: set "
                             f"--num-query-groups 1 (it is {self.num_query_groups})")
        if self.sliding_window is None:
            raise ValueError("--compressed-attention-pattern: every layer attends to a --sliding-window of recent "
                             "tokens; set it")
        rope = self.rope_dims(local=False)
        if rope < 2 or rope % 2 or rope > self.kv_channels:
            raise ValueError(f"--compressed-attention-pattern rotates {rope} trailing dims of each head "
                             f"(--kv-channels {self.kv_channels} x --rotary-percent {self.rotary_percent}): they "
                             "must be positive, even and within the head")
        self._validate_output_groups()
        if min(self.csa_compress_ratio, self.hca_compress_ratio) < 1:
            raise ValueError(f"--csa-compress-ratio ({self.csa_compress_ratio}) and --hca-compress-ratio "
                             f"({self.hca_compress_ratio}) must be at least 1")
        if CSA_LETTER in pattern:
            for flag, value in (("--dsa-indexer-n-heads", self.dsa_indexer_n_heads),
                                ("--dsa-indexer-head-dim", self.dsa_indexer_head_dim),
                                ("--dsa-indexer-topk", self.dsa_indexer_topk)):
                if value is None or value < 1:
                    raise ValueError(f"--compressed-attention-pattern's CSA layers ('C') pick entries with a "
                                     f"lightning indexer: set a positive {flag}")
            if self.dsa_indexer_head_dim < rope:
                raise ValueError(f"--dsa-indexer-head-dim {self.dsa_indexer_head_dim} must hold the {rope} rotated "
                                 "dims of DeepSeek-V4's indexer")
            shared = self._changed(("dsa_indexer_topk_freq", "dsa_indexer_skip_topk_offset",
                                    "dsa_indexer_rope_interleaved", "dsa_indexer_k_norm_epsilon", "dsa_dense_warmup"))
            if shared:
                raise ValueError(f"{shared[0]} applies to DeepSeek-V3.2's sparse attention, not to the CSA layers "
                                 "of --compressed-attention-pattern; drop it")
            self._validate_dsa_training()

    def _validate_output_groups(self) -> None:
        """DeepSeek-V4's grouped output projection: --o-groups divides the heads and is split over TP."""
        groups, rank, tp = self.o_groups, self.o_lora_rank, self.tensor_model_parallel_size
        if groups is None or rank is None or groups < 1 or rank < 1:
            raise ValueError("--compressed-attention-pattern needs positive --o-groups and --o-lora-rank (the grouped "
                             "output projection)")
        if self.num_attention_heads % groups or groups % tp:
            raise ValueError(f"--o-groups {groups} must divide --num-attention-heads ({self.num_attention_heads}) "
                             f"and be divisible by --tensor-model-parallel-size ({tp}): each TP rank projects whole "
                             "groups of its heads")

    def compressed_layer_kind(self, layer_number: int) -> str:
        """The --compressed-attention-pattern letter of global layer ``layer_number``."""
        return self.compressed_attention_pattern[layer_number]

    def compress_ratio(self, layer_number: int, kind: Optional[str] = None) -> Optional[int]:
        """Tokens per compressed entry of a DeepSeek-V4 layer (None: a sliding-window-only layer); ``kind``: the
        layer's letter when it is not the pattern's (an MTP module's layer, :attr:`mtp_attention_kind`)."""
        kind = kind or self.compressed_layer_kind(layer_number)
        return {CSA_LETTER: self.csa_compress_ratio, HCA_LETTER: self.hca_compress_ratio}.get(kind)

    @property
    def mtp_attention_kind(self) -> Optional[str]:
        """The attention of an MTP module's layer when it is not the last decoder layer's: under a compressed
        pattern a sliding-window-only layer ('S'), as DeepSeek-V4's MTP layer (its compress ratio 0)."""
        return SLIDING_LETTER if self.compressed_attention_pattern is not None else None

    def _validate_mhc(self) -> None:
        """Hyper-connections: their sizes, and the residual variants and layers they cannot take."""
        if not self.enable_mhc_connections:
            self._refuse_unused(MHC, "applies to hyper-connections; add --enable-mhc-connections or drop it")
            return
        if self.mhc_num_residual_streams < 1 or self.mhc_sinkhorn_iterations < 1 or self.mhc_eps <= 0:
            raise ValueError(f"--mhc-num-residual-streams ({self.mhc_num_residual_streams}) and "
                             f"--mhc-sinkhorn-iterations ({self.mhc_sinkhorn_iterations}) must be at least 1 and "
                             f"--mhc-eps ({self.mhc_eps}) positive")
        unsupported = [flag for flag, on in (
            ("--hybrid-override-pattern", self.hybrid_override_pattern is not None),
            ("--parallel-residual", self.parallel_residual), ("--post-norm", self.output_norm or self.post_norm_only),
            ("--apply-residual-connection-post-layernorm", self.apply_residual_connection_post_layernorm),
            ("--residual-multiplier", self.residual_multiplier is not None),
            ("--layer-scalar", self.layer_scalar), ("--fp32-residual-connection", self.fp32_residual_connection),
            ("--noop-layers", bool(self.noop_layers)),
            ("--experimental-attention-variant", self.experimental_attention_variant not in (None, DSA_VARIANT)))
            if on]
        if unsupported:
            raise ValueError(f"--enable-mhc-connections does not support {unsupported[0]}; drop it")

    @property
    def pipeline_stream_width(self) -> int:
        """The last dim of the residual stream between layers: the hidden size, times the streams under mHC."""
        return self.hidden_size * (self.mhc_num_residual_streams if self.enable_mhc_connections else 1)

    def _validate_mtp(self) -> None:
        """Multi-token prediction: D >= 1, a non-negative scale, and only the embeddings it can roll."""
        if self.mtp_num_layers is None:
            return
        if self.mtp_num_layers < 1:
            raise ValueError(f"--mtp-num-layers {self.mtp_num_layers} must be at least 1 (omit it for no MTP)")
        if self.mtp_loss_scaling_factor < 0:
            raise ValueError(f"--mtp-loss-scaling-factor {self.mtp_loss_scaling_factor} must be 0 or more")
        unsupported = [flag for flag, on in (
            ("--position-embedding-type " + self.position_embedding_type,
             self.position_embedding_type in ("learned_absolute", "sinusoidal")),
            ("--embed-layernorm", self.embed_layernorm),
            ("--hybrid-override-pattern", self.hybrid_override_pattern is not None),
            ("--fp32-residual-connection", self.fp32_residual_connection)) if on]
        if unsupported:
            raise ValueError(f"--mtp-num-layers does not support {', '.join(unsupported)}; drop it")

    @property
    def has_attention_layers(self) -> bool:
        """Some layer has softmax attention or an MLP (the layers the attention and MLP fields apply to)."""
        pattern = self.hybrid_override_pattern
        return pattern is None or bool(set(pattern) & {"*", "H", "Z", "-", "E"})

    @property
    def residual_dtype(self) -> torch.dtype:
        """The dtype of the hidden states between layers and pipeline stages (``--fp32-residual-connection``)."""
        return torch.float32 if self.fp32_residual_connection else self.params_dtype

    def is_mamba_layer(self, layer_number: int) -> bool:
        """Global layer ``layer_number`` is a Mamba layer (``--hybrid-override-pattern`` 'M')."""
        return self.layer_parts(layer_number)[0] == MAMBA_MIXER

    @property
    def mamba_d_inner(self) -> int:
        """The Mamba mixer's inner channels: --mamba-num-heads x head dim when given, else expand x hidden."""
        if self.mamba_heads is not None:
            return self.mamba_heads * self.mamba_head_dim
        return self.mamba_expand * self.hidden_size

    @property
    def mamba_num_heads(self) -> int:
        """Mamba2's heads: d_inner / head_dim."""
        return self.mamba_d_inner // self.mamba_head_dim

    @property
    def mamba1_heads(self) -> int:
        """Mamba1's independent SSMs (Zamba's ``n_mamba_heads``): --mamba-num-heads, else one over d_inner."""
        return self.mamba_heads if self.mamba_version == 1 and self.mamba_heads is not None else 1

    @property
    def mamba_dt_rank_or_default(self) -> int:
        """Mamba1's dt rank; ``None`` means ceil(hidden / 16), as Mamba's 'auto'."""
        return self.mamba_dt_rank if self.mamba_dt_rank is not None else math.ceil(self.hidden_size / 16)

    def _validate_alibi(self) -> None:
        """ALiBi's bias size only with ALiBi."""
        if self.position_embedding_type != "alibi":
            if self.alibi_bias_max != 8.0:
                raise ValueError(f"--alibi-bias-max {self.alibi_bias_max} needs --position-embedding-type alibi")
            return
        if self.alibi_bias_max <= 0:
            raise ValueError(f"--alibi-bias-max {self.alibi_bias_max} must be positive")

    def _validate_modern_mlp_and_norms(self) -> None:
        """xIELU, the gated-MLP switch and sub-norms."""
        self._validate_glu_variants()
        if self.recompute_activation_function and self.mlp_function == "xielu":
            raise ValueError("--recompute-activation-function cannot recompute --xielu (it has learnable "
                             "parameters); drop one of them")
        if (self.attn_sub_norm or self.ffn_sub_norm) and (self.normalization != "RMSNorm" or self.non_parametric_norm):
            raise ValueError("--attn-sub-norm/--ffn-sub-norm need --normalization RMSNorm with weights "
                             "(no --non-parametric-norm)")

    def _validate_qk_clip(self) -> None:
        """--qk-clip's settings, and the attention kinds it rescales: plain and MLA attention whose logits are
        bilinear in the query and key projections."""
        if (self.qk_clip_threshold, self.qk_clip_alpha) != (100.0, 0.5) and not self.qk_clip:
            raise ValueError("--qk-clip-threshold/--qk-clip-alpha shape --qk-clip's rescaling: add --qk-clip or "
                             "drop them")
        if not self.qk_clip:
            return
        if self.qk_clip_threshold <= 0 or not 0.0 <= self.qk_clip_alpha <= 1.0:
            raise ValueError("--qk-clip-threshold must be positive and --qk-clip-alpha within [0, 1]")
        reasons = [(self.qk_norm not in (None, "none"),
                    f"--qk-norm {self.qk_norm} normalises the queries and keys, so scaling their projections does not "
                    "change the logits"),
                   (self.qkv_clip is not None, "--qkv-clip clamps the projections"),
                   (self.is_dsa or bool(self.compressed_attention_pattern),
                    "sparse and compressed attention's logits are not recorded"),
                   (SHARED_BLOCK_MAMBA_MIXER in self.layer_mixers, "Zamba's shared blocks add per-layer adapters "
                                                                   "to the projections"),
                   (any(self.layer_k_eq_v(layer) for layer in range(self.num_layers)),
                    "the keys are the values' projection")]
        for refused, why in reasons:
            if refused:
                raise ValueError(f"--qk-clip: {why}; drop --qk-clip")

    def _validate_fp8(self) -> None:
        """--fp8-format and --fp8-recipe together, over bf16/fp32 weights; the bf16 layer counts only with
        --first-last-layers-bf16 and within the model."""
        if (self.fp8_format is None) != (self.fp8_recipe is None):
            given, missing = (("--fp8-format", "--fp8-recipe") if self.fp8_format is not None
                              else ("--fp8-recipe", "--fp8-format"))
            raise ValueError(f"{given} needs {missing} (e.g. --fp8-format e4m3 --fp8-recipe tensorwise)")
        counts_given = (self.num_layers_at_start_in_bf16, self.num_layers_at_end_in_bf16) != (1, 1)
        if counts_given and not self.first_last_layers_bf16:
            raise ValueError("--num-layers-at-start-in-bf16/--num-layers-at-end-in-bf16 count the layers "
                             "--first-last-layers-bf16 keeps in high precision: add it or drop them")
        if self.fp4_recipe != "nvfp4" and self.fp4_format is None:
            raise ValueError(f"--fp4-recipe {self.fp4_recipe} scales FP4 linears: add --fp4-format e2m1 or drop it")
        if self.fp4_format is not None and self.fp8_format is not None:
            raise ValueError("--fp4-format and --fp8-format each quantise the same linears: keep one")
        if self.fp4_format is not None and self.params_dtype == torch.float16:
            raise ValueError("--fp4-format runs over bf16 or fp32 weights: drop --fp16 (use --bf16)")
        if self.first_last_layers_bf16 and self.fp8_format is None and self.fp4_format is None:
            raise ValueError("--first-last-layers-bf16 keeps layers out of FP8/FP4: add --fp8-format and "
                             "--fp8-recipe (or --fp4-format)")
        if self.fp8_gemm != AUTO and self.fp8_format is None:
            raise ValueError(f"--fp8-gemm {self.fp8_gemm} picks the FP8 linears' GEMMs; this run has no FP8 recipe: "
                             "drop it or add --fp8-format and --fp8-recipe")
        delayed_flags = [flag for flag, given in (
            ("--fp8-amax-history-len", self.fp8_amax_history_len != 1),
            ("--fp8-amax-compute-algo", self.fp8_amax_compute_algo != "most_recent"),
            ("--fp8-margin", self.fp8_margin != 0)) if given]
        if delayed_flags and self.fp8_recipe != "delayed":
            raise ValueError(f"{', '.join(delayed_flags)} shape(s) --fp8-recipe delayed's scales; this run's recipe "
                             f"is {self.fp8_recipe or 'none (no FP8)'}: drop them or use --fp8-recipe delayed")
        if self.fp8_format is None:
            return
        if self.fp8_amax_history_len < 1 or self.fp8_margin < 0:
            raise ValueError("--fp8-amax-history-len must be at least 1 and --fp8-margin at least 0")
        if self.params_dtype == torch.float16:
            raise ValueError("--fp8-format runs over bf16 or fp32 weights: drop --fp16 (use --bf16)")
        if self.fp8_format == "hif8" and self.fp8_recipe not in ("tensorwise", "delayed"):
            raise ValueError(f"--fp8-format hif8 scales per tensor (--fp8-recipe tensorwise or delayed), not "
                             f"{self.fp8_recipe}")
        if min(self.num_layers_at_start_in_bf16, self.num_layers_at_end_in_bf16) < 0:
            raise ValueError("--num-layers-at-start-in-bf16/--num-layers-at-end-in-bf16 must be at least 0")
        if self.fp8_gemm != AUTO:  # a backend that cannot serve the recipe is refused (the device: at build)
            Fp8Recipe(self.fp8_format, self.fp8_recipe, gemm=self.fp8_gemm)

    def _validate_swap_attention(self) -> None:
        from core.transformer.swap_attention import check_swap_modules

        check_swap_modules(tuple(self.swap_modules))
        if not self.swap_attention:
            return
        if self.hybrid_override_pattern and set(self.hybrid_override_pattern) == {"M"}:
            raise ValueError("--swap-attention offloads transformer layers' activations and "
                             "--hybrid-override-pattern has only Mamba layers; drop --swap-attention")
        absent = [name for name in self.swap_modules if name.startswith("post_") and name != "post_attention_norm"
                  and not self.output_norm]
        if absent:
            raise ValueError(f"--swap-modules {absent[0]}: the layer has no such norm without --post-norm or "
                             "--post-norm-only; drop it from --swap-modules")

    def _validate_glu_variants(self) -> None:
        """--activation-func-clamp-value and --glu-linear-offset (GPT-OSS's clamped SwiGLU) on a gated MLP."""
        clamp = self.activation_func_clamp_value
        if clamp is not None and clamp <= 0:
            raise ValueError(f"--activation-func-clamp-value {clamp} must be positive")
        if (clamp is not None or self.glu_linear_offset != 0.0) and not self.gated_linear_unit:
            raise ValueError("--activation-func-clamp-value/--glu-linear-offset act on a gated MLP; add --swiglu, "
                             "--geglu, --quick-geglu or --gated-mlp")

    def _validate_absolute_positions(self) -> None:
        """Absolute position tables (learned, sinusoidal), and no RoPE setting with a position type
        that replaces RoPE (it would be ignored)."""
        kind = self.position_embedding_type
        absolute = kind in ("learned_absolute", "sinusoidal")
        if self.position_embedding_offset < 0 or (self.position_embedding_offset and not absolute):
            raise ValueError(f"--position-embedding-offset {self.position_embedding_offset} must be 0 or more and "
                             "needs --position-embedding-type learned_absolute or sinusoidal")
        rope = [flag for flag, on in (
            ("--rope-scaling-type", self.rope_scaling_type is not None),
            ("--rotary-base", self.rotary_base != 10000.0), ("--rotary-percent", self.rotary_percent != 1.0),
            ("--rope-interleaved", self.rope_interleaved), ("--local-rotary-base", self.local_rotary_base is not None),
            ("--no-rope-layers", bool(self.no_rope_layers))) if on]
        if rope and (absolute or kind == "alibi"):
            raise ValueError(f"--position-embedding-type {kind} has no rotary embedding for {', '.join(rope)}; "
                             "drop them or use --position-embedding-type rope")
        if self.sinusoidal_t2t_frequencies and kind != "sinusoidal":
            raise ValueError("--sinusoidal-t2t-frequencies sets the sinusoidal table's frequencies: it needs "
                             "--position-embedding-type sinusoidal")
        if self.position_embedding_type == "sinusoidal" and self.hidden_size < 4:
            raise ValueError(f"--position-embedding-type sinusoidal needs --hidden-size of 4 or more, "
                             f"got {self.hidden_size}")

    @property
    def gated_linear_unit(self) -> bool:
        """The MLP's first linear is fused ``[gate; up]`` (a gated ``--activation``: SwiGLU, GeGLU, ...)."""
        return ACTIVATIONS[self.activation][1]

    @property
    def mlp_function(self) -> str:
        """The MLP's elementwise function (gelu, gelu_tanh, relu, squared_relu, silu, quick_gelu, xielu)."""
        return ACTIVATIONS[self.activation][0]

    def layer_norms(self, layer_number: int) -> Tuple[bool, bool]:
        """(norms before the branches, norms on their outputs) of global layer ``layer_number``: the model's
        (:attr:`pre_norm`, :attr:`output_norm`), but pre-norms only in linear-attention layers under
        --linear-attention-pre-norm (OLMo-Hybrid)."""
        if self.linear_attention_pre_norm and self.layer_parts(layer_number)[0] in LINEAR_MIXERS:
            return True, False
        return self.pre_norm, self.output_norm

    @property
    def pre_norm(self) -> bool:
        """Norms before attention and MLP (all families but the post-norm-only ones)."""
        return not self.post_norm_only

    @property
    def output_norm(self) -> bool:
        """Norms on the attention and MLP outputs before the residual add (sandwich or post-only)."""
        return self.post_norm or self.post_norm_only

    @property
    def rotary_dim(self) -> int:
        """How many leading dims of each head RoPE rotates (proportional RoPE: the whole head, some angles 0)."""
        return self.rope_dims(local=True)

    def rope_dims(self, local: bool) -> int:
        """The RoPE table's dims of sliding-window layers (``local``) or of the others (their head dim)."""
        if self.multi_latent_attention:  # only the rope part of q and k rotates
            return self.qk_pos_emb_head_dim
        head = self.kv_channels if local or self.global_kv_channels is None else self.global_kv_channels
        return head if self.rope_scaling_type == "proportional" else int(head * self.rotary_percent)

    def layer_kv_channels(self, layer_number: int) -> int:
        """The head dim of global layer ``layer_number`` (``--global-kv-channels`` on full-attention layers)."""
        if self.global_kv_channels is not None and self.layer_window(layer_number) is None:
            return self.global_kv_channels
        return self.kv_channels

    def layer_query_groups(self, layer_number: int) -> int:
        """The KV heads of global layer ``layer_number`` (``--global-num-query-groups`` on full-attention layers)."""
        if self.global_num_query_groups is not None and self.layer_window(layer_number) is None:
            return self.global_num_query_groups
        return self.num_key_value_heads

    def layer_k_eq_v(self, layer_number: int) -> bool:
        """Global layer ``layer_number``'s values are its keys' projection (``--global-attention-k-eq-v``)."""
        return self.global_attention_k_eq_v and self.layer_window(layer_number) is None

    @property
    def attention_scale(self) -> Optional[float]:
        """The attention softmax scale; None means ``1 / sqrt(head_dim)``."""
        if self.softmax_scale is not None:
            return self.softmax_scale
        return None if self.query_pre_attn_scalar is None else self.query_pre_attn_scalar ** -0.5

    @property
    def qkv_bias(self) -> bool:
        """The q/k/v projections have biases (``--add-bias-linear`` or ``--add-qkv-bias``)."""
        return self.add_bias_linear or self.add_qkv_bias

    @property
    def router_bias(self) -> bool:
        """The MoE router's linear has a bias (``--add-bias-linear`` or ``--add-router-bias``)."""
        return self.add_bias_linear or self.add_router_bias

    @property
    def mlp_bias(self) -> bool:
        """The MLP linears have biases (``--add-bias-linear`` or ``--add-mlp-bias``)."""
        return self.add_bias_linear or self.add_mlp_bias

    def dense_bias(self, layer_number: int) -> bool:
        """Global layer ``layer_number``'s attention output projection has a bias (``--add-bias-linear``,
        ``--add-dense-bias`` or ``--dense-bias-layers``)."""
        return self.add_bias_linear or self.add_dense_bias or layer_number in self.dense_bias_layers

    def layer_chunk(self, layer_number: int) -> Optional[int]:
        """The attention chunk of global layer ``layer_number`` (None: not chunked)."""
        return None if layer_number in self.full_attention_layers else self.attention_chunk_size

    def layer_window(self, layer_number: int) -> Optional[int]:
        """The sliding window of global layer ``layer_number`` (None: full causal attention)."""
        if self.full_attention_layers:
            return None if layer_number in self.full_attention_layers else self.sliding_window
        pattern = self.sliding_window_pattern
        if pattern is not None and (layer_number + 1) % pattern == 0:
            return None
        return self.sliding_window

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
        result["no_rope_layers"] = list(self.no_rope_layers)
        result["full_attention_layers"] = list(self.full_attention_layers)
        result["dense_bias_layers"] = list(self.dense_bias_layers)
        return result

    @classmethod
    def from_dict(cls, values: Dict[str, Any]) -> "TransformerConfig":
        """From :meth:`to_dict`'s plain values, today's or an older checkpoint's (legacy fields mapped in)."""
        values = upgrade_legacy_settings(values)
        known = {f.name for f in fields(cls)}
        kwargs = {k: v for k, v in values.items() if k in known}
        if isinstance(kwargs.get("params_dtype"), str):
            kwargs["params_dtype"] = getattr(torch, kwargs["params_dtype"])
        kwargs["noop_layers"] = tuple(kwargs.get("noop_layers", ()))
        kwargs["no_rope_layers"] = tuple(kwargs.get("no_rope_layers", ()))
        kwargs["full_attention_layers"] = tuple(kwargs.get("full_attention_layers", ()))
        kwargs["dense_bias_layers"] = tuple(kwargs.get("dense_bias_layers", ()))
        return cls(**kwargs)


# TransformerConfig fields that are run-time choices (numerics, parallel layout, memory), not architecture: the
# fields of RuntimeConfig. Every other field is part of what the weights mean and is stored with them.
RUNTIME_CONFIG_FIELDS = frozenset(runtime_fields())


def architecture_settings(transformer_config: Dict[str, Any]) -> Dict[str, Any]:
    """The architecture fields of a stored ``transformer_config`` dict (all but ``RUNTIME_CONFIG_FIELDS``), an older
    checkpoint's legacy fields mapped to today's."""
    settings = upgrade_legacy_settings(transformer_config)
    return {name: value for name, value in settings.items() if name not in RUNTIME_CONFIG_FIELDS}
