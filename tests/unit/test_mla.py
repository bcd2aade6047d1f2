"""Multi-latent attention (``core/transformer/mla.py``, ``--multi-latent-attention``).

- Our ``MultiLatentAttention`` with the weights of transformers' ``DeepseekV3Attention`` (q latent or a plain
  q projection; interleaved or half-rotation RoPE; YaRN with its mscale on cos/sin and on the softmax scale)
  and ``DeepseekV2Attention`` (complex, interleaved RoPE) gives the same output (fp32, 1e-5);
- a small MLA model (with a sigmoid output gate per value channel) gives the same logits and gradients of every
  parameter at TP=2 and TP=2 with sequence parallelism as at TP=1 (one 2-process launch);
- bad MLA settings are refused with one-line errors.

    python -m pytest tests/unit/test_mla.py -q
"""
from __future__ import annotations

from typing import Dict, Optional, Tuple

import pytest
import torch

from core.launcher import run_distributed
from core.models.gpt_model import GPTModel, build_model, gather_logits, layout_state
from core.parallel_state import ParallelState, initialize
from core.tensor_parallel.mappings import all_reduce
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from core.transformer.config import TransformerConfig
from core.transformer.mla import MultiLatentAttention
from core.transformer.rope import RotaryEmbedding

TOLERANCE = 1e-5
HIDDEN, HEADS, NOPE, ROPE, V_DIM, KV_RANK, SEQ, BATCH = 32, 4, 8, 4, 6, 12, 7, 2
YARN = dict(rope_type="yarn", rope_theta=10000.0, factor=4.0, original_max_position_embeddings=4,
            beta_fast=32.0, beta_slow=1.0, mscale=0.707, mscale_all_dim=0.9)
# HF weight name -> ours
WEIGHTS = {"q_proj": "linear_q_proj", "q_a_proj": "linear_q_down_proj", "q_a_layernorm": "q_layernorm",
           "q_b_proj": "linear_q_up_proj", "kv_a_proj_with_mqa": "linear_kv_down_proj",
           "kv_a_layernorm": "kv_layernorm", "kv_b_proj": "linear_kv_up_proj", "o_proj": "linear_proj"}


def _our_config(q_lora_rank: Optional[int], yarn: bool, interleaved: bool, **extra) -> TransformerConfig:
    rope = dict(rope_scaling_type="yarn", rope_scaling_factor=YARN["factor"],
                rope_original_max_position_embeddings=YARN["original_max_position_embeddings"],
                rope_scaling_mscale=YARN["mscale"], rope_scaling_mscale_all_dim=YARN["mscale_all_dim"]) if yarn else {}
    return TransformerConfig(**{**dict(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=HEADS, vocab_size=16, normalization="RMSNorm",
        norm_epsilon=1e-6, add_bias_linear=False, attention_dropout=0.0, multi_latent_attention=True,
        q_lora_rank=q_lora_rank, kv_lora_rank=KV_RANK, qk_head_dim=NOPE, qk_pos_emb_head_dim=ROPE,
        v_head_dim=V_DIM, rope_interleaved=interleaved, rotary_base=10000.0), **rope, **extra})


def _hf_attention(version: int, q_lora_rank: Optional[int], yarn: bool, interleaved: bool):
    import transformers
    from transformers.models.deepseek_v2.modeling_deepseek_v2 import DeepseekV2Attention, DeepseekV2RotaryEmbedding
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import DeepseekV3Attention, DeepseekV3RotaryEmbedding

    rope = YARN if yarn else dict(rope_type="default", rope_theta=10000.0)
    common = dict(hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS, q_lora_rank=q_lora_rank,
                  kv_lora_rank=KV_RANK, qk_nope_head_dim=NOPE, qk_rope_head_dim=ROPE, v_head_dim=V_DIM,
                  rms_norm_eps=1e-6, attention_bias=False, rope_parameters=rope, max_position_embeddings=64)
    if version == 3:
        config = transformers.DeepseekV3Config(**common, rope_interleave=interleaved)
        attention, rotary = DeepseekV3Attention, DeepseekV3RotaryEmbedding
    else:
        config = transformers.DeepseekV2Config(**common)
        attention, rotary = DeepseekV2Attention, DeepseekV2RotaryEmbedding
    config._attn_implementation = "eager"
    torch.manual_seed(0)
    module = attention(config, layer_idx=0).eval()
    with torch.no_grad():
        for param in module.parameters():
            param.add_(torch.randn_like(param) * 0.2)
    return module, rotary(config)


CASES = [(3, None, False, True), (3, 10, False, True), (3, 10, True, True), (3, None, True, False),
         (2, 10, True, True), (2, None, False, True)]


@pytest.mark.parametrize("version,q_lora_rank,yarn,interleaved", CASES)
def test_mla_matches_transformers(version: int, q_lora_rank: Optional[int], yarn: bool, interleaved: bool) -> None:
    theirs, hf_rotary = _hf_attention(version, q_lora_rank, yarn, interleaved)
    config = _our_config(q_lora_rank, yarn, interleaved)
    ours = MultiLatentAttention(config, layout_state(1)).eval()
    with torch.no_grad():
        for hf_name, hf_module in theirs.named_children():
            if hf_module is not None and hf_name in WEIGHTS:
                getattr(ours, WEIGHTS[hf_name]).weight.copy_(hf_module.weight)
    assert {n for n, _ in ours.named_parameters()} == {f"{WEIGHTS[n]}.weight" for n, p in theirs.named_parameters()
                                                       for n in [n.split(".")[0]]}
    x = torch.randn(BATCH, SEQ, HIDDEN)
    positions = torch.arange(SEQ)[None].expand(BATCH, SEQ)
    causal = torch.zeros(SEQ, SEQ).masked_fill(~torch.ones(SEQ, SEQ, dtype=torch.bool).tril(), float("-inf"))
    mask = causal[None, None].expand(BATCH, 1, SEQ, SEQ)
    with torch.no_grad():
        embeddings = hf_rotary(x, positions)
        if version == 3:
            expected, _ = theirs(x, embeddings, mask)
        else:
            expected, _ = theirs(x, attention_mask=mask, position_embeddings=embeddings)
        got = ours(x.transpose(0, 1), RotaryEmbedding(config)(SEQ, x.device, x.dtype)).transpose(0, 1)
    assert abs(config.mla_softmax_scale - theirs.scaling) < 1e-7
    assert (got - expected).abs().max().item() <= TOLERANCE


MODEL = dict(num_layers=2, hidden_size=HIDDEN, num_attention_heads=HEADS, vocab_size=64, normalization="RMSNorm",
             attention_dropout=0.0, hidden_dropout=0.0, add_bias_linear=False, activation="swiglu", ffn_hidden_size=48,
             multi_latent_attention=True, q_lora_rank=10, kv_lora_rank=KV_RANK, qk_head_dim=NOPE,
             qk_pos_emb_head_dim=ROPE, v_head_dim=V_DIM, rope_interleaved=True, rope_scaling_type="yarn",
             rope_scaling_factor=4.0, rope_original_max_position_embeddings=4, rope_scaling_mscale_all_dim=0.9,
             attention_output_gate=True)  # a sigmoid gate per value channel, column-parallel by head


def _logits_and_grads(state: ParallelState, sequence_parallel: bool,
                      input_ids: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Full logits ``[b, s, v]`` and the full gradient of every parameter of a small MLA model."""
    tp = state.tp_group.size
    config = TransformerConfig(**MODEL, tensor_model_parallel_size=tp, sequence_parallel=sequence_parallel)
    model: GPTModel = build_model(config, state, torch.device("cpu"), seed=5)
    full = gather_logits(model(input_ids), model)  # [b, s, v]
    (full * torch.linspace(-1, 1, full.size(-1))).sum().backward()
    grads = {}
    for name, param in model.named_parameters():
        meta = param_meta(param)
        assert not meta.grad_partial_over_tp or "layernorm" in name and sequence_parallel, name
        grad = param.grad
        if meta.grad_partial_over_tp and tp > 1:  # sequence-parallel hidden norms: sum the partial gradients
            grad = all_reduce(grad.clone(), state.tp_group)
        grads[name] = gather_full_tensor(grad, meta.tp_shard, state.tp_group)
        if "word_embeddings" in name or "output_layer" in name:  # without the vocab padding, which depends on TP
            grads[name] = grads[name][:MODEL["vocab_size"]]
    return full.detach(), grads


def _tp2_worker(rank: int, world_size: int, input_ids: torch.Tensor) -> Dict[bool, tuple]:
    state = initialize(tp=world_size)
    return {sp: _logits_and_grads(state, sp, input_ids) for sp in (False, True)}


def test_mla_tp2_and_sp_equal_tp1() -> None:
    input_ids = torch.randint(0, MODEL["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(1))
    expected_logits, expected_grads = _logits_and_grads(layout_state(1), False, input_ids)
    assert any("linear_kv_down_proj" in name for name in expected_grads)
    assert expected_grads["decoder.layers.0.self_attention.linear_gate.weight"].shape == (HEADS * V_DIM, HIDDEN)
    assert all(grad.abs().max() > 0 for grad in expected_grads.values())
    for rank_results in run_distributed(2, _tp2_worker, input_ids):
        for sp, (logits, grads) in rank_results.items():
            assert (logits - expected_logits).abs().max().item() <= 1e-4, f"sequence parallel {sp}"
            assert grads.keys() == expected_grads.keys()
            for name, grad in grads.items():
                torch.testing.assert_close(grad, expected_grads[name], rtol=1e-4, atol=1e-6, msg=f"{name} sp={sp}")


@pytest.mark.parametrize("overrides,message", [
    (dict(kv_lora_rank=None), "--kv-lora-rank"),
    (dict(qk_pos_emb_head_dim=3), "--qk-pos-emb-head-dim"),
    (dict(num_query_groups=2), "--num-query-groups"),
    (dict(tensor_model_parallel_size=3), "--tensor-model-parallel-size"),
    (dict(qk_norm="per_head"), "--qk-layernorm"),
])
def test_bad_mla_settings_are_refused(overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _our_config(10, False, True, **overrides)


def test_mindspeed_names_are_aliases() -> None:
    from mindspeed_llm.arguments import parse_args

    base = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--kv-lora-rank", "16",
            "--q-lora-rank", "24", "--v-head-dim", "16", "--rope-scaling-type", "yarn"]
    megatron = parse_args(base + ["--multi-latent-attention", "--qk-head-dim", "8", "--qk-pos-emb-head-dim", "4",
                                  "--rope-scaling-beta-fast", "16", "--rope-scaling-beta-slow", "2",
                                  "--original-max-position-embeddings", "4096"])
    mindspeed = parse_args(base + ["--multi-head-latent-attention", "--qk-nope-head-dim", "8", "--qk-rope-head-dim",
                                   "4", "--beta-fast", "16", "--beta-slow", "2",
                                   "--rope-scaling-original-max-position-embeddings", "4096"])
    assert vars(megatron) == vars(mindspeed)
    assert (megatron.multi_latent_attention, megatron.qk_head_dim, megatron.qk_pos_emb_head_dim,
            megatron.rope_scaling_beta_fast, megatron.original_max_position_embeddings) == (True, 8, 4, 16.0, 4096)
