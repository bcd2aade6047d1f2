"""DeepSeek Sparse Attention in the model (``--experimental-attention-variant dsa``, ``core/transformer/mla.py``).

* the indexer's KL loss (``indexer_kl_loss``) equals a direct computation over full score matrices, dense and
  sparse, values and gradients, at any block size;
* selection respects documents: a packed micro-batch gives each document the logits it gets alone;
* sparse stage: the LM loss gives the indexers no gradient (coefficient 0: none at all; coefficient > 0: exactly
  the indexer loss's gradient), while every other parameter gets one, and the same one with or without the
  indexer loss (the indexer's inputs are detached);
* dense warm-up: the logits are dense MLA's (the same weights without indexers), and a training step through
  the trainer moves the indexers' parameters only and logs ``indexer loss``;
* a layer that shares its top-k (GLM-5) attends with its source layer's selection;
* bad input, one line each.

    python -m pytest tests/unit/test_dsa.py -q
"""
from __future__ import annotations

import dataclasses
from typing import Dict

import pytest
import torch

from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig
from core.transformer.sparse_attention import KeyRule, indexer_kl_loss, indexer_scores, select_topk

BASE = dict(vocab_size=64, num_layers=3, hidden_size=32, num_attention_heads=4, ffn_hidden_size=48,
            normalization="RMSNorm", activation="swiglu", add_bias_linear=False, attention_dropout=0.0,
            hidden_dropout=0.0, multi_latent_attention=True, q_lora_rank=16, kv_lora_rank=12, qk_head_dim=8,
            qk_pos_emb_head_dim=4, v_head_dim=8, rope_interleaved=True, untie_embeddings_and_output_weights=True,
            experimental_attention_variant="dsa", dsa_indexer_n_heads=3, dsa_indexer_head_dim=8, dsa_indexer_topk=3)
SEQ, BATCH = 10, 2


def dsa_config(**overrides) -> TransformerConfig:
    return TransformerConfig(**{**BASE, **overrides})


def dsa_model(config: TransformerConfig, seed: int = 0) -> torch.nn.Module:
    model = build_model(config, layout_state(1), torch.device("cpu"), seed=seed)
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():  # norms and indexer LayerNorms away from ones/zeros
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.1)
    return model


def tokens(seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 64, (BATCH, SEQ), generator=torch.Generator().manual_seed(seed))


# --------------------------------------------------------------------------- the loss against a direct form


def reference_kl(q, k, q_index, k_index, weights, scale, indices, valid, sparse):
    """KL(attention summed over heads, normalised || softmax(indexer)) per query, over the allowed keys (all
    causal ones, or the selected ones), averaged over queries: full matrices, torch.kl_div."""
    s, b = q.shape[:2]
    causal = torch.ones(s, s, dtype=torch.bool).tril()[None].expand(b, s, s)
    allowed = causal
    if sparse:
        selected = torch.zeros(b, s, s, dtype=torch.bool).scatter_(2, indices, valid)
        allowed = causal & selected
    attention = torch.einsum("qbnd,kbnd->bnqk", q, k) * scale
    target = attention.masked_fill(~allowed[:, None], float("-inf")).softmax(-1).sum(1)
    target = target / target.sum(-1, keepdim=True)
    log_predicted = indexer_scores(q_index, k_index, weights, allowed).log_softmax(-1)
    terms = torch.nn.functional.kl_div(log_predicted.masked_fill(~allowed, 0.0), target, reduction="none")
    return terms.sum() / (b * s)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("block", [1, 4, 64])
def test_indexer_loss_equals_the_direct_kl(sparse: bool, block: int) -> None:
    generator = torch.Generator().manual_seed(0)
    s, b, n = 9, 2, 3
    q, k = (torch.randn(s, b, n, 6, generator=generator) for _ in range(2))
    index = [torch.randn(s, b, 2, 4, generator=generator), torch.randn(s, b, 4, generator=generator),
             torch.randn(s, b, 2, generator=generator)]
    indices, valid = select_topk(*index, top_k=4)
    grads = []
    for loss_fn in (lambda *a: indexer_kl_loss(*a, block=block), reference_kl):
        leaves = [t.clone().requires_grad_() for t in index]
        loss = loss_fn(q, k, *leaves, 0.4, indices, valid, sparse)
        loss.backward()
        grads.append((loss.detach(), *(t.grad for t in leaves)))
    for ours, reference in zip(*grads):
        torch.testing.assert_close(ours, reference, rtol=1e-5, atol=1e-6)
    assert grads[0][0] > 0


def test_selection_stays_within_documents() -> None:
    generator = torch.Generator().manual_seed(2)
    s, b = 12, 2
    index = [torch.randn(s, b, 2, 4, generator=generator), torch.randn(s, b, 4, generator=generator),
             torch.randn(s, b, 2, generator=generator)]
    documents = torch.tensor([[0] * 5 + [1] * 7, [0] * 8 + [1] * 4])
    positions = torch.arange(s)
    indices, valid = select_topk(*index, top_k=3, rule=KeyRule(positions, positions, documents), block=5)
    for row in range(b):
        for query in range(s):
            chosen = indices[row, query][valid[row, query]]
            assert (documents[row, chosen] == documents[row, query]).all() and (chosen <= query).all()
            first = (documents[row] == documents[row, query]).nonzero().min().item()
            assert len(chosen) == min(3, query - first + 1)


def test_packed_documents_equal_each_document_alone() -> None:
    config = dsa_config()
    model = dsa_model(config).eval()
    ids = tokens()
    documents = torch.tensor([[0] * 4 + [1] * 6, [0] * 7 + [1] * 3])
    with torch.no_grad():
        packed = model(ids, document_ids=documents, position_ids=_positions(documents))  # [b, s, v]
        for row in range(BATCH):
            for doc in (0, 1):
                span = (documents[row] == doc).nonzero().flatten()
                alone = model(ids[row:row + 1, span])
                torch.testing.assert_close(packed[row:row + 1, span], alone, rtol=1e-5, atol=1e-5)


def _positions(documents: torch.Tensor) -> torch.Tensor:
    """Positions restarting at 0 in each document ([b, s])."""
    starts = torch.zeros_like(documents)
    for row in range(documents.size(0)):
        for doc in documents[row].unique():
            span = (documents[row] == doc).nonzero().flatten()
            starts[row, span] = torch.arange(len(span))
    return starts


# --------------------------------------------------------------------------- the two stages


def indexer_grads(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    return {name: param.grad for name, param in model.named_parameters() if ".indexer." in name}


def backward(model: torch.nn.Module, lm_weight: float) -> None:
    model.zero_grad(set_to_none=True)
    per_token = model(tokens(), labels=tokens(3))  # [b, s]
    (per_token.mean() * lm_weight).backward()


def test_sparse_stage_the_lm_loss_does_not_reach_the_indexer() -> None:
    silent = dsa_model(dsa_config()).train()
    backward(silent, 1.0)
    assert all(grad is None for grad in indexer_grads(silent).values()) and indexer_grads(silent)
    others = [p.grad for name, p in silent.named_parameters() if ".indexer." not in name]
    assert all(grad is not None and grad.abs().sum() > 0 for grad in others)

    trained = dsa_model(dsa_config(dsa_indexer_loss_coeff=0.7, dsa_indexer_use_sparse_loss=True)).train()
    backward(trained, 1.0)
    with_lm = indexer_grads(trained)
    for name, param in trained.named_parameters():  # the indexer's inputs are detached: its loss stays in it
        if ".indexer." not in name:
            torch.testing.assert_close(param.grad, dict(silent.named_parameters())[name].grad, rtol=0, atol=0)
    backward(trained, 0.0)  # the same forward, the LM loss's gradient zero: the indexer loss's alone
    for name, grad in indexer_grads(trained).items():
        assert with_lm[name].abs().sum() > 0, name
        torch.testing.assert_close(with_lm[name], grad, rtol=0, atol=0)


def test_indexer_loss_is_tracked_per_computing_layer() -> None:
    config = dsa_config(dsa_indexer_loss_coeff=0.5, dsa_indexer_topk_freq=2)  # layers 0 and 2 compute, 1 shares
    model = dsa_model(config).train()
    backward(model, 1.0)
    tracked = {name: module.tracked_aux_losses for name, module in model.named_modules()
               if getattr(module, "tracked_aux_losses", None)}
    assert sorted(tracked) == ["decoder.layers.0.self_attention", "decoder.layers.2.self_attention"]
    assert all(value["indexer loss"] > 0 for value in tracked.values())


def test_dense_warmup_attends_like_dense_mla() -> None:
    """Under --dsa-dense-warmup the logits are those of plain MLA with the same weights; without it they differ
    (the top-k of 3 drops keys)."""
    warm = dsa_model(dsa_config(dsa_dense_warmup=True, dsa_indexer_loss_coeff=1.0)).eval()
    sparse = dsa_model(dsa_config()).eval()
    plain_config = dsa_config(experimental_attention_variant=None, dsa_indexer_n_heads=None,
                              dsa_indexer_head_dim=None, dsa_indexer_topk=None)
    plain = build_model(plain_config, layout_state(1), torch.device("cpu"), seed=0)
    state = {name: value for name, value in warm.state_dict().items() if ".indexer." not in name}
    plain.load_state_dict(state, strict=True)
    sparse.load_state_dict(warm.state_dict(), strict=True)
    with torch.no_grad():
        dense_logits = plain.eval()(tokens())
        torch.testing.assert_close(warm(tokens()), dense_logits, rtol=0, atol=1e-6)
        assert (sparse(tokens()) - dense_logits).abs().max() > 1e-3


def test_a_sharing_layer_attends_with_its_source_selection() -> None:
    """GLM-5's sharing: layer 1 reuses layer 0's top-k. Giving layer 1 an indexer of its own (the same model but
    every layer computing) changes the logits."""
    shared = dsa_model(dsa_config(dsa_indexer_topk_freq=2)).eval()
    assert shared.decoder.layers["1"].self_attention.indexer is None
    own = dsa_model(dsa_config()).eval()
    own.load_state_dict(shared.state_dict(), strict=False)
    with torch.no_grad():
        assert (shared(tokens()) - own(tokens())).abs().max() > 1e-4


@pytest.mark.parametrize("overrides, message", [
    (dict(multi_latent_attention=False, q_lora_rank=None, kv_lora_rank=None), "attends on top of multi-latent"),
    (dict(dsa_indexer_topk=None), "needs a positive --dsa-indexer-topk"),
    (dict(dsa_indexer_head_dim=2), "must hold the 4 rotary dims"),
    (dict(sliding_window=4), "does not support --sliding-window"),
    (dict(dsa_dense_warmup=True), "--dsa-dense-warmup shapes the indexer loss"),
    (dict(dsa_indexer_use_sparse_loss=True, dsa_dense_warmup=True, dsa_indexer_loss_coeff=1.0), "drop one"),
    (dict(experimental_attention_variant=None), "--dsa-indexer-n-heads applies to DeepSeek Sparse Attention"),
    (dict(linear_attention_freq="2"), "drop --linear-attention-freq"),
])
def test_bad_dsa_settings_are_one_line(overrides, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as error:
        dsa_config(**overrides)
    assert "\n" not in str(error.value)


def test_sharing_across_a_pipeline_stage_is_refused() -> None:
    from core.transformer.block import TransformerBlock

    config = dsa_config(dsa_indexer_topk_freq=2)  # layer 1 reuses layer 0's top-k
    with torch.device("meta"), pytest.raises(ValueError, match="DSA layer 1 reuses layer 0's top-k"):
        TransformerBlock(config, layout_state(1), [1, 2], post_process=True)
    with torch.device("meta"):
        TransformerBlock(dataclasses.replace(config), layout_state(1), [2], post_process=True)


WARMUP_RUN = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--ffn-hidden-size", "48",
              "--seq-length", "12", "--max-position-embeddings", "64", "--vocab-size", "64", "--swiglu",
              "--normalization", "RMSNorm", "--disable-bias-linear", "--position-embedding-type", "rope",
              "--multi-latent-attention", "--q-lora-rank", "16", "--kv-lora-rank", "12", "--qk-head-dim", "8",
              "--qk-pos-emb-head-dim", "4", "--v-head-dim", "8", "--experimental-attention-variant", "dsa",
              "--dsa-indexer-n-heads", "2", "--dsa-indexer-head-dim", "8", "--dsa-indexer-topk", "4",
              "--dsa-indexer-loss-coeff", "1.0", "--micro-batch-size", "2", "--global-batch-size", "4",
              "--train-iters", "1", "--lr", "0.01", "--weight-decay", "0.1", "--mock-data",
              "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu", "--distributed-backend",
              "gloo", "--eval-iters", "0", "--hidden-dropout", "0", "--attention-dropout", "0"]


@pytest.mark.parametrize("warmup", [True, False])
def test_a_training_step_of_each_stage(warmup: bool) -> None:
    """Through the trainer: the warm-up step (AdamW with weight decay) moves the indexers' parameters and nothing
    else; the sparse step moves every parameter. Both log the indexer loss beside the LM loss."""
    from mindspeed_llm.training.training import setup

    trainer = setup(WARMUP_RUN + (["--dsa-dense-warmup"] if warmup else []))
    before = {name: param.detach().clone() for name, param in trainer.model.named_parameters()}
    stats = trainer.train_step(trainer.train_iterator()).stats
    assert stats["indexer loss"] > 0 and stats["lm loss"] > 0
    for name, param in trainer.model.named_parameters():
        moved = not torch.equal(param.detach(), before[name])
        assert moved == (".indexer." in name or not warmup), (name, moved)


@pytest.mark.parametrize("config_class, model_type", [("DeepseekV32Config", "deepseek32"),
                                                      ("GlmMoeDsaConfig", "glm_moe_dsa"),
                                                      ("DeepseekV3Config", "deepseek3")])
def test_an_unread_quantisation_is_refused_in_one_line(config_class: str, model_type: str, tmp_path, capsys) -> None:
    """The published DeepSeek-V3/V3.2 and GLM-5 checkpoints are E4M3 blocks with scales, which the converter
    dequantises (tests/unit/test_convert_quantized.py); a quantisation it does not read (E5M2 here) is refused in
    one line, naming the fix, and nothing is written."""
    import json
    import os

    import transformers

    from tools.convert_ckpt import main as convert_main

    hf_dir, save = tmp_path / "hf", tmp_path / "mg"
    config = getattr(transformers, config_class)(num_hidden_layers=2, hidden_size=32, intermediate_size=48,
                                                 moe_intermediate_size=16, n_routed_experts=4, num_experts_per_tok=2,
                                                 n_group=1, topk_group=1, num_attention_heads=4, num_key_value_heads=4,
                                                 q_lora_rank=16, kv_lora_rank=12, qk_nope_head_dim=8,
                                                 qk_rope_head_dim=4, v_head_dim=8, vocab_size=64)
    getattr(transformers, config_class.replace("Config", "ForCausalLM"))(config).save_pretrained(hf_dir)
    settings = json.load(open(hf_dir / "config.json"))
    settings["quantization_config"] = {"quant_method": "fp8", "fmt": "e5m2", "weight_block_size": [128, 128]}
    json.dump(settings, open(hf_dir / "config.json", "w"))
    code = convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", str(hf_dir),
                         "--save-dir", str(save), "--model-type-hf", model_type])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert code != 0 and len(errors) == 1 and "quantization_config (quant_method 'fp8')" in errors[0]
    assert "bf16 copy" in errors[0] and not os.path.exists(save)
