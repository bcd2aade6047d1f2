"""Checks our ``--save-model-type megatron`` files against megatron-core itself (a manual check, not a test).

A tiny random HF model is converted by ``tools/convert_ckpt.py`` to Megatron-LM's layout at the run's TP / EP
size; megatron-core builds the same model from its own layer specs, loads each rank's file strictly (no missing
or unexpected key) and its logits are compared with transformers'. Two models:

* ``moe``: Qwen3-MoE (a dense layer then MoE layers, q/k norms, top-2 of 4 experts renormalised), with the local
  spec; experts as SequentialMLP, or with ``--grouped`` as the legacy GroupedMLP (``weight1`` / ``weight2``);
* ``gdn``: Qwen3.5 text (gated DeltaNet and gated attention layers, zero-centred norms), with megatron-core's
  experimental-attention-variant specs and Transformer Engine names;
* ``mla``: DeepSeek-V3 (multi-latent attention with q/kv latents and YaRN, a dense layer then MoE layers of a
  sigmoid router with the expert bias, expert groups and a scaling factor, a shared expert, one MTP module),
  with the local spec (down projections split over TP) and megatron-core 0.16's MTP layer name.

    pip install megatron-core==0.16.1 flash-linear-attention fla-core einops triton   # a separate venv
    python scripts/megatron_core_parity.py moe
    torchrun --nproc-per-node 2 scripts/megatron_core_parity.py moe --ep   # EP 2 (TP 2 without --ep)
    torchrun --nproc-per-node 2 scripts/megatron_core_parity.py gdn        # TP 2
    torchrun --nproc-per-node 2 scripts/megatron_core_parity.py mla        # TP 2 (--ep: EP 2)

It prints one line per rank: ``... max abs diff X``. Measured on the CPU with megatron-core 0.16.1: 6.9e-7
(moe at TP 1, EP 2, both expert layouts), 7.7e-7 (moe TP 2), 1.3e-6 / 1.4e-6 (gdn TP 1 / TP 2).

megatron-core runs here on the CPU, with gloo, without Transformer Engine, apex or grouped_gemm; what that needs
is patched in :func:`run_megatron_on_the_cpu` and nowhere else: the CUDA device and RNG tracker, names 0.16.1
leaves undefined or stubbed without TE, grouped_gemm's ``gmm`` (a loop over experts), fla's Triton L2 norm (its formula),
and TE's modules the gdn and mla specs ask for: ``TENorm`` with ``zero_centered_gamma``,
``TELayerNormColumnParallelLinear`` (that norm, then a ColumnParallelLinear), with TE's parameter names, and
MLA's core attention (:class:`CausalCoreAttention`, TE's DotProductAttention with narrower value heads).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import types
from typing import Any, Dict, Tuple

import torch
import torch.distributed as dist
import torch.nn.functional as F
import transformers

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

VOCAB = 101
MOE_HF = dict(hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4, head_dim=16,
              num_hidden_layers=2, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
              norm_topk_prob=True, vocab_size=VOCAB, mlp_only_layers=[0])
MLA_HF = dict(hidden_size=64, intermediate_size=96, moe_intermediate_size=32, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=4, n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=4, n_group=4,
              topk_group=2, first_k_dense_replace=1, q_lora_rank=20, kv_lora_rank=24, qk_nope_head_dim=12,
              qk_rope_head_dim=8, v_head_dim=10, vocab_size=VOCAB, num_nextn_predict_layers=1,
              routed_scaling_factor=2.5, max_position_embeddings=256,
              rope_parameters={"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
                               "original_max_position_embeddings": 64, "mscale": 0.8, "mscale_all_dim": 0.9,
                               "beta_fast": 32.0, "beta_slow": 1.0})
GDN_HF = dict(hidden_size=64, intermediate_size=96, num_attention_heads=8, num_key_value_heads=4, head_dim=16,
              linear_conv_kernel_dim=4, linear_key_head_dim=16, linear_value_head_dim=8, linear_num_key_heads=4,
              linear_num_value_heads=8, vocab_size=VOCAB, num_hidden_layers=4,
              layer_types=["linear_attention", "full_attention", "linear_attention", "linear_attention"],
              rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25,
                               "mrope_section": [1, 1, 0], "mrope_interleaved": True})


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, zero_centred: bool) -> torch.Tensor:
    y = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)
    return (y * ((1 + weight.float()) if zero_centred else weight.float())).to(x.dtype)


def run_megatron_on_the_cpu() -> None:
    """The patches megatron-core 0.16.1 needs to build and run these models on the CPU (see the docstring)."""
    torch.cuda.current_device = lambda: "cpu"
    from megatron.core import tensor_parallel
    from megatron.core.models.backends import LocalSpecProvider
    from megatron.core.tensor_parallel import ColumnParallelLinear
    import megatron.core.models.gpt.experimental_attention_variant_module_specs as variant_specs
    import megatron.core.models.gpt.gpt_layer_specs as gpt_layer_specs
    import megatron.core.ssm.gated_delta_net as gated_delta_net
    import megatron.core.transformer.moe.experts as experts
    import megatron.core.transformer.moe.grouped_gemm_util as grouped_gemm
    import megatron.core.transformer.moe.moe_utils as moe_utils

    tensor_parallel.get_cuda_rng_tracker().fork = lambda *args, **kwargs: contextlib.nullcontext()
    moe_utils.te_general_gemm = None
    import megatron.core.transformer.multi_latent_attention as multi_latent_attention

    for name in dir(multi_latent_attention):  # TE classes it tests isinstance against are stubs without TE
        if name.startswith("TE") and not isinstance(getattr(multi_latent_attention, name), type):
            setattr(multi_latent_attention, name, type(name, (), {}))

    def gmm(a: torch.Tensor, b: torch.Tensor, batch_sizes: torch.Tensor, trans_b: bool = False) -> torch.Tensor:
        out, start = [], 0  # rows of expert e times b[e]
        for e, count in enumerate(batch_sizes.tolist()):
            out.append(a[start:start + count] @ (b[e].t() if trans_b else b[e]))
            start += count
        return torch.cat(out)

    grouped_gemm.assert_grouped_gemm_is_available = lambda: None
    grouped_gemm.ops = types.SimpleNamespace(gmm=gmm)
    experts.gg = grouped_gemm
    gated_delta_net.l2norm = lambda x: x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6)  # fla's, eps 1e-6

    class ZeroCentredRMSNorm(torch.nn.Module):  # TENorm
        def __init__(self, config: Any, hidden_size: int, eps: float = 1e-5, **_: Any) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(hidden_size))
            self.eps, self.zero_centred = eps, config.layernorm_zero_centered_gamma

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return rms_norm(x, self.weight, self.eps, self.zero_centred)

    class NormColumnParallelLinear(ColumnParallelLinear):  # TELayerNormColumnParallelLinear
        def __init__(self, input_size: int, output_size: int, *, config: Any, tp_comm_buffer_name: Any = None,
                     **kwargs: Any) -> None:
            kwargs.pop("name", None)
            super().__init__(input_size, output_size, config=config, **kwargs)
            self.layer_norm_weight = torch.nn.Parameter(torch.zeros(input_size))
            self.norm_eps, self.zero_centred = config.layernorm_epsilon, config.layernorm_zero_centered_gamma

        def forward(self, x: torch.Tensor, *args: Any, **kwargs: Any):
            return super().forward(rms_norm(x, self.layer_norm_weight, self.norm_eps, self.zero_centred),
                                   *args, **kwargs)

    class StandInTE(LocalSpecProvider):
        def fuse_layernorm_and_linear(self) -> bool:
            return True

        def column_parallel_layer_norm_linear(self) -> type:
            return NormColumnParallelLinear

        def layer_norm(self, rms_norm: bool = False, for_qk: bool = False) -> type:
            return ZeroCentredRMSNorm

    variant_specs._get_backend_spec_provider = lambda config: StandInTE()
    gpt_layer_specs.TESpecProvider = StandInTE


class CausalCoreAttention(torch.nn.Module):
    """Stands in for TEDotProductAttention under MLA: causal softmax attention of ``[s, b, heads, d]`` queries
    and keys and ``[s, b, heads, dv]`` values at megatron-core's softmax scale, fp32."""

    def __init__(self, config: Any, layer_number: int, attn_mask_type: Any, attention_type: str = "self",
                 softmax_scale: Any = None, k_channels: Any = None, v_channels: Any = None, **_: Any) -> None:
        super().__init__()
        self.softmax_scale = softmax_scale if softmax_scale is not None else (k_channels or 1) ** -0.5

    def forward(self, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attention_mask: Any,
                **_: Any) -> torch.Tensor:
        s = query.size(0)
        scores = torch.einsum("sbhd,tbhd->bhst", query.float(), key.float()) * self.softmax_scale
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool).triu(1), float("-inf"))
        out = torch.einsum("bhst,tbhd->sbhd", scores.softmax(-1), value.float())
        return out.reshape(s, out.size(1), -1).to(query.dtype)  # [s, b, heads * dv]


def hf_model(kind: str) -> transformers.PreTrainedModel:
    classes = {"moe": ("Qwen3MoeConfig", "Qwen3MoeForCausalLM", MOE_HF),
               "gdn": ("Qwen3_5TextConfig", "Qwen3_5ForCausalLM", GDN_HF),
               "mla": ("DeepseekV3Config", "DeepseekV3ForCausalLM", MLA_HF)}
    config_class, model_class, values = classes[kind]
    torch.manual_seed(0)
    model = getattr(transformers, model_class)(getattr(transformers, config_class)(**values, dtype="float32")).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def add_mtp_tensors(hf_dir: str) -> None:
    """transformers saves no MTP module: write one (random, DeepSeek-V3's layout) beside the model's tensors,
    its transformer layer a copy of the last decoder layer's."""
    from safetensors.torch import load_file, save_file

    path = os.path.join(hf_dir, "model.safetensors")
    tensors, layers = load_file(path), MLA_HF["num_hidden_layers"]
    mtp, generator = f"model.layers.{layers}.", torch.Generator().manual_seed(3)
    for name, tensor in list(tensors.items()):
        if name.startswith(f"model.layers.{layers - 1}."):
            tensors[mtp + name[len(f"model.layers.{layers - 1}."):]] = tensor.clone()
    for name, shape in (("enorm.weight", (64,)), ("hnorm.weight", (64,)), ("eh_proj.weight", (64, 128)),
                        ("shared_head.norm.weight", (64,))):
        tensors[mtp + name] = 1 + 0.1 * torch.randn(shape, generator=generator) if "norm" in name \
            else 0.05 * torch.randn(shape, generator=generator)
    tensors[mtp + "embed_tokens.weight"] = tensors["model.embed_tokens.weight"].clone()
    tensors[mtp + "shared_head.head.weight"] = tensors["lm_head.weight"].clone()
    save_file(tensors, path, metadata={"format": "pt"})


def megatron_model(kind: str, args: argparse.Namespace, tp: int, ep: int, grouped: bool) -> torch.nn.Module:
    """megatron-core's GPTModel of the converted checkpoint's ``args``, built from its own specs."""
    from megatron.core.models.gpt import GPTModel
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_decoder_block_spec
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_mtp_block_spec
    from megatron.core.transformer.transformer_config import MLATransformerConfig, TransformerConfig
    import megatron.core.models.gpt.experimental_attention_variant_module_specs as variant_specs

    common = dict(num_layers=args.num_layers, hidden_size=args.hidden_size, num_attention_heads=args.num_attention_heads,
                  num_query_groups=args.num_query_groups, kv_channels=args.kv_channels,
                  ffn_hidden_size=args.ffn_hidden_size, normalization="RMSNorm", layernorm_epsilon=1e-6,
                  gated_linear_unit=True, activation_func=F.silu, add_bias_linear=False, qk_layernorm=True,
                  use_cpu_initialization=True, params_dtype=torch.float32, hidden_dropout=0.0,
                  attention_dropout=0.0, tensor_model_parallel_size=tp, expert_model_parallel_size=ep)
    mtp_spec = None
    if kind == "mla":
        for key in ("kv_channels", "num_query_groups", "qk_layernorm"):
            common.pop(key)
        config = MLATransformerConfig(
            **common, qk_layernorm=args.qk_layernorm, multi_latent_attention=True,
            **{key: getattr(args, key) for key in ("q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim",
                                                   "v_head_dim", "rope_type", "rotary_scaling_factor", "mscale",
                                                   "mscale_all_dim", "original_max_position_embeddings", "beta_fast",
                                                   "beta_slow", "rotary_base", "num_experts", "moe_router_topk",
                                                   "moe_ffn_hidden_size", "moe_router_score_function",
                                                   "moe_router_enable_expert_bias", "moe_router_num_groups",
                                                   "moe_router_group_topk", "moe_router_topk_scaling_factor",
                                                   "moe_shared_expert_intermediate_size", "moe_layer_freq",
                                                   "mtp_num_layers") if key != "num_experts"},
            num_moe_experts=args.num_experts, moe_token_dispatcher_type="allgather",
            moe_router_load_balancing_type="none", moe_aux_loss_coeff=0.0)
        spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False, normalization="RMSNorm")
        for layer_spec in spec.layer_specs:  # MLA's core attention is TE's (value heads narrower than keys)
            layer_spec.submodules.self_attention.submodules.core_attention = CausalCoreAttention
        mtp_spec = get_gpt_mtp_block_spec(config, spec.layer_specs[-1], use_transformer_engine=False)
        rotary = {}
    elif kind == "moe":
        config = TransformerConfig(**common, num_moe_experts=args.num_experts, moe_router_topk=args.moe_router_topk,
                                   moe_ffn_hidden_size=args.moe_ffn_hidden_size,
                                   moe_router_pre_softmax=args.moe_router_pre_softmax,
                                   moe_layer_freq=args.moe_layer_freq, moe_token_dispatcher_type="allgather",
                                   moe_grouped_gemm=grouped, moe_use_legacy_grouped_gemm=grouped,
                                   moe_router_load_balancing_type="none", moe_aux_loss_coeff=0.0)
        spec = get_gpt_decoder_block_spec(config, use_transformer_engine=False, normalization="RMSNorm")
        rotary = dict(rotary_base=args.rotary_base)
    else:
        config = TransformerConfig(**common, layernorm_zero_centered_gamma=args.apply_layernorm_1p,
                                   attention_output_gate=args.attention_output_gate,
                                   experimental_attention_variant=args.experimental_attention_variant,
                                   linear_attention_freq=args.linear_attention_freq,
                                   **{key: getattr(args, key) for key in (
                                       "linear_conv_kernel_dim", "linear_key_head_dim", "linear_value_head_dim",
                                       "linear_num_key_heads", "linear_num_value_heads")},
                                   deterministic_mode=True)
        spec = variant_specs.get_transformer_block_with_experimental_attention_variant_spec(config)
        rotary = dict(rotary_base=args.rotary_base, rotary_percent=args.rotary_percent)
    model = GPTModel(config, spec, vocab_size=args.padded_vocab_size, max_sequence_length=256,
                     position_embedding_type="rope", share_embeddings_and_output_weights=False,
                     mtp_block_spec=mtp_spec, **rotary)
    config.bf16 = True  # the legacy GroupedMLP's forward asserts it; the parameters stay fp32
    return model.eval()


def convert_on_rank_zero(kind: str, hf: transformers.PreTrainedModel, tp: int, ep: int, grouped: bool) -> str:
    root = os.path.join(tempfile.gettempdir(), f"megatron_core_parity_{kind}")
    if dist.get_rank() == 0:
        from tools.convert_ckpt import main as convert_main

        os.system(f"rm -rf {root}")
        hf.save_pretrained(os.path.join(root, "hf"))
        flags = ["--transformer-impl", "transformer_engine"] if kind == "gdn" else []
        flags += ["--target-expert-parallel-size", str(ep)] if ep > 1 else []
        flags += ["--moe-grouped-gemm"] if grouped else []
        flags += ["--megatron-mtp-layer-name", "transformer_layer"] if kind == "mla" else []
        if kind == "mla":
            add_mtp_tensors(os.path.join(root, "hf"))
        assert convert_main(["--load-model-type", "hf", "--save-model-type", "megatron", "--load-dir",
                             os.path.join(root, "hf"), "--save-dir", os.path.join(root, "megatron"),
                             "--target-tensor-parallel-size", str(tp), *flags]) == 0
    dist.barrier()
    return os.path.join(root, "megatron")


def logits(model: torch.nn.Module, tp: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """(megatron-core's logits gathered over TP, the input ids) for one random sequence of 12 tokens."""
    ids = torch.randint(0, VOCAB, (1, 12), generator=torch.Generator().manual_seed(1))
    mask = torch.triu(torch.ones(1, 1, 12, 12, dtype=torch.bool), diagonal=1)
    with torch.no_grad():
        local = model(ids, torch.arange(12)[None], mask)  # [1, s, padded / tp]
    pieces = [torch.empty_like(local) for _ in range(tp)]
    if tp > 1:
        dist.all_gather(pieces, local)
    else:
        pieces = [local]
    return torch.cat(pieces, dim=-1)[..., :VOCAB], ids


def main(argv: Any = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("moe", "gdn", "mla"))
    parser.add_argument("--ep", action="store_true", help="moe, mla: the processes are expert-parallel ranks, not TP")
    parser.add_argument("--grouped", action="store_true", help="moe: the legacy GroupedMLP expert layout")
    options = parser.parse_args(argv)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29535")
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from megatron.core import parallel_state

    tp, ep = (1, world) if options.ep else (world, 1)
    parallel_state.initialize_model_parallel(tp, 1, expert_model_parallel_size=ep)
    run_megatron_on_the_cpu()
    from core.checkpointing import checkpoint_file, map_foreign_file

    hf = hf_model(options.kind)
    root = convert_on_rank_zero(options.kind, hf, tp, ep, options.grouped)
    checkpoint = map_foreign_file(checkpoint_file(root, None, rank % tp, 0, 1, release=True, ep_rank=rank // tp,
                                                  ep_size=ep))
    model = megatron_model(options.kind, checkpoint["args"], tp, ep, options.grouped)
    state: Dict[str, Any] = {k: v for k, v in checkpoint["model"].items() if not k.endswith("_extra_state")}
    result = model.load_state_dict(state, strict=False)
    missing = [key for key in result.missing_keys if not key.endswith("_extra_state")]
    assert not missing and not result.unexpected_keys, (missing, result.unexpected_keys)
    model.mtp_process, model.config.mtp_num_layers = False, None  # MTP runs with labels; its weights loaded above
    ours, ids = logits(model, tp)
    with torch.no_grad():
        expected = hf(ids).logits
    print(f"rank {rank}: {options.kind} TP {tp} EP {ep}{' grouped' if options.grouped else ''}: every key loaded; "
          f"max abs diff {(ours - expected).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
