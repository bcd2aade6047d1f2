"""DeepSeek-V4's pieces beside the zoo's parity (``cases_deepseek_v4.py``): the family's reading of DeepSeek's own
config.json and its refusals, the config's one-line refusals, the compressor against a loop over windows (and a
left-padded row against the same tokens unpadded), the hyper-connections' Sinkhorn projection, the hash table, and
the CSA indexer's loss reaching the indexer only.

    python -m pytest tests/models/test_deepseek_v4.py -q
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict

import pytest
import torch

from core.models.gpt_model import build_model, layout_state
from core.transformer.compressed_attention import Compressor, TokenPlaces, entry_visible
from core.transformer.config import TransformerConfig
from core.transformer.hyper_connection import sinkhorn
from core.transformer.moe.router import hash_table
from mindspeed_llm.models.registry import RegistryError, get_family

# DeepSeek-V4-Flash's config.json as DeepSeek publishes it: flat rope keys, compress_ratios (with the MTP layer's
# trailing 0), num_hash_layers
FLASH: Dict[str, Any] = {
    "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4", "hidden_size": 4096, "head_dim": 512,
    "num_hidden_layers": 43, "num_attention_heads": 64, "num_key_value_heads": 1, "q_lora_rank": 1024,
    "qk_rope_head_dim": 64, "o_groups": 8, "o_lora_rank": 1024, "index_n_heads": 64, "index_head_dim": 128,
    "index_topk": 512, "sliding_window": 128, "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
    "n_routed_experts": 256, "num_experts_per_tok": 6, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "scoring_func": "sqrtsoftplus", "routed_scaling_factor": 1.5, "num_hash_layers": 3, "swiglu_limit": 10.0,
    "rope_theta": 10000, "compress_rope_theta": 160000, "max_position_embeddings": 1048576, "vocab_size": 129280,
    "rope_scaling": {"beta_fast": 32, "beta_slow": 1, "factor": 16, "original_max_position_embeddings": 65536,
                     "type": "yarn"},
    "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "num_nextn_predict_layers": 1,
    "compress_ratios": [0, 0] + [4, 128] * 20 + [4, 0]}


def test_flash_config_json_reads_as_its_fields() -> None:
    config = TransformerConfig(**get_family("deepseek4").to_config(FLASH))
    assert config.compressed_attention_pattern == "SS" + "CH" * 20 + "C"
    assert (config.csa_compress_ratio, config.hca_compress_ratio, config.sliding_window) == (4, 128, 128)
    assert (config.kv_channels, config.num_query_groups, config.rope_dims(False)) == (512, 1, 64)
    assert (config.rotary_base, config.local_rotary_base, config.rope_scaling_type) == (160000.0, 10000.0, "yarn")
    assert (config.rope_scaling_factor, config.rope_original_max_position_embeddings) == (16.0, 65536)
    assert (config.o_groups, config.o_lora_rank, config.dsa_indexer_topk) == (8, 1024, 512)
    assert (config.mhc_num_residual_streams, config.mhc_sinkhorn_iterations) == (4, 20)
    assert (config.moe_hash_layers, config.moe_router_score_function, config.activation_func_clamp_value) == \
        (3, "sqrtsoftplus", 10.0)
    assert config.moe_router_topk_scaling_factor == 1.5 and config.norm_topk_prob and config.mtp_num_layers == 1


@pytest.mark.parametrize("change, fragment", [
    ({"num_key_value_heads": 2}, "one key/value head"),
    ({"scoring_func": "softmax"}, "scoring_func='softmax'"),
    ({"mlp_layer_types": ["moe", "hash_moe"] + ["moe"] * 41}, "leading run of hash_moe"),
    ({"compress_ratios": None, "layer_types": ["full_attention"] * 43}, "layer_types"),
    ({"quantization_config": {"quant_method": "fp8", "fmt": "e5m2"}}, "quantization_config"),
])
def test_family_refuses_in_one_line(change: Dict[str, Any], fragment: str) -> None:
    with pytest.raises(RegistryError, match=None) as error:
        get_family("deepseek_v4").to_config({**FLASH, **change})
    assert fragment in str(error.value) and "\n" not in str(error.value)


TINY = dict(num_layers=3, hidden_size=32, num_attention_heads=4, vocab_size=64, add_bias_linear=False,
            compressed_attention_pattern="CHS", num_query_groups=1, kv_channels=8, rotary_percent=0.5,
            rope_interleaved=True, q_lora_rank=8, sliding_window=3, csa_compress_ratio=2, hca_compress_ratio=4,
            o_groups=2, o_lora_rank=4, dsa_indexer_n_heads=2, dsa_indexer_head_dim=4, dsa_indexer_topk=2,
            enable_mhc_connections=True, mhc_num_residual_streams=2, num_experts=4, moe_router_topk=2,
            moe_hash_layers=1, moe_router_score_function="sqrtsoftplus", ffn_hidden_size=16, attention_dropout=0.0,
            hidden_dropout=0.0)


@pytest.mark.parametrize("change, fragment", [
    ({"dsa_indexer_topk": None}, "--dsa-indexer-topk"),
    ({"o_groups": 3}, "--o-groups 3"),
    ({"o_groups": 1, "tensor_model_parallel_size": 2}, "--o-groups 1"),
    ({"num_query_groups": 2}, "--num-query-groups 1"),
    ({"sliding_window": None}, "--sliding-window"),
    ({"multi_latent_attention": True, "kv_lora_rank": 4}, "--multi-latent-attention"),
    ({"dsa_dense_warmup": True, "dsa_indexer_loss_coeff": 1.0}, "--dsa-dense-warmup"),
    ({"moe_hash_layers": 4}, "--moe-hash-layers 4"),
    ({"first_k_dense_replace": 1}, "--moe-hash-layers 1"),
    ({"compressed_attention_pattern": "CHX"}, "one letter per layer"),
    ({"compressed_attention_pattern": "CSS"}, "--hca-compress-ratio sizes the entries"),
    ({"compressed_attention_pattern": "CHC", "hca_compress_ratio": 4, "local_rotary_base": 500.0},
     "--local-rotary-base is the RoPE base"),
])
def test_config_refuses_in_one_line(change: Dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError) as error:
        TransformerConfig(**{**TINY, **change})
    assert fragment in str(error.value) and "\n" not in str(error.value)


def _loop_pool(compressor: Compressor, rows: torch.Tensor) -> torch.Tensor:
    """The entries ``[W, b, d]`` of one contiguous row set ``rows`` [s, b, 2 width], window by window."""
    ratio, dim = compressor.ratio, compressor.dim
    kv, gate = rows.chunk(2, dim=-1)
    bias = compressor.position_bias[:, None, :]  # [ratio, 1, width]
    entries = []
    for w in range(rows.size(0) // ratio):
        window = slice(w * ratio, (w + 1) * ratio)
        values, logits = kv[window], gate[window] + bias  # [ratio, b, width]
        if compressor.overlap:
            previous = slice((w - 1) * ratio, w * ratio)
            values = values[..., dim:]
            logits = logits[..., dim:]
            if w > 0:
                values = torch.cat([kv[previous][..., :dim], values])
                logits = torch.cat([(gate[previous] + bias)[..., :dim], logits])
        weights = torch.softmax(logits, dim=0)
        entries.append(compressor.kv_layernorm((weights * values).sum(0)))
    return torch.stack(entries)


@pytest.mark.parametrize("overlap", [False, True])
def test_compressor_pools_each_window_as_a_loop_does(overlap: bool) -> None:
    torch.manual_seed(0)
    config = TransformerConfig(**TINY)
    compressor = Compressor(config, 8, 3, overlap)
    with torch.no_grad():
        for param in compressor.parameters():
            param.normal_()
    rows = torch.randn(9, 2, 4 * compressor.dim if overlap else 2 * compressor.dim)  # [s, b, 2 width]
    positions = torch.arange(9).expand(2, 9)
    pooled = compressor.pool(rows, TokenPlaces(positions, torch.ones(2, 9, dtype=torch.bool), positions, 9), 3)
    torch.testing.assert_close(pooled, _loop_pool(compressor, rows))
    # the same tokens left-padded by two slots in row 1: its entries are the unpadded ones
    padded = torch.cat([torch.randn(2, 2, rows.size(-1)), rows], dim=0)  # [11, b, 2 width]
    valid = torch.ones(2, 11, dtype=torch.bool)
    valid[1, :2] = False
    valid[0, 9:] = False  # row 0 holds its 9 tokens first, then two padding slots
    padded[:9, 0] = rows[:, 0]
    places = torch.stack([torch.cat([torch.arange(9), torch.zeros(2, dtype=torch.long)]),
                          torch.cat([torch.zeros(2, dtype=torch.long), torch.arange(9)])])
    torch.testing.assert_close(compressor.pool(padded, TokenPlaces(places, valid, places, 9), 3), pooled)


def test_entries_become_visible_when_their_window_ends() -> None:
    seen = entry_visible(torch.arange(8)[None], 4, 2)[0]  # [s, W]
    assert seen.sum(-1).tolist() == [0, 1, 1, 2, 2, 3, 3, 4]


def test_sinkhorn_tends_to_doubly_stochastic() -> None:
    comb = torch.rand(5, 4, 4) + 0.1
    projected = sinkhorn(comb, 50, 1e-9)
    torch.testing.assert_close(projected.sum(-1), torch.ones(5, 4), atol=1e-5, rtol=0)
    torch.testing.assert_close(projected.sum(-2), torch.ones(5, 4), atol=1e-5, rtol=0)


def test_hash_table_gives_distinct_experts_per_token() -> None:
    table = hash_table(1000, 6, 256)
    assert table.shape == (1000, 6) and all(len(set(row.tolist())) == 6 for row in table)
    assert len({tuple(row.tolist()) for row in table[:100]}) > 50 and int(table.max()) < 256


def _grads(config: TransformerConfig, tokens: torch.Tensor) -> Dict[str, torch.Tensor]:
    model = build_model(config, layout_state(), torch.device("cpu"), seed=3).train()
    model(tokens, labels=tokens.roll(-1, 1)).mean().backward()
    return {name: param.grad for name, param in model.named_parameters()}


def test_indexer_loss_reaches_the_indexer_only() -> None:
    """The LM loss never reaches the CSA indexer (its picks are discrete); its KL loss reaches only it."""
    tokens = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    plain = _grads(TransformerConfig(**TINY), tokens)
    trained = _grads(dataclasses.replace(TransformerConfig(**TINY), dsa_indexer_loss_coeff=0.5), tokens)
    indexer = [name for name in plain if ".indexer." in name]
    assert indexer and all(plain[name] is None for name in indexer)
    assert all(trained[name] is not None and trained[name].abs().max() > 0 for name in indexer)
    for name, grad in plain.items():
        if name not in indexer:
            torch.testing.assert_close(trained[name], grad, msg=name)


def test_aligned_runs_decide_the_cp_path() -> None:
    """Window-aligned runs per rank (each pools its own entries) or None (every rank's share summed over CP)."""
    from core.transformer.compressed_attention import aligned_runs
    from core.transformer.context_parallel import token_positions

    assert aligned_runs(token_positions(16, 2, 0), 4) == [(0, 4), (12, 4)]
    assert aligned_runs(token_positions(16, 2, 1), 4) == [(4, 8)]  # its two chunks meet
    # CP 3, chunks of 2: rank 2's merged run (4, 4) aligns, rank 0's (0, 2) does not -- all ranks must fall back
    assert [aligned_runs(token_positions(12, 3, r), 4) is None for r in range(3)] == [True, True, False]


def _blocked_run(config: TransformerConfig, tokens: torch.Tensor, block: int) -> Dict[str, torch.Tensor]:
    """Loss and every gradient with the compressed attention run ``block`` queries at a time."""
    from core.transformer.compressed_attention import CompressedAttention

    model = build_model(config, layout_state(), torch.device("cpu"), seed=3).train()
    layers = [m for m in model.modules() if isinstance(m, CompressedAttention)]
    assert len(layers) == config.num_layers
    for layer in layers:
        layer.block = block
    loss = model(tokens, labels=tokens.roll(-1, 1)).mean()
    loss.backward()
    return {"loss": loss.detach(), **{name: param.grad for name, param in model.named_parameters()
                                      if param.grad is not None}}


@pytest.mark.parametrize("indexer", ["none", "dense", "sparse"])
def test_blocks_of_queries_equal_one_block(indexer: str) -> None:
    """The attention run in blocks of 5 queries (a window band, HCA's visible entries, CSA's gathered picks per
    block, each block under checkpointing) gives the loss and gradients of one block over the whole sequence, which
    the zoo's parity holds to transformers; with the indexer's dense or sparse KL loss too."""
    change = {"none": {}, "dense": {"dsa_indexer_loss_coeff": 0.5},
              "sparse": {"dsa_indexer_loss_coeff": 0.5, "dsa_indexer_use_sparse_loss": True}}[indexer]
    config = dataclasses.replace(TransformerConfig(**TINY), sliding_window=4, **change)
    tokens = torch.randint(0, 64, (2, 23), generator=torch.Generator().manual_seed(1))
    whole, blocked = _blocked_run(config, tokens, 1024), _blocked_run(config, tokens, 5)
    assert set(whole) == set(blocked)
    for name, value in whole.items():
        torch.testing.assert_close(blocked[name], value, rtol=1e-5, atol=1e-6, msg=name)


def test_compressed_attention_memory_grows_linearly() -> None:
    """Doubling the sequence (blocks of 32 queries, a window of 16, CSA top-8 of entries of 4, HCA entries of 64)
    doubles the model's peak in the forward and backward; one block over the whole sequence (s x s scores) grows
    about four times and is over 8 times larger at 1024 tokens."""
    from core.memory_probe import MemoryProbe

    dense = {key: value for key, value in TINY.items() if not key.startswith(("moe_", "num_experts", "enable_mhc",
                                                                             "mhc_"))}
    config = TransformerConfig(**{**dense, "sliding_window": 16, "csa_compress_ratio": 4, "hca_compress_ratio": 64,
                                  "dsa_indexer_topk": 8})
    peaks = {}
    for block in (32, 4096):  # 4096: one block, the whole s x (s + entries) scores at once
        for length in (512, 1024):
            tokens = torch.randint(0, 64, (1, length), generator=torch.Generator().manual_seed(0))
            model = build_model(config, layout_state(), torch.device("cpu"), seed=3).train()
            for module in model.modules():
                if hasattr(module, "block"):
                    module.block = block
            probe = MemoryProbe()
            with probe.measuring():
                model(tokens, labels=tokens.roll(-1, 1)).mean().backward()
            peaks[block, length] = probe.peak_above_start()
    assert peaks[32, 1024] / peaks[32, 512] < 2.3, peaks
    assert peaks[4096, 1024] / peaks[4096, 512] > 3.5, peaks
    assert peaks[32, 1024] < peaks[4096, 1024] / 8, peaks


def _v4_mtp_reference(model: torch.nn.Module, tokens: torch.Tensor, labels: torch.Tensor) -> list:
    """DeepSeek-V4's MTP as its inference code writes it (sglang's DeepseekV4ModelNextN), on our modules' weights:
    ``e_proj(enorm(embed)) + h_proj(hnorm(stream))`` for every stream of the previous module's pre-head state, its
    decoder layer, then its own hyper head (``sigmoid(mixes * scale + base) + eps`` weights), ``shared_head.norm``
    and the shared output layer; module k predicts the tokens k + 1 ahead."""
    import torch.nn.functional as F

    captured = {}

    def keep(name, pick):
        def hook(_, args):
            captured.setdefault(name, pick(args))  # returns None: the arguments stay
        return hook

    handles = [model.decoder.hc_head.register_forward_pre_hook(keep("streams", lambda args: args[0])),
               model.mtp.layers[0].transformer_layer.register_forward_pre_hook(keep("rotary", lambda args: args[1:]))]
    model(tokens, labels=labels)
    for handle in handles:
        handle.remove()
    cfg, streams, losses = model.config, captured["streams"], []
    n, h = cfg.mhc_num_residual_streams, cfg.hidden_size
    ids, targets = tokens, labels
    for layer in model.mtp.layers:
        ids, targets = ids.roll(-1, 1), targets.roll(-1, 1)
        ids[:, -1], targets[:, -1] = 0, 0
        e_proj, h_proj = layer.eh_proj.weight.split(h, dim=1)
        embeds = F.linear(layer.enorm(model.embedding(ids, None)), e_proj)  # [s, b, h]
        per_stream = F.linear(layer.hnorm(streams.unflatten(-1, (n, h))), h_proj)  # [s, b, n, h]
        streams = layer.transformer_layer((embeds.unsqueeze(2) + per_stream).flatten(-2), *captured["rotary"])
        flat = streams.float()
        mixes = F.linear(flat, layer.hc_head.fn) * torch.rsqrt(flat.square().mean(-1, keepdim=True) + cfg.norm_epsilon)
        pre = torch.sigmoid(mixes * layer.hc_head.scale + layer.hc_head.base) + cfg.mhc_eps  # [s, b, n]
        hidden = layer.final_layernorm((pre.unsqueeze(-1) * streams.unflatten(-1, (n, h))).sum(2))
        logits = F.linear(hidden, model.output_layer.weight)[..., :cfg.vocab_size]  # [s, b, v] (not the padding)
        losses.append(F.cross_entropy(logits.transpose(0, 1).flatten(0, 1), targets.flatten(), reduction="none")
                      .view_as(targets))
    return losses


def test_mtp_under_hyper_connections_is_deepseek_v4s() -> None:
    """Two MTP modules on DeepSeek-V4's layers: each reads the previous state's hyper-connection streams (the
    decoder's before its head), its layer is a sliding-window one, and its losses equal the reference's."""
    from core.transformer.multi_token_prediction import collect_mtp_losses

    config = TransformerConfig(**{**TINY, "mtp_num_layers": 2, "untie_embeddings_and_output_weights": True,
                                  "local_rotary_base": 500.0, "normalization": "RMSNorm"})
    model = build_model(config, layout_state(), torch.device("cpu"), seed=3).eval()
    assert all(layer.transformer_layer.self_attention.kind == "S" for layer in model.mtp.layers)
    tokens = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(2))
    labels = tokens.roll(-1, 1)
    with torch.no_grad():
        expected = _v4_mtp_reference(model, tokens, labels)
        model(tokens, labels=labels)
        ours = collect_mtp_losses(model)
    assert len(ours) == 2
    for mine, theirs in zip(ours, expected):
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-5)
