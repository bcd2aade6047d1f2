"""Logit parity with ``transformers`` for the model-zoo families and their behaviour flags.

Same method as ``test_hf_parity.py`` (tiny random HF model, sharded
safetensors, the production converter, fp32 logits within 1e-4), over the
families whose behaviour needs the zoo's flags: Qwen3 (``--qk-layernorm``),
Gemma (``--apply-layernorm-1p``, ``--input-embeds-norm``, ``--geglu
--gelu-tanh``, tied), Gemma2 (``--post-norm``, both softcaps,
``--query-pre-attn-scalar``, ``--sliding-window-pattern``), Phi3 (fused HF
tensors), StableLM (LayerNorm with bias, ``--rotary-percent``, q/k/v bias),
Helium (``--rope-interleaved``), Ministral (every 3rd layer full attention) and
Olmo2 (``--qk-layernorm-full-width``: q/k RMSNorm over all heads' channels, its
sum of squares all-reduced over TP, and ``--post-norm-only``; with one KV head
the K norm's heads are replicated at TP=2), Granite (embedding, residual and
attention multipliers, logit divisor), SmolLM3 (NoPE layers), Olmo
(non-parametric LayerNorm, q/k/v clipping), Olmo3 (Olmo2 with every 3rd layer
full, a scaled global RoPE and a local base) and Gemma3 text (q/k norms with
(1 + w), every 2nd layer full, scaled global RoPE and a local base).
TP=1 runs in this process; every case's TP=2 check, and a sequence-parallel
TP=2 check of each, run in one 2-process gloo launch.

    python -m pytest tests/models/test_zoo_parity.py -q
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Dict, List, Tuple

import pytest
import torch
import transformers

from core.checkpointing import checkpoint_file, load_file
from core.launcher import run_distributed
from core.models.gpt_model import GPTModel, build_model, layout_state
from core.parallel_state import ParallelState, initialize
from core.transformer.config import TransformerConfig
from tests.models.test_hf_parity import convert, hf_logits, our_logits

TOLERANCE = 1e-4
SEQ, BATCH = 12, 2
BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=128, max_position_embeddings=256)

# persistent buffers the converter carries like weights (a sigmoid router's selection bias, zero when built):
# perturbed too, so a dropped or misplaced one changes the logits
PERTURBED_BUFFERS = ("e_score_correction_bias",)
# DeepSeek-V4's hash-routed layers' token id -> experts tables (zero when built): drawn, so each token's experts
# differ and a dropped or transposed table changes the logits
HASH_TABLES = ("tid2eid",)

# name -> (HF config class, HF model class, config overrides, --model-type-hf)
CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM", dict(head_dim=24, rms_norm_eps=1e-6), "qwen3"),
    "qwen3_tied_mqa": ("Qwen3Config", "Qwen3ForCausalLM",
                       dict(head_dim=16, num_key_value_heads=1, tie_word_embeddings=True, vocab_size=101), "qwen3"),
    "gemma": ("GemmaConfig", "GemmaForCausalLM", dict(head_dim=32, vocab_size=100), "gemma"),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM",
               dict(head_dim=16, sliding_window=4, query_pre_attn_scalar=24, attn_logit_softcapping=2.0,
                    final_logit_softcapping=3.0), "gemma2"),
    "phi3": ("Phi3Config", "Phi3ForCausalLM", dict(pad_token_id=0), "phi3"),
    "stablelm": ("StableLmConfig", "StableLmForCausalLM", dict(use_qkv_bias=True), "stablelm"),
    "helium": ("HeliumConfig", "HeliumForCausalLM", dict(head_dim=16, attention_bias=True), "helium"),
    "ministral": ("MinistralConfig", "MinistralForCausalLM",
                  dict(head_dim=16, sliding_window=4, layer_types=["sliding_attention", "sliding_attention", "full_attention"]),
                  "ministral"),
    "olmo2": ("Olmo2Config", "Olmo2ForCausalLM", dict(rms_norm_eps=1e-6), "olmo2"),
    "olmo2_tied_mqa": ("Olmo2Config", "Olmo2ForCausalLM", dict(num_key_value_heads=1, tie_word_embeddings=True),
                       "olmo2"),
    "olmo3": ("Olmo3Config", "Olmo3ForCausalLM",
              dict(sliding_window=4, layer_types=["sliding_attention", "sliding_attention", "full_attention"],
                   rope_parameters={"full_attention": {"rope_type": "linear", "factor": 2.0, "rope_theta": 5000.0},
                                    "sliding_attention": {"rope_type": "default", "rope_theta": 300.0}}), "olmo3"),
    "granite": ("GraniteConfig", "GraniteForCausalLM",
                dict(embedding_multiplier=3.0, residual_multiplier=0.4, attention_multiplier=0.3, logits_scaling=6.0,
                     attention_bias=True, mlp_bias=True), "granite"),
    "olmo": ("OlmoConfig", "OlmoForCausalLM", dict(clip_qkv=0.3), "olmo"),
    "gemma3": ("Gemma3TextConfig", "Gemma3ForCausalLM",
               dict(head_dim=16, sliding_window=4, query_pre_attn_scalar=24, pad_token_id=0,
                    layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                    rope_parameters={"full_attention": {"rope_type": "linear", "factor": 4.0, "rope_theta": 50000.0},
                                     "sliding_attention": {"rope_type": "default", "rope_theta": 100.0}}), "gemma3"),
    "smollm3": ("SmolLM3Config", "SmolLM3ForCausalLM", dict(pad_token_id=0, no_rope_layers=[1, 0, 1]), "smollm3"),
}


def _load_case_modules() -> None:
    """Merge ``CASES`` of every ``tests/models/cases_*.py`` (one module per family module of the registry)."""
    import importlib
    import pkgutil

    for module in sorted(m.name for m in pkgutil.iter_modules([os.path.dirname(__file__)])):
        if module.startswith("cases_"):
            extra = importlib.import_module(f"tests.models.{module}").CASES
            clash = set(extra) & set(CASES)
            assert not clash, f"{module}: cases {sorted(clash)} are defined twice"
            CASES.update(extra)


_load_case_modules()


def make_hf_model(name: str, seed: int = 0) -> transformers.PreTrainedModel:
    """A tiny random HF model of case ``name`` in fp32 with every weight perturbed."""
    return build_hf_model(CASES[name], seed)


def build_hf_model(case: Tuple[str, str, Dict[str, Any], str], seed: int = 0) -> transformers.PreTrainedModel:
    """A tiny random HF model of ``case`` (as in ``CASES``) in fp32, every weight perturbed (biases and
    norms not trivial), and the routers' ``e_score_correction_bias`` buffers too."""
    config_cls, model_cls, overrides, _ = case
    config = getattr(transformers, config_cls)(**{**BASE, **overrides}, dtype="float32", attn_implementation="eager")
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
        for name, buffer in model.named_buffers():
            if name.endswith(PERTURBED_BUFFERS):
                buffer.add_(torch.randn_like(buffer) * 0.1)
            if name.endswith(HASH_TABLES):  # [vocab, k]: k distinct experts per token id, drawn
                experts = config.n_routed_experts
                buffer.copy_(torch.stack([torch.randperm(experts)[:buffer.size(1)] for _ in range(buffer.size(0))]))
    return model


def prepare(name: str, root: str, tp: int) -> Tuple[str, torch.Tensor, torch.Tensor]:
    """Save the HF model (sharded), convert it at ``tp``; return the mg dir, inputs and HF logits."""
    model = make_hf_model(name)
    hf_dir, mg_dir = os.path.join(root, f"{name}_hf"), os.path.join(root, f"{name}_mg_tp{tp}")
    if not os.path.isdir(hf_dir):
        model.save_pretrained(hf_dir, max_shard_size="60KB")
    convert(hf_dir, mg_dir, CASES[name][3], tp)
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=generator)  # [b, s]
    return mg_dir, input_ids, hf_logits(model, input_ids)


def load_ours(mg_dir: str, state: ParallelState, sequence_parallel: bool = False) -> GPTModel:
    """Our model with TP rank ``state.tp_group.rank``'s weights, optionally under sequence parallelism."""
    checkpoint = load_file(checkpoint_file(mg_dir, None, state.tp_group.rank, 0, 1, release=True))
    config = TransformerConfig.from_dict(checkpoint["transformer_config"])
    config = dataclasses.replace(config, sequence_parallel=sequence_parallel)
    model = build_model(config, state, torch.device("cpu"), seed=0)
    model.load_state_dict(checkpoint["model"], strict=True)
    return model.eval()


@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_match_hf_tp1(name: str, tmp_path) -> None:
    mg_dir, input_ids, expected = prepare(name, str(tmp_path), tp=1)
    ours = our_logits(load_ours(mg_dir, layout_state(1)), input_ids)
    assert ours.shape == expected.shape
    diff = (ours - expected).abs().max().item()
    assert diff <= TOLERANCE, f"{name}: max abs diff {diff}"


def _tp2_worker(rank: int, world_size: int,
                jobs: List[Tuple[str, str, torch.Tensor]]) -> Dict[Tuple[str, bool], torch.Tensor]:
    """Every converted case at TP=2, without and with sequence parallelism: gathered logits by (case, SP)."""
    state = initialize(tp=world_size)
    return {(name, sp): our_logits(load_ours(mg_dir, state, sp), input_ids)
            for name, mg_dir, input_ids in jobs for sp in (False, True)}


def test_logits_match_hf_tp2_and_sp(tmp_path) -> None:
    prepared = {name: prepare(name, str(tmp_path), tp=2) for name in CASES}
    jobs = [(name, mg_dir, input_ids) for name, (mg_dir, input_ids, _) in prepared.items()]
    per_rank = run_distributed(2, _tp2_worker, jobs)
    for name, (_, _, expected) in prepared.items():
        for sp in (False, True):
            for rank_results in per_rank:
                diff = (rank_results[(name, sp)] - expected).abs().max().item()
                assert diff <= TOLERANCE, f"{name} (sequence parallel {sp}): max abs diff {diff}"
