"""Attention variants: chunked attention, the attention output gate and the extra softmax logit (sinks).

- ``--attention-chunk-size``: the mask equals transformers' chunked causal mask (Llama 4);
- ``--softmax-type learnable|off-by-one``: ``explicit_attention`` equals GPT-OSS's eager attention with sinks;
- ``--attention-output-gate``: our ``SelfAttention`` equals transformers' ``Qwen3NextAttention`` (gate
  per query channel, q/k norms), with the HF projections mapped onto our fused ``[Q; K; V; gate]``; with
  ``--attention-output-gate-per-head`` it equals ``Lfm3Attention`` (one gate row per head, ``g_proj``), whose
  gate the FLOP count takes as one row per head, and the flag alone is refused;
- all three together in a small model give the same logits and sink gradients at TP=2 and TP=2 with
  sequence parallelism as at TP=1 (one 2-process launch).

    python -m pytest tests/unit/test_attention_variants.py -q
"""
from __future__ import annotations

from typing import Dict, Tuple

import pytest
import torch
from torch import nn

from core.launcher import run_distributed
from core.models.gpt_model import GPTModel, build_model, gather_logits, layout_state
from core.parallel_state import ParallelState, initialize
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from core.transformer.attention import SelfAttention, explicit_attention, sliding_window_mask
from core.transformer.config import TransformerConfig

TOLERANCE = 1e-5


def test_chunk_mask_matches_transformers() -> None:
    from transformers.masking_utils import chunked_causal_mask_function

    seq, chunk = 11, 4
    theirs = chunked_causal_mask_function(chunk, torch.zeros(1, dtype=torch.long))
    index = lambda i: torch.tensor(i)  # noqa: E731 (transformers' mask functions take index tensors)
    expected = torch.tensor([[bool(theirs(index(0), index(0), index(q), index(k))) for k in range(seq)]
                             for q in range(seq)])
    assert torch.equal(sliding_window_mask(seq, None, torch.device("cpu"), chunk), expected)
    assert sliding_window_mask(seq, None, torch.device("cpu"), seq) is None  # one chunk: plain causal


@pytest.mark.parametrize("learnable", [True, False])
def test_extra_logit_matches_gpt_oss_sinks(learnable: bool) -> None:
    from transformers.models.gpt_oss.modeling_gpt_oss import eager_attention_forward

    torch.manual_seed(0)
    b, n, s, hn = 2, 4, 7, 8
    q, k, v = (torch.randn(b, n, s, hn) for _ in range(3))
    sinks = torch.randn(n) if learnable else torch.zeros(n)
    module = nn.Module()
    module.num_key_value_groups, module.sinks = 1, nn.Parameter(sinks)
    module.eval()
    mask = torch.ones(s, s, dtype=torch.bool).tril()
    additive = torch.zeros(s, s).masked_fill(~mask, float("-inf"))[None, None]
    expected, _ = eager_attention_forward(module, q, k, v, additive, scaling=hn ** -0.5)  # [b, s, n, hn]
    ours = explicit_attention(q, k, v, mask, hn ** -0.5, None, sinks, 0.0)  # [b, n, s, hn]
    assert (ours.transpose(1, 2) - expected).abs().max().item() <= TOLERANCE


def _max_diff_from_hf(theirs: nn.Module, ours: SelfAttention, fused_qkv: torch.Tensor, batch: int, seq: int) -> float:
    """Max abs difference of our attention, given HF's weights (``fused_qkv`` our ``[Q; K; V; gate]`` rows), from
    the HF attention ``theirs`` on random inputs, causal and without rotation."""
    hidden, hn = fused_qkv.shape[1], ours.head_dim
    with torch.no_grad():
        ours.linear_qkv.weight.copy_(fused_qkv)
        ours.linear_proj.weight.copy_(theirs.o_proj.weight)
        ours.q_layernorm.weight.copy_(theirs.q_norm.weight)
        ours.k_layernorm.weight.copy_(theirs.k_norm.weight)
    x = torch.randn(batch, seq, hidden)
    identity_rope = (torch.ones(batch, seq, hn), torch.zeros(batch, seq, hn))
    causal = torch.zeros(seq, seq).masked_fill(~torch.ones(seq, seq, dtype=torch.bool).tril(), float("-inf"))
    with torch.no_grad():
        expected, _ = theirs(x, identity_rope, causal[None, None].expand(batch, 1, seq, seq))
        got = ours(x.transpose(0, 1), None).transpose(0, 1)  # ours is [s, b, h]
    return (got - expected).abs().max().item()


def test_output_gate_matches_qwen3_next_attention() -> None:
    import transformers
    from transformers.models.qwen3_next.modeling_qwen3_next import Qwen3NextAttention

    hidden, heads, groups, hn, seq, batch = 32, 4, 2, 8, 6, 2
    hf_config = transformers.Qwen3NextConfig(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=groups,
                                             head_dim=hn, rms_norm_eps=1e-6, attn_implementation="eager")
    torch.manual_seed(0)
    theirs = Qwen3NextAttention(hf_config, layer_idx=3).eval()
    with torch.no_grad():
        for param in theirs.parameters():
            param.add_(torch.randn_like(param) * 0.1)
    config = TransformerConfig(num_layers=1, hidden_size=hidden, num_attention_heads=heads, num_query_groups=groups,
                               kv_channels=hn, vocab_size=16, normalization="RMSNorm", norm_epsilon=1e-6,
                               qk_norm="per_head", apply_layernorm_1p=True, add_bias_linear=False,
                               attention_output_gate=True, position_embedding_type="none", attention_dropout=0.0)
    ours = SelfAttention(config, layout_state(1)).eval()
    q_and_gate = theirs.q_proj.weight.view(heads, 2, hn, hidden)  # per head: [query; gate] rows
    fused = torch.cat([q_and_gate[:, 0].reshape(-1, hidden), theirs.k_proj.weight, theirs.v_proj.weight,
                       q_and_gate[:, 1].reshape(-1, hidden)])
    assert _max_diff_from_hf(theirs, ours, fused, batch, seq) <= TOLERANCE


def test_per_head_output_gate_matches_lfm3_attention() -> None:
    from transformers import Lfm3Config
    from transformers.models.lfm3.modeling_lfm3 import Lfm3Attention

    from mindspeed_llm.training.metrics import attention_forward_flops_per_token

    hidden, heads, groups, hn, seq, batch = 32, 4, 2, 8, 7, 2
    hf_config = Lfm3Config(hidden_size=hidden, num_attention_heads=heads, num_key_value_heads=groups, head_dim=hn,
                           num_hidden_layers=3, vocab_size=16, pad_token_id=0, norm_eps=1e-6,
                           layer_types=["conv", "conv", "full_attention"], attn_implementation="eager")
    torch.manual_seed(0)
    theirs = Lfm3Attention(hf_config, layer_idx=2).eval()
    with torch.no_grad():
        for param in theirs.parameters():
            param.add_(torch.randn_like(param) * 0.3)
    config = TransformerConfig(num_layers=1, hidden_size=hidden, num_attention_heads=heads, num_query_groups=groups,
                               kv_channels=hn, vocab_size=16, normalization="RMSNorm", norm_epsilon=1e-6,
                               qk_norm="per_head", add_bias_linear=False, attention_output_gate=True,
                               attention_output_gate_per_head=True, position_embedding_type="none",
                               attention_dropout=0.0)
    ours = SelfAttention(config, layout_state(1)).eval()
    assert ours.linear_qkv.weight.shape == ((heads + 2 * groups) * hn + heads, hidden)  # one gate row per head
    fused = torch.cat([theirs.q_proj.weight, theirs.k_proj.weight, theirs.v_proj.weight, theirs.g_proj.weight])
    assert _max_diff_from_hf(theirs, ours, fused, batch, seq) <= TOLERANCE
    weights = sum(p.numel() for p in (ours.linear_qkv.weight, ours.linear_proj.weight))
    assert attention_forward_flops_per_token(config, seq)[0] == 2 * weights
    with pytest.raises(ValueError, match="--attention-output-gate-per-head sets the gate's granularity: add "
                                         "--attention-output-gate"):
        TransformerConfig(num_layers=1, hidden_size=hidden, num_attention_heads=heads, vocab_size=16,
                          attention_output_gate_per_head=True)


VARIANTS = dict(num_layers=3, hidden_size=32, num_attention_heads=4, num_query_groups=2, vocab_size=64,
                normalization="RMSNorm", attention_dropout=0.0, hidden_dropout=0.0, add_bias_linear=False,
                activation="swiglu", attention_chunk_size=3, full_attention_layers=(1,), attention_output_gate=True,
                softmax_type="learnable")


def _full_sinks(name: str) -> torch.Tensor:
    generator = torch.Generator().manual_seed(sum(map(ord, name)))
    return torch.randn(VARIANTS["num_attention_heads"], generator=generator)


def _logits_and_sink_grads(state: ParallelState, sequence_parallel: bool,
                           input_ids: torch.Tensor) -> Tuple[torch.Tensor, Dict[str, torch.Tensor]]:
    """Full logits ``[b, s, v]`` and full sink gradients of the variant model (random non-zero sinks)."""
    tp = state.tp_group.size
    config = TransformerConfig(**VARIANTS, tensor_model_parallel_size=tp, sequence_parallel=sequence_parallel)
    model: GPTModel = build_model(config, state, torch.device("cpu"), seed=5)
    sinks = {name: p for name, p in model.named_parameters() if name.endswith("softmax_offset")}
    with torch.no_grad():
        for name, param in sinks.items():
            param.copy_(param_meta(param).tp_shard.shard(_full_sinks(name), state.tp_group.rank, tp))
    logits = model(input_ids)  # [b, s, v/tp]
    full = gather_logits(logits, model)
    (full * torch.linspace(-1, 1, full.size(-1))).sum().backward()
    grads = {name: gather_full_tensor(p.grad, param_meta(p).tp_shard, state.tp_group) for name, p in sinks.items()}
    return full.detach(), grads


def _tp2_worker(rank: int, world_size: int, input_ids: torch.Tensor) -> Dict[bool, tuple]:
    state = initialize(tp=world_size)
    return {sp: _logits_and_sink_grads(state, sp, input_ids) for sp in (False, True)}


def test_variants_tp2_and_sp_equal_tp1() -> None:
    input_ids = torch.randint(0, VARIANTS["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(1))
    expected_logits, expected_grads = _logits_and_sink_grads(layout_state(1), False, input_ids)
    assert len(expected_grads) == VARIANTS["num_layers"] and all(g.abs().max() > 0 for g in expected_grads.values())
    for rank_results in run_distributed(2, _tp2_worker, input_ids):
        for sp, (logits, grads) in rank_results.items():
            assert (logits - expected_logits).abs().max().item() <= 1e-4, f"sequence parallel {sp}"
            for name, grad in grads.items():
                torch.testing.assert_close(grad, expected_grads[name], rtol=1e-4, atol=1e-6)


def test_chunking_changes_the_output() -> None:
    input_ids = torch.randint(0, VARIANTS["vocab_size"], (2, 8), generator=torch.Generator().manual_seed(1))
    state = layout_state(1)
    chunked = build_model(TransformerConfig(**VARIANTS), state, torch.device("cpu"), seed=5)
    plain = build_model(TransformerConfig(**{**VARIANTS, "attention_chunk_size": None, "full_attention_layers": (),
                                             "sliding_window": None}), state, torch.device("cpu"), seed=5)
    with torch.no_grad():
        assert (chunked(input_ids) - plain(input_ids)).abs().max().item() > 1e-3
