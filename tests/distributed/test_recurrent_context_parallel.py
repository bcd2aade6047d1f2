"""Context parallelism of recurrent mixers equals one process: the state passed from CP rank to CP rank.

A training step of tiny models (fp32, two micro-batches): the loss and every parameter's gradient
(``main_grad``, unsharded over TP) at CP 2 and CP 4 must equal the single-process run within 1e-5 relative.
Models: pure Mamba2 (a chunk size of 3 that divides no CP run), pure Mamba1, and the hybrid
``M*M-`` (Mamba, attention, Mamba, MLP), the attention layer under the existing CP algorithms; the gated
DeltaNet alone (``GG``, a delta-rule chunk of 3) and in GPT layers beside gated attention (also with packed
documents and with TP 2 + SP), the short convolution (LFM2) beside attention (also with documents under
Ulysses), Kimi Delta Attention alone (``KK``) and beside multi-latent attention without positions (with
documents at CP 4, and at CP 2 x TP 2 + SP), and lightning attention alone (``LL``) and in MiniMax's layout
beside attention with post-norm, weighed residuals (with documents at CP 4, and at CP 2 x TP 2 + SP), and Falcon-H1's
``H-H-`` (Mamba2 and attention side by side, every muP scale: under Ulysses, with documents at CP 4, at CP 2 x TP 2
+ SP and at CP 2 x PP 2), and OLMo-Hybrid's DeltaNet layer (pre-norms, beta in (0, 2)) beside an attention layer
with output norms only (ring CP 2), and Griffin's recurrent block beside windowed attention (ring CP 2, with
documents at CP 4, at CP 2 x TP 2 + SP), and RWKV-4's time and channel mixing (their token shift and WKV
state relayed: ring CP 2, with documents at CP 4, at CP 2 x TP 2 + SP), and xLSTM's mLSTM (its matrix memory,
normaliser and running maximum relayed: the same three layouts), and Bailing's KDA (full-rank gates, the bounded
forget gate) beside MLA gated per head (ring CP 2, with documents at CP 4), and Zamba2's 'Z' layers (Mamba2 after the
shared attention block over [hidden; embeddings]: Ulysses CP 2, with documents at CP 4, at CP 2 x PP 2 with the
block on both stages, at CP 2 x TP 2 + SP), and DeepSeek Sparse Attention on MLA (not recurrent: the indexer's keys
gathered, the selected keys' latents fetched from their ranks), both stages with the indexer's KL loss (the sparse
loss at ring CP 2, with documents at CP 4 and at CP 2 x TP 2 + SP; the dense warm-up, its indexers alone trained, at
CP 2 and with documents at CP 4), and DeepSeek-V4's compressed attention (each query chunk's window of keys fetched
from its ranks, every rank's share of each compressed entry's pooling summed over CP; CSA, HCA and sliding layers with
the indexer's dense loss at ring CP 2, at CP 2 x TP 2 + SP and at CP 2 x PP 2, its sparse loss contiguous at CP 2 and
at ring CP 4, hyper-connections throughout; the CP ranks run the attention in blocks of 3 queries, the reference
in one block). Layouts:
the ring's load-balanced chunks (at CP 4 a chunk of 2 tokens, shorter than the conv's 3 carried inputs),
contiguous parts (the ring with ``--attention-mask-type general``), Ulysses and the
hybrid 2 x 2 (whose chain visits CP ranks 0, 2, 3, 1), CP 2 x TP 2 with sequence parallelism, CP 2 x PP 2,
CP 2 with full recompute (the relay runs again inside the recomputation); and packed
documents (``--reset-attention-mask``) with documents that cross CP chunk boundaries and boundaries where
a new one starts (checked on the data). In the same launches, a plain causal depthwise conv core (the
carry its last inputs only) over packed documents, balanced and contiguous: outputs and gradients of the
input and weights equal one process. One launch of 2 processes and one of 4.

    python -m pytest -q tests/distributed/test_recurrent_context_parallel.py
"""
from __future__ import annotations

from typing import Dict, Iterator, List, Optional, Tuple

import pytest
import torch

from core.launcher import run_distributed

COMMON = ["--seq-length", "16", "--max-position-embeddings", "16", "--vocab-size", "8", "--normalization", "RMSNorm",
          "--disable-bias-linear", "--micro-batch-size", "1", "--global-batch-size", "2", "--train-iters", "1",
          "--optimizer", "sgd", "--lr", "0.5", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3",
          "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000",
          "--hidden-dropout", "0", "--attention-dropout", "0", "--make-vocab-size-divisible-by", "1",
          "--init-method-std", "0.3", "--hidden-size", "16", "--num-attention-heads", "4"]
MAMBA2 = ["--num-layers", "2", "--hybrid-override-pattern", "MM", "--mamba-head-dim", "8", "--mamba-num-groups", "2",
          "--mamba-state-dim", "4", "--mamba-chunk-size", "3", "--position-embedding-type", "none"]
MAMBA1 = ["--num-layers", "2", "--hybrid-override-pattern", "MM", "--mamba-version", "1", "--mamba-state-dim", "4",
          "--mamba-d-conv", "3", "--mamba-dt-rank", "2", "--position-embedding-type", "none"]
HYBRID = ["--num-layers", "4", "--hybrid-override-pattern", "M*M-", "--mamba-head-dim", "8", "--mamba-num-groups", "1",
          "--mamba-state-dim", "4", "--mamba-chunk-size", "3", "--ffn-hidden-size", "32", "--swiglu",
          "--position-embedding-type", "rope"]
GDN_SIZES = ["--linear-num-key-heads", "2", "--linear-num-value-heads", "4", "--linear-key-head-dim", "4",
             "--linear-value-head-dim", "4", "--linear-chunk-size", "3"]
GDN = ["--num-layers", "2", "--hybrid-override-pattern", "GG", *GDN_SIZES, "--position-embedding-type", "none"]
# GPT layers, each with its MLP: a gated DeltaNet (or a short convolution) then gated attention
GDN_GPT = ["--num-layers", "2", "--experimental-attention-variant", "gated_delta_net", "--linear-attention-freq",
           "[1,0]", *GDN_SIZES, "--attention-output-gate", "--ffn-hidden-size", "32", "--swiglu",
           "--position-embedding-type", "rope"]
SHORT_CONV = ["--num-layers", "2", "--experimental-attention-variant", "short_conv", "--linear-attention-freq",
              "[1,0]", "--ffn-hidden-size", "32", "--swiglu", "--position-embedding-type", "rope"]
# OLMo-Hybrid's layers: a DeltaNet layer with pre-norms and beta in (0, 2) beside an attention layer with output
# norms only and full-width q/k norms
OLMO_HYBRID = [flag for flag in GDN_GPT if flag != "--attention-output-gate"] + [
    "--post-norm-only", "--linear-attention-pre-norm", "--linear-allow-neg-eigval", "--linear-norm-epsilon", "1e-5",
    "--qk-layernorm", "--qk-layernorm-full-width"]
# Kimi Delta Attention alone ('K' letters), and in GPT layers beside multi-latent attention without positions
KDA = ["--num-layers", "2", "--hybrid-override-pattern", "KK", *GDN_SIZES, "--position-embedding-type", "none"]
KDA_GPT = ["--num-layers", "2", "--experimental-attention-variant", "kda", "--linear-attention-freq", "[1,0]",
           *GDN_SIZES, "--multi-latent-attention", "--kv-lora-rank", "8", "--qk-head-dim", "4",
           "--qk-pos-emb-head-dim", "2", "--v-head-dim", "4", "--ffn-hidden-size", "32", "--swiglu",
           "--position-embedding-type", "none"]
# Bailing's layers: KDA with full-rank gates and the bounded forget gate beside MLA with a sigmoid gate per head
KDA_BAILING = KDA_GPT + ["--kda-full-rank-gates", "--kda-gate-lower-bound", "-3", "--attention-output-gate",
                         "--attention-output-gate-per-head"]
# lightning attention alone ('L' letters), and MiniMax's layout: GPT layers beside attention with post-norm residuals
LIGHTNING_SIZES = ["--linear-num-key-heads", "4", "--linear-num-value-heads", "4", "--linear-key-head-dim", "4",
                   "--linear-value-head-dim", "4", "--linear-chunk-size", "3"]
LIGHTNING = ["--num-layers", "2", "--hybrid-override-pattern", "LL", *LIGHTNING_SIZES, "--position-embedding-type",
             "none"]
LIGHTNING_GPT = ["--num-layers", "2", "--experimental-attention-variant", "lightning", "--linear-attention-freq",
                 "[1,0]", *LIGHTNING_SIZES, "--apply-residual-connection-post-layernorm", "--residual-alpha", "1.5",
                 "--residual-multiplier", "0.7", "--ffn-hidden-size", "32", "--swiglu", "--position-embedding-type",
                 "rope"]
# Falcon-H1's layers: a Mamba2 and an attention side by side ('H', one group shared by the TP ranks, the norm before
# the gate), each then an MLP, with every muP scale
FALCON_H1 = ["--num-layers", "4", "--hybrid-override-pattern", "H-H-", "--mamba-num-heads", "2", "--mamba-head-dim",
             "8", "--mamba-num-groups", "1", "--mamba-state-dim", "4", "--mamba-chunk-size", "3",
             "--mamba-norm-before-gate", "--ssm-multipliers", "0.5", "1.5", "0.8", "1.25", "0.9",
             "--ssm-in-multiplier", "1.2", "--ssm-out-multiplier", "0.6", "--attention-in-multiplier", "0.8",
             "--attention-out-multiplier", "1.3", "--mlp-multipliers", "0.75", "1.4", "--ffn-hidden-size", "32",
             "--swiglu", "--position-embedding-type", "rope"]
# Griffin's recurrent block (RecurrentGemma) in a GPT layer beside windowed attention: a recurrence width of 24
# in 4 gate blocks, a conv of 3
RG_LRU_GPT = ["--num-layers", "2", "--experimental-attention-variant", "rg_lru", "--linear-attention-freq", "[1,0]",
              "--lru-width", "24", "--lru-conv-width", "3", "--sliding-window", "6", "--ffn-hidden-size", "32",
              "--geglu", "--gelu-tanh", "--position-embedding-type", "rope"]
# RWKV-4: time mixing (24 wide) and channel mixing, twice, LayerNorm, the embedding norm, no positions
RWKV = ["--num-layers", "4", "--hybrid-override-pattern", "WCWC", "--rwkv-attention-size", "24", "--ffn-hidden-size",
        "32", "--position-embedding-type", "none", "--normalization", "LayerNorm", "--embed-layernorm"]
# xLSTM's mLSTM in GPT layers, each with its MLP: 2 heads of q/k 4 and v 6 wide, the gates capped, chunks of 3,
# every layer mLSTM (no positions)
XLSTM = ["--num-layers", "2", "--experimental-attention-variant", "mlstm", "--linear-attention-freq", "[1,1]",
         "--linear-num-key-heads", "2", "--linear-num-value-heads", "2", "--linear-key-head-dim", "4",
         "--linear-value-head-dim", "6", "--linear-chunk-size", "3", "--mlstm-gate-soft-cap", "4",
         "--ffn-hidden-size", "32", "--swiglu", "--position-embedding-type", "none"]
# Zamba2's 'Z' layers: Mamba2 after the one shared block (attention over [hidden; embeddings] with RoPE and
# every adapter, then a GeGLU MLP), which both 'Z' layers run (so at PP 2 each stage holds a copy)
ZAMBA = ["--num-layers", "4", "--hybrid-override-pattern", "ZMZM", "--mamba-head-dim", "8", "--mamba-num-groups", "1",
         "--mamba-state-dim", "4", "--mamba-chunk-size", "3", "--shared-block-adapter-rank", "2",
         "--shared-block-attention-adapters", "--ffn-hidden-size", "32", "--geglu", "--position-embedding-type", "rope",
         "--init-method-std", "0.1"]
# Zamba's 'Z' layers: Mamba1 of 2 independent SSMs (16 channels each, their own x_proj / dt_proj) after one
# shared block without adapters or positions
ZAMBA1 = ["--num-layers", "4", "--hybrid-override-pattern", "ZMZM", "--mamba-version", "1", "--mamba-num-heads", "2",
          "--mamba-head-dim", "16", "--mamba-state-dim", "4", "--mamba-dt-rank", "2", "--ffn-hidden-size", "32",
          "--geglu", "--position-embedding-type", "none", "--init-method-std", "0.1"]
# DeepSeek Sparse Attention on MLA (not recurrent: its CP gathers the indexer's keys and fetches the selected keys'
# latents from their ranks): the sparse stage with the indexer's sparse KL loss, and the dense warm-up (the ring's
# dense attention, the KL over every key gathered), a top-5 of 16 keys
DSA = ["--num-layers", "2", "--multi-latent-attention", "--q-lora-rank", "8", "--kv-lora-rank", "8", "--qk-head-dim",
       "4", "--qk-pos-emb-head-dim", "2", "--v-head-dim", "4", "--rope-interleaved", "--experimental-attention-variant",
       "dsa", "--dsa-indexer-n-heads", "2", "--dsa-indexer-head-dim", "4", "--dsa-indexer-topk", "5",
       "--dsa-indexer-loss-coeff", "0.5", "--ffn-hidden-size", "32", "--swiglu", "--position-embedding-type", "rope"]
DSA_SPARSE = DSA + ["--dsa-indexer-use-sparse-loss"]
DSA_WARMUP = DSA + ["--dsa-dense-warmup"]
# DeepSeek-V4's compressed attention (not recurrent: its CP fetches each query chunk's window of keys from their ranks
# and sums every rank's share of each compressed entry's softmax pooling): CSA (entries of 2 overlapping tokens, a
# top-3), HCA (entries of 4) and a sliding layer, the CSA indexer's dense or sparse KL loss, two hyper-connection
# streams (dense MLPs: MoE layers do not take context parallelism yet)
DEEPSEEK_V4 = ["--num-layers", "3", "--group-query-attention", "--num-query-groups", "1", "--kv-channels", "8",
               "--rotary-percent", "0.5", "--rope-interleaved", "--local-rotary-base", "500", "--q-lora-rank", "8",
               "--compressed-attention-pattern", "CHS", "--sliding-window", "5", "--csa-compress-ratio", "2",
               "--hca-compress-ratio", "4", "--o-groups", "2", "--o-lora-rank", "4", "--dsa-indexer-n-heads", "2",
               "--dsa-indexer-head-dim", "4", "--dsa-indexer-topk", "3", "--dsa-indexer-loss-coeff", "0.5",
               "--enable-mhc-connections", "--mhc-num-residual-streams", "2", "--ffn-hidden-size", "32", "--swiglu",
               "--position-embedding-type", "rope"]
DOCUMENTS = ["--reset-attention-mask", "--eod-mask-loss"]  # (positions restart too where a layer reads them)
MODELS = {"mamba2": MAMBA2, "mamba1": MAMBA1, "hybrid": HYBRID, "documents": MAMBA2 + DOCUMENTS,
          "gdn": GDN, "gdn_gpt": GDN_GPT,
          "gdn_gpt_documents": GDN_GPT + DOCUMENTS + ["--reset-position-ids"], "short_conv": SHORT_CONV,
          "short_conv_documents": SHORT_CONV + DOCUMENTS + ["--reset-position-ids"], "kda": KDA, "kda_gpt": KDA_GPT,
          "kda_gpt_documents": KDA_GPT + DOCUMENTS, "lightning": LIGHTNING, "lightning_gpt": LIGHTNING_GPT,
          "lightning_gpt_documents": LIGHTNING_GPT + DOCUMENTS + ["--reset-position-ids"], "falcon_h1": FALCON_H1,
          "olmo_hybrid": OLMO_HYBRID,
          "rwkv": RWKV, "rwkv_documents": RWKV + DOCUMENTS, "xlstm": XLSTM, "xlstm_documents": XLSTM + DOCUMENTS,
          "kda_bailing": KDA_BAILING, "kda_bailing_documents": KDA_BAILING + DOCUMENTS,
          "rg_lru_gpt": RG_LRU_GPT, "rg_lru_gpt_documents": RG_LRU_GPT + DOCUMENTS + ["--reset-position-ids"],
          "falcon_h1_documents": FALCON_H1 + DOCUMENTS + ["--reset-position-ids"], "zamba": ZAMBA,
          "zamba_documents": ZAMBA + DOCUMENTS + ["--reset-position-ids"], "zamba1": ZAMBA1,
          "zamba1_documents": ZAMBA1 + DOCUMENTS, "dsa": DSA_SPARSE, "dsa_warmup": DSA_WARMUP,
          "dsa_documents": DSA_SPARSE + DOCUMENTS + ["--reset-position-ids"],
          "dsa_warmup_documents": DSA_WARMUP + DOCUMENTS + ["--reset-position-ids"],
          "deepseek_v4": DEEPSEEK_V4, "deepseek_v4_sparse": DEEPSEEK_V4 + ["--dsa-indexer-use-sparse-loss"]}
RING, ULYSSES, HYBRID_CP = "megatron_cp_algo", "ulysses_cp_algo", "hybrid_cp_algo"
CONTIGUOUS = ["--attention-mask-type", "general"]  # the ring without load balancing: one part per rank


def _cp(size: int, algo: str = RING, *extra: str) -> List[str]:
    return ["--context-parallel-size", str(size), "--context-parallel-algo", algo, *extra]


# layout name -> (model, flags), by world size
LAYOUTS: Dict[int, Dict[str, Tuple[str, List[str]]]] = {
    2: {"mamba2_ring_cp2": ("mamba2", _cp(2)),
        "mamba2_contiguous_cp2": ("mamba2", _cp(2, RING, *CONTIGUOUS)),
        "hybrid_ulysses_cp2": ("hybrid", _cp(2, ULYSSES)),
        "documents_ring_cp2": ("documents", _cp(2)),
        "gdn_ring_cp2": ("gdn", _cp(2)),
        "mamba1_ring_cp2": ("mamba1", _cp(2)),
        "short_conv_contiguous_cp2": ("short_conv", _cp(2, RING, *CONTIGUOUS)),
        "kda_ring_cp2": ("kda", _cp(2)),
        "lightning_ring_cp2": ("lightning", _cp(2)),
        "falcon_h1_ulysses_cp2": ("falcon_h1", _cp(2, ULYSSES)),
        "olmo_hybrid_ring_cp2": ("olmo_hybrid", _cp(2)),
        "rg_lru_gpt_ring_cp2": ("rg_lru_gpt", _cp(2)),
        "rwkv_ring_cp2": ("rwkv", _cp(2)),
        "xlstm_ring_cp2": ("xlstm", _cp(2)),
        "kda_bailing_ring_cp2": ("kda_bailing", _cp(2)),
        "zamba_ulysses_cp2": ("zamba", _cp(2, ULYSSES)),
        "dsa_cp2": ("dsa", _cp(2)),
        "dsa_warmup_cp2": ("dsa_warmup", _cp(2)),
        "deepseek_v4_cp2": ("deepseek_v4", _cp(2)),
        "deepseek_v4_sparse_contiguous_cp2": ("deepseek_v4_sparse", _cp(2, RING, *CONTIGUOUS))},
    4: {"mamba2_ring_cp4": ("mamba2", _cp(4)),
        "hybrid_2x2": ("hybrid", _cp(4, HYBRID_CP, "--ulysses-degree-in-cp", "2")),
        "mamba2_ring_cp2_tp2_sp": ("mamba2", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "hybrid_ring_cp2_pp2": ("hybrid", _cp(2) + ["--pipeline-model-parallel-size", "2"]),
        "hybrid_ring_cp2_full_recompute": ("hybrid", _cp(2) + ["--recompute-granularity", "full",
                                                               "--recompute-method", "uniform",
                                                               "--recompute-num-layers", "2"]),
        "documents_ring_cp4": ("documents", _cp(4)),
        "gdn_gpt_documents_ring_cp4": ("gdn_gpt_documents", _cp(4)),
        "gdn_gpt_ring_cp2_tp2_sp": ("gdn_gpt", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "short_conv_documents_ulysses_cp4": ("short_conv_documents", _cp(4, ULYSSES)),
        "kda_gpt_documents_ring_cp4": ("kda_gpt_documents", _cp(4)),
        "kda_gpt_ring_cp2_tp2_sp": ("kda_gpt", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "lightning_gpt_documents_ring_cp4": ("lightning_gpt_documents", _cp(4)),
        "lightning_gpt_ring_cp2_tp2_sp": ("lightning_gpt", _cp(2) + ["--tensor-model-parallel-size", "2",
                                                                     "--sequence-parallel"]),
        "falcon_h1_documents_ring_cp4": ("falcon_h1_documents", _cp(4)),
        "falcon_h1_ring_cp2_tp2_sp": ("falcon_h1", _cp(2) + ["--tensor-model-parallel-size", "2",
                                                             "--sequence-parallel"]),
        "falcon_h1_ring_cp2_pp2": ("falcon_h1", _cp(2) + ["--pipeline-model-parallel-size", "2"]),
        "rg_lru_gpt_documents_ring_cp4": ("rg_lru_gpt_documents", _cp(4)),
        "rg_lru_gpt_ring_cp2_tp2_sp": ("rg_lru_gpt", _cp(2) + ["--tensor-model-parallel-size", "2",
                                                               "--sequence-parallel"]),
        "rwkv_documents_ring_cp4": ("rwkv_documents", _cp(4)),
        "rwkv_ring_cp2_tp2_sp": ("rwkv", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "xlstm_documents_ring_cp4": ("xlstm_documents", _cp(4)),
        "kda_bailing_documents_ring_cp4": ("kda_bailing_documents", _cp(4)),
        "xlstm_ring_cp2_tp2_sp": ("xlstm", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "zamba_documents_ring_cp4": ("zamba_documents", _cp(4)),
        "zamba_ring_cp2_pp2": ("zamba", _cp(2) + ["--pipeline-model-parallel-size", "2"]),
        "zamba_ring_cp2_tp2_sp": ("zamba", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "zamba1_documents_ring_cp4": ("zamba1_documents", _cp(4)),
        "zamba1_ring_cp2_tp2_sp": ("zamba1", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "dsa_documents_cp4": ("dsa_documents", _cp(4)),
        "dsa_warmup_documents_cp4": ("dsa_warmup_documents", _cp(4)),
        "dsa_cp2_tp2_sp": ("dsa", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
        "deepseek_v4_sparse_cp4": ("deepseek_v4_sparse", _cp(4)),
        "deepseek_v4_cp2_tp2_sp": ("deepseek_v4", _cp(2) + ["--tensor-model-parallel-size", "2",
                                                           "--sequence-parallel"]),
        "deepseek_v4_cp2_pp2": ("deepseek_v4", _cp(2) + ["--pipeline-model-parallel-size", "2",
                                                        "--num-layer-list", "2,1"])},
}
TOLERANCE = 1e-5


def _train(argv: List[str], documents: Optional[List[torch.Tensor]] = None) -> Dict[str, object]:
    """One step: its loss and every parameter's gradient, unsharded over TP (``documents`` collects the
    micro-batches' document numbers)."""
    from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    if documents is not None:
        iterator = _recorded(iterator, documents)
    losses = [trainer.train_step(iterator).loss]
    grads = {name: gather_full_tensor(param.main_grad, param_meta(param).tp_shard, trainer.state.tp_group)
             for name, param in trainer.model.named_parameters() if param.requires_grad}  # (DSA's warm-up freezes)
    return {"losses": losses, "grads": grads}


def _recorded(batches: Iterator[Dict[str, torch.Tensor]], documents: List[torch.Tensor]) -> Iterator[Dict]:
    for batch in batches:
        documents.append(batch["document_ids"].clone())
        yield batch


CONV_DOCUMENTS = torch.tensor([[0] * 5 + [1] * 8 + [2] * 3, [0] * 16])  # [b, s]: documents cross CP chunks


def _conv_relay(cp_size: int, balanced: bool) -> Dict[str, torch.Tensor]:
    """A plain causal depthwise conv core (carry: its last 3 inputs) over packed documents on this CP rank's
    tokens (all of them at CP 1): the outputs, the gradients of the input and of the weights."""
    from core.parallel_state import initialize
    from core.transformer.context_parallel import ContextParallel, SequenceLayout
    from core.transformer.mamba_mixer import causal_conv_core
    from core.transformer.sequence_state import sequence_scan

    generator = torch.Generator().manual_seed(5)
    x, weight, bias = torch.randn(2, 16, 3, generator=generator), torch.randn(3, 1, 4, generator=generator), \
        torch.randn(3, generator=generator)
    for tensor in (x, weight, bias):
        tensor.requires_grad_(True)
    if cp_size == 1:
        layout, mine = SequenceLayout(16, torch.arange(16), CONV_DOCUMENTS), torch.arange(16)
    else:
        state = initialize(cp=cp_size)
        cp = ContextParallel(RING, state.group("cp"), state.group("cp_ring"), state.group("cp_ulysses"), balanced)
        mine = cp.rank_positions(16, cp.group.rank, torch.device("cpu"))
        layout = SequenceLayout(16, mine, CONV_DOCUMENTS, cp)
    out = sequence_scan(causal_conv_core(weight, bias), x[:, mine], layout)  # [b, s_local, 3]
    (out * torch.randn(2, 16, 3, generator=generator)[:, mine]).sum().backward()
    return {"out": out.detach(), "positions": mine, "x": x.grad, "weight": weight.grad, "bias": bias.grad}


def _worker(rank: int, world: int, jobs: Dict[str, List[str]]) -> Dict[str, Dict[str, object]]:
    from core.transformer import compressed_attention

    compressed_attention.DEFAULT_BLOCK = 3  # DeepSeek-V4's queries in blocks of 3, some straddling two CP chunks
    results = {name: _train(argv) for name, argv in jobs.items()}
    results.update((f"conv_balanced_{b}", _conv_relay(world, b)) for b in (True, False))
    return results


def _conv_differences(per_rank: List[Dict[str, Dict]], reference: Dict[str, torch.Tensor]) -> List[str]:
    """Every rank's conv outputs against the reference's at its positions; the gradients summed over ranks
    (each rank's loss covers its own tokens) against the reference's."""
    wrong = []
    for balanced in (True, False):
        results = [rank_results[f"conv_balanced_{balanced}"] for rank_results in per_rank]
        if any(not torch.allclose(r["out"], reference["out"][:, r["positions"]], atol=1e-6) for r in results):
            wrong.append(f"conv outputs (balanced {balanced})")
        for name in ("x", "weight", "bias"):
            if not torch.allclose(sum(r[name] for r in results), reference[name], atol=1e-5):
                wrong.append(f"conv {name} grad (balanced {balanced})")
    return wrong


def _reference_name(name: str) -> str:
    """The one-process name of a parameter: the last pipeline stage's copy of the tied word embeddings."""
    return "embedding.word_embeddings.weight" if name == "output_layer.weight" else name


def _differences(result: Dict[str, object], reference: Dict[str, object]) -> List[str]:
    wrong = [f"losses {result['losses']} != {reference['losses']}"
             for a, b in zip(result["losses"], reference["losses"]) if abs(a - b) > TOLERANCE * abs(b)]
    for name, grad in result["grads"].items():  # a pipeline stage holds its own layers
        expected = reference["grads"][_reference_name(name)]
        error = (grad - expected).abs().max().item()
        if error > TOLERANCE * max(expected.abs().max().item(), 1e-3):
            wrong.append(f"{name} grad off by {error:.2e}")
    return wrong


@pytest.fixture(scope="module")
def references() -> Dict[str, Dict[str, object]]:
    documents: List[torch.Tensor] = []
    results = {model: _train(COMMON + extra, documents if model == "documents" else None)
               for model, extra in MODELS.items()}
    results["documents"]["document_ids"] = torch.cat(documents)  # [micro-batches, s]
    return results


def test_the_documents_cross_and_start_at_cp_chunk_boundaries(references) -> None:
    ids = references["documents"]["document_ids"]  # [n, 16]
    boundaries = [2, 4, 6, 8, 10, 12, 14]  # every CP chunk boundary at CP 2 and CP 4, balanced or not
    continued = [(ids[:, p - 1] == ids[:, p]).any().item() for p in boundaries]
    started = [(ids[:, p - 1] != ids[:, p]).any().item() for p in boundaries]
    assert all(continued) and any(started), ids
    assert references["documents"]["losses"] != references["mamba2"]["losses"]  # the documents restart the state


@pytest.mark.parametrize("world", sorted(LAYOUTS))
def test_recurrent_context_parallel_equals_one_process(world: int, references) -> None:
    layouts = LAYOUTS[world]
    jobs = {name: COMMON + MODELS[model] + flags for name, (model, flags) in layouts.items()}
    per_rank = run_distributed(world, _worker, jobs)
    wrong = {}
    for rank, results in enumerate(per_rank):
        for name, (model, _) in layouts.items():
            differences = _differences(results[name], references[model])
            if differences:
                wrong[f"{name} rank {rank}"] = differences[:3]
    for name, (model, _) in layouts.items():
        held = {_reference_name(key) for results in per_rank for key in results[name]["grads"]}
        if held != set(references[model]["grads"]):
            wrong[name] = [f"gradients of {sorted(set(references[model]['grads']) - held)} missing"]
    conv = _conv_differences(per_rank, _conv_relay(1, True))
    assert not wrong and not conv, f"differ from one process: {wrong} {conv}"
