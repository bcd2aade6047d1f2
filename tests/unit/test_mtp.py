"""Multi-token prediction: each depth's loss against an independent reimplementation, the weight map, flag errors.

The reference is written from DeepSeek-V3's description with transformers' Llama layers and no
rolling: depth k runs on the first ``s - k`` positions, with the tokens ``tokens[:, k:]`` and the
labels ``labels[:, k:]``; its transformer layer is HF layer ``L + k - 1`` of a Llama with ``L + D``
layers, loaded through the registry's Llama rules plus :func:`mtp_weight_rules` (so the DeepSeek-V3
names are exercised too). Our model computes on the full length with shifted, zero-filled tokens;
the causal mask makes the first ``s - k`` positions equal.
"""
from __future__ import annotations

from typing import Dict, List

import pytest
import torch
import torch.nn.functional as F
import transformers

from core.models.gpt_model import build_model, layout_state
from core.tensor_parallel.param_meta import param_meta
from core.transformer.config import TransformerConfig
from core.transformer.multi_token_prediction import collect_mtp_losses, mtp_loss, roll_left
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.models.registry import (LLAMA_WEIGHTS, RegistryError, TensorContext, find_rule, get_family,
                                           mtp_weight_rules, to_hf, to_ours)

LAYERS, DEPTH, VOCAB, SEQ = 2, 2, 61, 12


def _config(**overrides: object) -> TransformerConfig:
    kwargs = dict(num_layers=LAYERS, hidden_size=32, num_attention_heads=4, num_query_groups=2, ffn_hidden_size=64,
                  vocab_size=VOCAB, position_embedding_type="rope", normalization="RMSNorm", activation="swiglu",
                  add_bias_linear=False, untie_embeddings_and_output_weights=True, hidden_dropout=0.0,
                  attention_dropout=0.0, mtp_num_layers=DEPTH, make_vocab_size_divisible_by=1, norm_epsilon=1e-6)
    kwargs.update(overrides)
    return TransformerConfig(**kwargs)


def _to_hf(model: torch.nn.Module, cfg: TransformerConfig) -> Dict[str, torch.Tensor]:
    """HF tensors of ``model`` (TP 1) by the Llama rules and the MTP rules, as the converter maps them."""
    rules = mtp_weight_rules(cfg) + LLAMA_WEIGHTS
    hf = {}
    for name, param in model.named_parameters():
        rule, names = find_rule(rules, name)
        shard = param_meta(param).tp_shard
        splits = tuple(seg.size for seg in shard.segments) if shard is not None else ()
        pieces = to_hf(rule, param.detach(), TensorContext(splits, cfg.vocab_size, cfg.padded_vocab_size, cfg))
        assert len(pieces) == len(names), name
        hf.update(zip(names, pieces))
    return hf


def _reference_losses(hf: Dict[str, torch.Tensor], cfg: TransformerConfig, tokens: torch.Tensor,
                      labels: torch.Tensor) -> List[torch.Tensor]:
    """Per-token losses ``[b, s]`` of the main head, then ``[b, s - k]`` of depth k = 1..D."""
    hf_config = transformers.LlamaConfig(**{**get_family("llama").to_hf_config(cfg),
                                            "num_hidden_layers": LAYERS + DEPTH})
    hf_config._attn_implementation = "sdpa"  # causal without a mask
    llama = transformers.LlamaForCausalLM(hf_config).eval()
    missing, unexpected = llama.load_state_dict({k: v for k, v in hf.items() if k in llama.state_dict()}, strict=False)
    assert not missing and not unexpected

    def rms(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x32 = x.float()
        return weight * (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + cfg.norm_epsilon))

    def ce(hidden: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        logits = hidden @ hf["lm_head.weight"].t()  # [b, n, v]
        return F.cross_entropy(logits.transpose(1, 2), target, reduction="none")  # [b, n]

    with torch.no_grad():
        states = llama.model(tokens, output_hidden_states=True).hidden_states  # embeddings, then each layer's output
        hidden = llama.model.norm(states[LAYERS])  # [b, s, h]: the first L layers, then the final norm
        losses = [ce(hidden, labels)]
        for k in range(1, DEPTH + 1):
            n, prefix = SEQ - k, f"model.layers.{LAYERS + k - 1}."
            embedded = llama.model.embed_tokens(tokens[:, k:])  # [b, n, h]: token i + k at position i
            x = torch.cat([rms(embedded, hf[prefix + "enorm.weight"]), rms(hidden[:, :n], hf[prefix + "hnorm.weight"])],
                          dim=-1) @ hf[prefix + "eh_proj.weight"].t()
            positions = torch.arange(n).unsqueeze(0)
            rotary = llama.model.rotary_emb(x, positions)
            x = llama.model.layers[LAYERS + k - 1](x, attention_mask=None, position_ids=positions,
                                                   position_embeddings=rotary)
            x = x[0] if isinstance(x, tuple) else x
            hidden = rms(x, hf[prefix + "shared_head.norm.weight"])
            assert torch.equal(hf[prefix + "shared_head.head.weight"], hf["lm_head.weight"])
            losses.append(ce(hidden, labels[:, k:]))
    return losses


def test_each_depth_matches_reference() -> None:
    cfg = _config()
    model = build_model(cfg, layout_state(), torch.device("cpu"), seed=3).eval()
    generator = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, VOCAB, (2, SEQ), generator=generator)
    labels = torch.randint(0, VOCAB, (2, SEQ), generator=generator)
    with torch.no_grad():
        main = model(tokens, labels=labels)
    ours = [main] + collect_mtp_losses(model)
    reference = _reference_losses(_to_hf(model, cfg), cfg, tokens, labels)
    assert len(ours) == len(reference) == DEPTH + 1
    for k, (mine, ref) in enumerate(zip(ours, reference)):
        valid = ref.size(1)
        diff = (mine[:, :valid] - ref).abs().max().item()
        assert diff < 1e-5, f"depth {k}: max abs diff {diff}"
    # the loss: scaling / D * sum of the depths' means over the shifted mask (here: one padded tail token)
    mask = torch.ones(2, SEQ)
    mask[:, -1] = 0
    total, means = mtp_loss(collect_mtp_losses(model), mask, 0.3)
    expected = [ref[:, :SEQ - 1 - k].mean() for k, ref in enumerate(reference[1:], start=1)]
    torch.testing.assert_close(torch.stack(means), torch.stack(expected), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(total, 0.3 / DEPTH * torch.stack(expected).sum(), rtol=1e-5, atol=1e-6)


def test_mtp_gradients_reach_every_parameter() -> None:
    model = build_model(_config(), layout_state(), torch.device("cpu"), seed=3)
    tokens = torch.randint(0, VOCAB, (2, SEQ))
    model(tokens, labels=tokens).mean().backward(retain_graph=True)
    mtp_only = [n for n, p in model.named_parameters() if n.startswith("mtp.") and p.grad is not None]
    assert not mtp_only  # the LM loss alone does not reach the MTP modules
    model.zero_grad()
    total, _ = mtp_loss(collect_mtp_losses(model), torch.ones(2, SEQ), 0.1)
    total.backward()
    for name, param in model.named_parameters():
        if name.startswith("mtp.") or name.startswith("embedding") or name.startswith("output_layer"):
            assert param.grad is not None and param.grad.abs().sum() > 0, name


def test_full_recompute_gives_the_same_gradients(monkeypatch) -> None:
    from core.transformer import multi_token_prediction

    calls = []
    original = multi_token_prediction.checkpoint
    monkeypatch.setattr(multi_token_prediction, "checkpoint", lambda *args: calls.append(1) or original(*args))
    grads = []
    for extra in ({}, dict(recompute_granularity="full", recompute_method="uniform", recompute_num_layers=1)):
        model = build_model(_config(**extra), layout_state(), torch.device("cpu"), seed=3)
        tokens = torch.arange(2 * SEQ).view(2, SEQ) % VOCAB
        model(tokens, labels=tokens)
        mtp_loss(collect_mtp_losses(model), torch.ones(2, SEQ), 0.1)[0].backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if n.startswith("mtp.")})
    assert len(calls) == DEPTH  # the second model's MTP layers only
    for name, grad in grads[0].items():
        torch.testing.assert_close(grads[1][name], grad, rtol=0, atol=0, msg=name)


def test_roll_left_zero_fills_the_tail() -> None:
    assert roll_left(torch.tensor([[1, 2, 3], [4, 5, 6]])).tolist() == [[2, 3, 0], [5, 6, 0]]


def test_no_labels_no_mtp() -> None:
    model = build_model(_config(), layout_state(), torch.device("cpu"), seed=3)
    logits = model(torch.randint(0, VOCAB, (1, SEQ)))
    assert logits.shape == (1, SEQ, VOCAB) and collect_mtp_losses(model) == []


def test_the_mtp_layer_is_built_as_the_last_decoder_layer() -> None:
    from core.transformer.mlp import MLP
    from core.transformer.moe.aux_losses import take_tracked_aux_losses
    from core.transformer.moe.moe_layer import MoELayer

    moe = dict(num_experts=4, moe_router_topk=2, moe_aux_loss_coeff=0.01)
    last_moe = build_model(_config(**moe), layout_state(), torch.device("cpu"), seed=3)
    assert all(isinstance(layer.transformer_layer.mlp, MoELayer) for layer in last_moe.mtp.layers)
    last_dense = build_model(_config(**moe, moe_layer_freq=2), layout_state(), torch.device("cpu"), seed=3)
    assert isinstance(last_dense.decoder.layers["0"].mlp, MoELayer)  # layer 0 MoE, layer 1 (the last) dense
    assert all(type(layer.transformer_layer.mlp) is MLP for layer in last_dense.mtp.layers)
    last_moe.train()
    last_moe(torch.randint(0, VOCAB, (2, SEQ)), labels=torch.randint(0, VOCAB, (2, SEQ)))
    routers = [m for m in last_moe.modules() if isinstance(m, MoELayer)]
    assert len(routers) == LAYERS + DEPTH  # the MTP layers' router losses count too (as Megatron's)
    per_layer = [m.tracked_aux_losses["load_balancing_loss"] for m in routers]
    assert all(value > 0 for value in per_layer)
    torch.testing.assert_close(take_tracked_aux_losses(last_moe.modules())["load_balancing_loss"], sum(per_layer))


def test_flops_count_the_mtp_modules() -> None:
    from mindspeed_llm.training.metrics import training_flops_per_token

    plain, mtp = training_flops_per_token(_config(mtp_num_layers=None), SEQ), training_flops_per_token(_config(), SEQ)
    h, logits = 32, 2 * 32 * VOCAB
    per_layer = (plain / 3 - logits) / LAYERS
    assert mtp == pytest.approx(plain + 3 * DEPTH * (2 * 2 * h * h + per_layer + logits))


# ----------------------------------------------------------------------------- weight map


def test_weight_rules_deepseek_v3_names_round_trip() -> None:
    cfg = _config()
    model = build_model(cfg, layout_state(), torch.device("cpu"), seed=3)
    hf = _to_hf(model, cfg)
    for k in range(DEPTH):
        prefix = f"model.layers.{LAYERS + k}."
        for suffix in ("enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight",
                       "shared_head.head.weight", "embed_tokens.weight", "self_attn.q_proj.weight",
                       "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"):
            assert prefix + suffix in hf, prefix + suffix
        assert torch.equal(hf[prefix + "embed_tokens.weight"], hf["model.embed_tokens.weight"])
        assert hf[prefix + "eh_proj.weight"].shape == (32, 64)
    rules = mtp_weight_rules(cfg) + LLAMA_WEIGHTS
    ctx = TensorContext(vocab_size=VOCAB, padded_vocab_size=cfg.padded_vocab_size, config=cfg)
    for name, param in model.state_dict().items():
        rule, names = find_rule(rules, name)
        if rule.transform in ("copy", "vocab_copies"):
            assert torch.equal(to_ours(rule, [hf[n] for n in names], ctx), param), name


def test_weight_rules_refuse_differing_copies_and_tied_embeddings() -> None:
    cfg = _config()
    rule, names = find_rule(mtp_weight_rules(cfg), "embedding.word_embeddings.weight")
    assert len(names) == 1 + DEPTH
    ctx = TensorContext(vocab_size=VOCAB, padded_vocab_size=VOCAB, config=cfg)
    main = torch.randn(VOCAB, 32)
    with pytest.raises(RegistryError, match="copy of the word embeddings"):
        to_ours(rule, [main, main, main + 1], ctx)
    with pytest.raises(RegistryError, match="tied word embeddings"):
        mtp_weight_rules(_config(untie_embeddings_and_output_weights=False))
    assert mtp_weight_rules(_config(mtp_num_layers=None)) == ()


# ----------------------------------------------------------------------------- flags

BASE = ["--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
        "--micro-batch-size", "2", "--train-iters", "10", "--lr", "1e-3", "--position-embedding-type", "rope"]


def _error(*extra: str, world_size: int = 1) -> str:
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(BASE + list(extra)), world_size)
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("extra, needle", [
    (["--mtp-num-layers", "0"], "--mtp-num-layers 0 must be at least 1"),
    (["--mtp-loss-scaling-factor", "0.3"], "--mtp-loss-scaling-factor has no effect without --mtp-num-layers"),
    (["--mtp-num-layers", "1", "--mtp-loss-scaling-factor", "-1"], "--mtp-loss-scaling-factor -1.0 must be 0"),
    (["--mtp-num-layers", "1", "--position-embedding-type", "learned_absolute", "--max-position-embeddings", "16"],
     "--mtp-num-layers does not support --position-embedding-type learned_absolute"),
    (["--mtp-num-layers", "1", "--fp32-residual-connection"], "--mtp-num-layers does not support --fp32-residual"),
    (["--mtp-num-layers", "1", "--embed-layernorm"], "--mtp-num-layers does not support --embed-layernorm"),
])
def test_bad_flags_are_refused(extra: List[str], needle: str) -> None:
    assert needle in _error(*extra)


def test_flags_reach_the_config() -> None:
    from mindspeed_llm.arguments import set_vocab_size, transformer_config_from_args

    args = parse_args(BASE + ["--mtp-num-layers", "2", "--mtp-loss-scaling-factor", "0.3"])
    validate_args(args, 1)
    set_vocab_size(args, 64)
    cfg = transformer_config_from_args(args)
    assert (cfg.mtp_num_layers, cfg.mtp_loss_scaling_factor) == (2, 0.3)


# ----------------------------------------------------------------------------- training


def test_resume_is_exact_with_another_factor(tmp_path) -> None:
    """With dropout on, 2 steps, a checkpoint, then a resume with another --mtp-loss-scaling-factor (a loss
    weight, not architecture: accepted) give the third step's statistics of a straight run (``==``; the
    factor acts on the update, after them)."""
    from mindspeed_llm.training.training import setup

    argv = BASE + ["--mtp-num-layers", "2", "--mtp-loss-scaling-factor", "0.3", "--global-batch-size", "2",
                   "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--device", "cpu",
                   "--hidden-dropout", "0.1", "--attention-dropout", "0.1", "--eval-iters", "0", "--seed", "5",
                   "--untie-embeddings-and-output-weights", "--normalization", "RMSNorm", "--swiglu"]

    def steps(trainer, count):
        iterator = trainer.train_iterator()
        return [trainer.train_step(iterator).stats for _ in range(count)]

    straight = steps(setup(argv), 3)
    assert straight[0]["mtp_2 loss"] > 1.0 and straight[2]["mtp_1 loss"] != straight[0]["mtp_1 loss"]
    first = setup(argv)
    assert steps(first, 2) == straight[:2]
    first.args.save = str(tmp_path)
    first.save()
    resumed = setup(_replace(argv, "--mtp-loss-scaling-factor", "0.1") + ["--load", str(tmp_path)])
    assert resumed.iteration == 2 and steps(resumed, 1)[0] == straight[2]


def _replace(argv: List[str], flag: str, value: str) -> List[str]:
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


def _forward_step(factor: str) -> tuple:
    """The pretraining task's loss, statistics and MTP-module gradients on the first micro-batch, with
    ``--mtp-loss-scaling-factor factor`` (same seed, so the same weights and batch for every factor)."""
    from mindspeed_llm.training.training import setup

    trainer = setup(BASE + ["--mtp-num-layers", str(DEPTH), "--mtp-loss-scaling-factor", factor,
                            "--global-batch-size", "2", "--mock-data", "--tokenizer-type", "NullTokenizer",
                            "--vocab-size", "64", "--device", "cpu", "--hidden-dropout", "0", "--attention-dropout",
                            "0", "--eval-iters", "0", "--seed", "5", "--untie-embeddings-and-output-weights",
                            "--normalization", "RMSNorm", "--swiglu"])
    model = trainer.model
    loss, stats = trainer.task.forward_step(next(trainer.train_iterator()), model)
    loss.backward()
    grads = {n: p.main_grad.clone() for n, p in model.named_parameters() if n.startswith("mtp.")}  # the DP buffers
    return loss.detach(), stats, grads


def test_the_task_adds_the_scaled_mtp_loss() -> None:
    """The returned loss is ``lm loss + factor / D * sum_k mtp_k loss``, and the MTP modules' gradients (which the
    LM loss does not reach) scale with the factor: 3x at 0.3 what they are at 0.1."""
    low, high = _forward_step("0.1"), _forward_step("0.3")
    for factor, (loss, stats, _) in ((0.1, low), (0.3, high)):
        mtp = sum(stats[f"mtp_{k} loss"] for k in range(1, DEPTH + 1))
        assert stats["mtp_1 loss"] > 1.0
        torch.testing.assert_close(loss, stats["lm loss"] + factor / DEPTH * mtp, rtol=1e-6, atol=0)
    assert low[2] and low[2].keys() == high[2].keys()
    for name, grad in low[2].items():
        assert grad.abs().sum() > 0, name
        # fp32 rounding differs between the two backward passes: a tolerance of 1e-5 of the gradient's size
        torch.testing.assert_close(high[2][name], 3 * grad, rtol=1e-4, atol=3e-5 * float(grad.abs().max()))
