"""Logit parity with Hugging Face ``transformers`` for every registered family.

Each case builds a tiny random HF model (weights perturbed so biases and norms
are not trivial), saves it as sharded safetensors (the index path), converts it
with the production converter (``tools/convert_ckpt.py``, in-process) and
compares our ``GPTModel``'s fp32 logits with HF's (max abs diff <= 1e-4).
TP=1 runs in this process; TP=2 (including KV heads fewer than TP, i.e. KV
replication, and a padded odd vocabulary) runs in one 2-process gloo launch.

    python -m pytest tests/models/test_hf_parity.py -q
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import pytest
import torch
import transformers

from core.checkpointing import checkpoint_file, load_file
from core.models.gpt_model import GPTModel, build_model, gather_logits, layout_state
from core.parallel_state import ParallelState, initialize
from core.transformer.config import TransformerConfig
from core.launcher import run_distributed
from tools.convert_ckpt import main as convert_main

TOLERANCE = 1e-4
SEQ, BATCH = 12, 2
BASE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=128, max_position_embeddings=256, rms_norm_eps=1e-6)

# name -> (HF config class, HF model class, config overrides, --model-type-hf)
CASES: Dict[str, Tuple[str, str, Dict[str, Any], str]] = {
    "llama2_gqa": ("LlamaConfig", "LlamaForCausalLM", {}, "llama2"),
    "llama2_mha_tied": ("LlamaConfig", "LlamaForCausalLM",
                        dict(num_key_value_heads=4, tie_word_embeddings=True, vocab_size=101), "llama"),
    "llama3_rope": ("LlamaConfig", "LlamaForCausalLM",
                    dict(rope_theta=500000.0, rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                                                                high_freq_factor=4.0,
                                                                original_max_position_embeddings=64)), "llama3"),
    "llama_linear_rope": ("LlamaConfig", "LlamaForCausalLM",
                          dict(rope_scaling=dict(rope_type="linear", factor=2.0)), "llama2"),
    "mistral_gqa": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=64, vocab_size=150), "mistral"),
    "mistral_mqa": ("MistralConfig", "MistralForCausalLM", dict(num_key_value_heads=1), "mistral"),
    "mistral_window": ("MistralConfig", "MistralForCausalLM", dict(sliding_window=5), "mistral"),
    "qwen2_bias": ("Qwen2Config", "Qwen2ForCausalLM", dict(rope_theta=1000000.0), "qwen2"),
    "qwen2_tied_odd_vocab": ("Qwen2Config", "Qwen2ForCausalLM",
                             dict(tie_word_embeddings=True, vocab_size=131, num_key_value_heads=1), "qwen2"),
}
TP2_CASES = ("llama2_gqa", "llama3_rope", "mistral_mqa", "mistral_window", "qwen2_tied_odd_vocab")


def make_hf_model(name: str, seed: int = 0) -> transformers.PreTrainedModel:
    """A tiny random HF model in fp32 with every weight perturbed (biases and norms not trivial)."""
    config_cls, model_cls, overrides, _ = CASES[name]
    config = getattr(transformers, config_cls)(**{**BASE, **overrides}, dtype="float32", attn_implementation="eager")
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config).eval()
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn_like(param) * 0.05)
    return model


def hf_logits(model: transformers.PreTrainedModel, input_ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=input_ids, use_cache=False).logits.float()  # [b, s, v]


def convert(hf_dir: str, mg_dir: str, family: str, tp: int) -> None:
    code = convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir,
                         "--save-dir", mg_dir, "--model-type-hf", family,
                         "--target-tensor-parallel-size", str(tp), "--target-pipeline-parallel-size", "1"])
    assert code == 0


def load_ours(mg_dir: str, state: ParallelState) -> GPTModel:
    """Our model with the weights of TP rank ``state.tp_rank`` of a converted checkpoint."""
    tp_group = state.tp_group
    checkpoint = load_file(checkpoint_file(mg_dir, None, tp_group.rank, 0, 1, release=True))
    config = TransformerConfig.from_dict(checkpoint["transformer_config"])
    assert config.tensor_model_parallel_size == tp_group.size
    model = build_model(config, state, torch.device("cpu"), seed=0)
    model.load_state_dict(checkpoint["model"], strict=True)
    return model.eval()


def our_logits(model: GPTModel, input_ids: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return gather_logits(model(input_ids), model).float()  # [b, s, v]


def prepare(name: str, root: str, tp: int) -> Tuple[str, torch.Tensor, torch.Tensor]:
    """Save the HF model (sharded), convert it at ``tp``; return the mg dir, inputs and HF logits."""
    model = make_hf_model(name)
    hf_dir, mg_dir = os.path.join(root, f"{name}_hf"), os.path.join(root, f"{name}_mg_tp{tp}")
    if not os.path.isdir(hf_dir):
        model.save_pretrained(hf_dir, max_shard_size="60KB")
        assert os.path.isfile(os.path.join(hf_dir, "model.safetensors.index.json"))
    convert(hf_dir, mg_dir, CASES[name][3], tp)
    generator = torch.Generator().manual_seed(1)
    input_ids = torch.randint(0, model.config.vocab_size, (BATCH, SEQ), generator=generator)  # [b, s]
    return mg_dir, input_ids, hf_logits(model, input_ids)


@pytest.mark.parametrize("name", sorted(CASES))
def test_logits_match_hf_tp1(name: str, tmp_path) -> None:
    mg_dir, input_ids, expected = prepare(name, str(tmp_path), tp=1)
    ours = our_logits(load_ours(mg_dir, layout_state(1)), input_ids)
    assert ours.shape == expected.shape
    assert (ours - expected).abs().max().item() <= TOLERANCE


def _tp2_worker(rank: int, world_size: int, jobs: List[Tuple[str, str, torch.Tensor]]) -> Dict[str, torch.Tensor]:
    """Run every converted case at TP=2; return the gathered logits by case name."""
    state = initialize(tp=world_size)
    results = {}
    for name, mg_dir, input_ids in jobs:
        results[name] = our_logits(load_ours(mg_dir, state), input_ids)
    return results


def test_logits_match_hf_tp2(tmp_path) -> None:
    prepared = {name: prepare(name, str(tmp_path), tp=2) for name in TP2_CASES}
    jobs = [(name, mg_dir, input_ids) for name, (mg_dir, input_ids, _) in prepared.items()]
    per_rank = run_distributed(2, _tp2_worker, jobs)
    for name, (_, _, expected) in prepared.items():
        for rank_results in per_rank:
            diff = (rank_results[name] - expected).abs().max().item()
            assert diff <= TOLERANCE, f"{name}: max abs diff {diff}"


def test_kv_heads_replicated_at_tp2(tmp_path) -> None:
    """MQA at TP=2: both ranks hold the one KV head (rows of K and V equal across ranks)."""
    mg_dir, _, _ = prepare("mistral_mqa", str(tmp_path), tp=2)
    states = [load_file(checkpoint_file(mg_dir, None, r, 0, 1, release=True))["model"] for r in range(2)]
    qkv = [s["decoder.layers.0.self_attention.linear_qkv.weight"] for s in states]  # [(2 + 2*1) * 16, 64]
    head_dim, local_q = 16, 2
    assert qkv[0].shape == ((local_q + 2) * head_dim, 64)
    assert torch.equal(qkv[0][local_q * head_dim:], qkv[1][local_q * head_dim:])
    assert not torch.equal(qkv[0][:local_q * head_dim], qkv[1][:local_q * head_dim])
