"""Expert parallelism equals EP 1: losses, router losses, gradient norms and weights, fp32.

One 4-process gloo launch runs every layout of ``JOBS`` on a 3-layer model (a dense first layer, then
two MoE layers of 4 experts, top-2, a gated shared expert, sigmoid routing with expert bias, aux and z
losses) for two SGD steps (the second sees the first's update), micro-batch 1, global batch 4:

- EP 2 and EP 4 with the alltoall and allgather dispatchers, with and without grouped GEMM;
- EP2 x TP2 (with SP), EP2 x PP2 (and with 4 layers in 2 virtual stages per rank), EP2 with the
  distributed optimizer and overlapped reductions,
  EP2 with full recompute, EP2 with a capacity factor (the same tokens dropped as at EP 1), and
  GPT-OSS's expert and router biases with a clamped gated activation at EP4 and EP2 x TP2;
- whole experts spread over TP x EP (``--expert-tensor-parallel-size 1`` with TP2 + SP) at EP 2 and 4,
  with both dispatchers, grouped GEMM, capacity and biases;
- a hybrid stack (``M*-E``: Mamba2, attention, MLP and MoE layers) at EP2 with the distributed optimizer;
- a DeepSeek-V3-shaped model (MLA, group-limited sigmoid routing with the expert bias, a dense first
  layer, one MTP module whose ``mtp_1 loss`` is compared too) under PP2 x EP2, and its DeepSeek-V3.2 form
  (DeepSeek Sparse Attention, top-3 of 8 keys, with the indexer's sparse KL loss, whose ``indexer loss`` is compared
  too) under PP2 x EP2 and TP2 + SP x EP2;
- a DeepSeek-V4-shaped model (compressed attention of every kind with the CSA indexer's loss, hyper-connections, a
  hash-routed layer, sqrtsoftplus scores, an MTP module over the streams) under PP2 x EP2 and TP2 + SP x PP2 x EP2
  (whole experts);
- context parallelism with MoE: CP2 x EP2 with the distributed optimizer (the expert bias counted over DP x CP),
  CP4 with a capacity factor (the whole sequence's capacity), Ulysses CP2 x TP2 + SP with the sequence-wise loss
  (two sequences per micro-batch), CP4 with two MTP modules over packed documents (the shift runs along the whole
  sequence), DeepSeek-V3 with MTP at Ulysses CP2 x PP2, and DeepSeek-V3 (ring), V3.2 (DSA, K/V all-gather
  algorithm) and V4 (compressed attention, hash routing) at CP2 x EP2.

Each compares with the single-process run of the same flags (minus the parallel ones): the step's
``lm loss``, ``load_balancing_loss``, ``z_loss`` and gradient norm within 1e-5 (relative), and, for
the layouts without TP/PP, every weight after the two steps (expert weights gathered over EP), which
checks the gradients of every parameter. A checkpoint saved at EP 2 names ``ep`` in its rank
directories and is refused at EP 4 with the converter's ``--target-expert-parallel-size``; converted to
EP 4 with that flag it loads at EP 4 with the same weights. Adam with the distributed optimizer (its
state sharded over expert-DP for the experts) resumes at EP 2 with the uninterrupted next loss.

    python -m pytest -q tests/distributed/test_expert_parallel.py
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Tuple

import pytest
import torch
import torch.distributed as dist

from core.launcher import run_distributed
from core.tensor_parallel.param_meta import param_meta

BASE = ["--num-layers", "3", "--hidden-size", "16", "--num-attention-heads", "4", "--ffn-hidden-size", "32",
        "--seq-length", "8", "--max-position-embeddings", "8", "--vocab-size", "64", "--normalization", "RMSNorm",
        "--swiglu", "--disable-bias-linear", "--micro-batch-size", "1", "--global-batch-size", "4",
        "--train-iters", "2", "--optimizer", "sgd", "--lr", "0.5", "--mock-data", "--tokenizer-type",
        "NullTokenizer", "--seed", "5", "--device", "cpu", "--distributed-backend", "gloo", "--eval-iters", "0",
        "--log-interval", "1000", "--hidden-dropout", "0", "--attention-dropout", "0",
        "--make-vocab-size-divisible-by", "1", "--init-method-std", "0.3",
        "--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "8", "--n-shared-experts", "2",
        "--shared-expert-gate", "--moe-router-score-function", "sigmoid", "--norm-topk-prob",
        "--moe-router-enable-expert-bias", "--moe-router-bias-update-rate", "0.01", "--moe-aux-loss-coeff", "0.1",
        "--moe-z-loss-coeff", "0.01", "--first-k-dense-replace", "1"]
CAPACITY = ["--moe-expert-capacity-factor", "0.75"]
# the qwen2-moe family's routing (pre-softmax, no expert bias), so that tools/convert_ckpt.py can re-shard it
def _without(argv: List[str], flags: Dict[str, int]) -> List[str]:
    """``argv`` without the ``flags`` (flag -> number of values that follow it)."""
    result, skip = [], 0
    for arg in argv:
        if skip:
            skip -= 1
        elif arg in flags:
            skip = flags[arg]
        else:
            result.append(arg)
    return result


CHECKPOINT_ARGV = _without(BASE, {"--moe-router-score-function": 1, "--moe-router-enable-expert-bias": 0,
                                  "--moe-router-bias-update-rate": 1}) + ["--moe-router-pre-softmax"]
BIASES = ["--add-mlp-bias", "--add-router-bias", "--activation-func-clamp-value", "0.5", "--glu-linear-offset", "1"]
# A DeepSeek-V3-shaped model: MLA, sigmoid group-limited routing with the expert bias, routed scaling, a
# shared expert, a leading dense layer and one MTP module (logged as mtp_1 loss)
DEEPSEEK_V3 = ["--num-layers", "4", "--multi-latent-attention", "--q-lora-rank", "8", "--kv-lora-rank", "8",
               "--qk-head-dim", "4", "--qk-pos-emb-head-dim", "4", "--v-head-dim", "4",
               "--moe-router-num-groups", "2", "--moe-router-group-topk", "1",
               "--moe-router-topk-scaling-factor", "2.5", "--mtp-num-layers", "1", "--untie-embeddings-and-output-weights"]
# DeepSeek-V3.2: the same with DeepSeek Sparse Attention (top-3 of 8 keys) and its sparse-stage indexer loss
DEEPSEEK_V32 = DEEPSEEK_V3 + ["--rope-interleaved", "--experimental-attention-variant", "dsa", "--dsa-indexer-n-heads",
                              "2", "--dsa-indexer-head-dim", "4", "--dsa-indexer-topk", "3", "--dsa-indexer-loss-coeff",
                              "0.5", "--dsa-indexer-use-sparse-loss"]
# DeepSeek-V4: compressed attention (CSA, HCA, sliding, CSA; one shared KV head, grouped output projection, the CSA
# indexer's dense KL loss), two hyper-connection streams, a hash-routed first layer, sqrtsoftplus scores, a clamped
# SwiGLU; every layer MoE; one MTP module over the streams (its layer sliding-window)
DEEPSEEK_V4 = ["--num-layers", "4", "--first-k-dense-replace", "0", "--group-query-attention", "--num-query-groups",
               "1", "--kv-channels", "8", "--rotary-percent", "0.5", "--rope-interleaved", "--local-rotary-base", "500",
               "--q-lora-rank", "8", "--compressed-attention-pattern", "CHSC", "--sliding-window", "3",
               "--csa-compress-ratio", "2", "--hca-compress-ratio", "4", "--o-groups", "2", "--o-lora-rank", "4",
               "--dsa-indexer-n-heads", "2", "--dsa-indexer-head-dim", "4", "--dsa-indexer-topk", "2",
               "--dsa-indexer-loss-coeff", "0.5", "--enable-mhc-connections", "--mhc-num-residual-streams", "2",
               "--mhc-sinkhorn-iterations", "3", "--moe-hash-layers", "1", "--moe-router-score-function", "sqrtsoftplus",
               "--activation-func-clamp-value", "2", "--untie-embeddings-and-output-weights", "--mtp-num-layers", "1"]
WHOLE_EXPERTS_TP2 = ["--tensor-model-parallel-size", "2", "--sequence-parallel", "--expert-tensor-parallel-size", "1"]
# a hybrid stack (Mamba2, attention, MLP and MoE layers, Megatron-core's letters); BASE's leading dense layer
# is the pattern's business there, so --first-k-dense-replace goes back to its default
HYBRID = ["--num-layers", "4", "--hybrid-override-pattern", "M*-E", "--first-k-dense-replace", "0",
          "--mamba-head-dim", "8", "--mamba-num-groups", "1", "--mamba-state-dim", "4", "--mamba-chunk-size", "4"]
RECOMPUTE = ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
# the sequence-wise loss differs from the micro-batch's only with two sequences per micro-batch
SEQ_AUX = ["--moe-router-load-balancing-type", "seq_aux_loss", "--micro-batch-size", "2"]
# two MTP modules over packed documents (a vocabulary of 8 puts end-of-document tokens in the mock data)
MTP2_DOCUMENTS = ["--mtp-num-layers", "2", "--reset-attention-mask", "--reset-position-ids", "--eod-mask-loss",
                  "--vocab-size", "8"]


def _cp(size: int, algo: str = "megatron_cp_algo") -> List[str]:
    return ["--context-parallel-size", str(size), "--context-parallel-algo", algo]


def _ep(size: int, dispatcher: str, *extra: str) -> List[str]:
    return ["--expert-model-parallel-size", str(size), "--moe-token-dispatcher-type", dispatcher, *extra]


# name -> (flags added to BASE, reference flags added to BASE for the single-process run, compare weights)
JOBS: Dict[str, Tuple[List[str], List[str], bool]] = {
    "ep2_alltoall": (_ep(2, "alltoall"), [], True),
    "ep2_allgather": (_ep(2, "allgather"), [], True),
    "ep4_alltoall": (_ep(4, "alltoall"), [], True),
    "ep4_allgather_grouped": (_ep(4, "allgather", "--moe-grouped-gemm"), [], True),
    "ep4_alltoall_grouped": (_ep(4, "alltoall", "--moe-grouped-gemm"), [], True),
    "ep2_tp2_sp": (_ep(2, "alltoall", "--tensor-model-parallel-size", "2", "--sequence-parallel"), [], False),
    "ep2_pp2": (_ep(2, "allgather", "--pipeline-model-parallel-size", "2", "--num-layer-list", "1,2"), [], False),
    "ep2_pp2_vpp": (_ep(2, "alltoall", "--pipeline-model-parallel-size", "2", "--num-layers", "4",
                        "--num-layers-per-virtual-pipeline-stage", "1"), ["--num-layers", "4"], False),
    "ep2_distopt_overlap": (_ep(2, "alltoall", "--use-distributed-optimizer", "--overlap-grad-reduce",
                                "--overlap-param-gather"), [], True),
    "ep2_recompute": (_ep(2, "alltoall", *RECOMPUTE), [], True),
    "ep4_capacity": (_ep(4, "alltoall", *CAPACITY), CAPACITY, True),
    "deepseek_v3_mtp_pp2_ep2": (_ep(2, "alltoall", "--pipeline-model-parallel-size", "2", *DEEPSEEK_V3), DEEPSEEK_V3,
                            False),
    "deepseek_v32_dsa_mtp_pp2_ep2": (_ep(2, "alltoall", "--pipeline-model-parallel-size", "2", *DEEPSEEK_V32),
                                     DEEPSEEK_V32, False),
    "deepseek_v32_dsa_mtp_tp2_sp_ep2": (_ep(2, "alltoall", "--tensor-model-parallel-size", "2", "--sequence-parallel",
                                            *DEEPSEEK_V32), DEEPSEEK_V32, False),
    "deepseek_v4_pp2_ep2": (_ep(2, "alltoall", "--pipeline-model-parallel-size", "2", *DEEPSEEK_V4), DEEPSEEK_V4,
                            False),
    "deepseek_v4_tp2_sp_pp2_ep2": (_ep(2, "alltoall", *WHOLE_EXPERTS_TP2, "--pipeline-model-parallel-size", "2",
                                       *DEEPSEEK_V4), DEEPSEEK_V4, False),
    "etp1_tp2_sp_ep2": (_ep(2, "alltoall", *WHOLE_EXPERTS_TP2), [], False),
    "etp1_tp2_sp_ep4_allgather_grouped": (_ep(4, "allgather", "--moe-grouped-gemm", *WHOLE_EXPERTS_TP2), [], False),
    "etp1_tp2_sp_ep4_capacity_biases": (_ep(4, "alltoall", *WHOLE_EXPERTS_TP2, *CAPACITY, *BIASES),
                                        CAPACITY + BIASES, False),
    "ep2_biases_tp2": (_ep(2, "allgather", "--tensor-model-parallel-size", "2", *BIASES), BIASES, False),
    "ep4_biases": (_ep(4, "alltoall", *BIASES), BIASES, True),
    "ep2_capacity_allgather": (_ep(2, "allgather", *CAPACITY), CAPACITY, True),
    "hybrid_ep2_distopt": (_ep(2, "alltoall", "--use-distributed-optimizer", *HYBRID), HYBRID, True),
    # context parallelism: each CP rank routes its part of the sequences; the router losses count every CP rank's
    # tokens, the capacity is the whole sequence's, MTP shifts along the whole sequence
    "cp2_ep2_distopt": (_ep(2, "alltoall", *_cp(2), "--use-distributed-optimizer"), [], True),
    "cp4_capacity": (_cp(4) + CAPACITY, CAPACITY, True),
    "cp2_ulysses_tp2_sp_seq_aux": (_cp(2, "ulysses_cp_algo") + ["--tensor-model-parallel-size", "2",
                                                                "--sequence-parallel", *SEQ_AUX], SEQ_AUX, False),
    "cp4_mtp2_documents": (_cp(4) + MTP2_DOCUMENTS, MTP2_DOCUMENTS, True),
    "deepseek_v3_mtp_cp2_ep2": (_ep(2, "alltoall", *_cp(2), *DEEPSEEK_V3), DEEPSEEK_V3, True),
    "deepseek_v3_mtp_cp2_pp2": (_cp(2, "ulysses_cp_algo") + ["--pipeline-model-parallel-size", "2", *DEEPSEEK_V3],
                                DEEPSEEK_V3, False),
    "deepseek_v32_dsa_mtp_cp2_ep2": (_ep(2, "allgather", *_cp(2, "kvallgather_cp_algo"), *DEEPSEEK_V32),
                                     DEEPSEEK_V32, True),
    "deepseek_v4_cp2_ep2": (_ep(2, "alltoall", *_cp(2), *DEEPSEEK_V4), DEEPSEEK_V4, True),
}


def _full_weights(trainer) -> Dict[str, torch.Tensor]:
    """Every weight of the (TP 1, PP 1) model with the experts of all EP ranks concatenated."""
    ep = trainer.state.ep_group
    weights = {}
    for name, param in trainer.model.named_parameters():
        value = param.detach().clone()
        if param_meta(param).is_expert and ep.size > 1:
            parts = [torch.empty_like(value) for _ in range(ep.size)]
            dist.all_gather(parts, value.contiguous(), group=ep.handle)
            value = torch.cat(parts)
        weights[name] = value
    return weights


def _run(argv: List[str], weights: bool) -> Dict[str, Any]:
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    steps = []
    for _ in range(2):
        result = trainer.train_step(iterator)
        steps.append({**result.stats, "grad_norm": result.grad_norm})
    trainer.finish_param_sync()  # --overlap-param-gather: the last step's weight all-gathers are in flight
    return {"steps": steps, "weights": _full_weights(trainer) if weights else None}


def _worker(rank: int, world: int, jobs: Dict[str, Tuple[List[str], bool]], root: str) -> Dict[str, Any]:
    results = {name: _run(argv, weights) for name, (argv, weights) in jobs.items()}
    results["checkpoint"] = _checkpoint_case(root)
    results["resume"] = _distributed_optimizer_resume_case(root + "_adam")
    return results


def _distributed_optimizer_resume_case(root: str) -> Dict[str, float]:
    """Adam with the distributed optimizer at EP 2: a run resumed from step 1 takes the uninterrupted step 2."""
    from mindspeed_llm.training.training import setup

    argv = _without(BASE, {"--optimizer": 1, "--lr": 1}) + _ep(2, "alltoall") + [
        "--optimizer", "adam", "--lr", "0.01", "--use-distributed-optimizer", "--save", root]
    trainer = setup(argv)
    iterator = trainer.train_iterator()
    trainer.train_step(iterator)
    trainer.save()
    expected = trainer.train_step(iterator).loss
    resumed = setup(argv + ["--load", root])
    return {"expected": expected, "resumed": resumed.train_step(resumed.train_iterator()).loss}


def _checkpoint_case(root: str) -> Dict[str, Any]:
    """Save at EP 2 (dp 4): rank directories with ``ep``; loading at EP 4 is refused, naming the converter flag;
    converted to EP 4 by tools/convert_ckpt.py (as the qwen2-moe family) it loads at EP 4 with the same weights."""
    from core.checkpointing import CheckpointError
    from mindspeed_llm.training.training import setup
    from tools.convert_ckpt import main as convert_main

    trainer = setup(CHECKPOINT_ARGV + _ep(2, "alltoall") + ["--save", root])
    trainer.train_step(trainer.train_iterator())
    trainer.save()
    names = sorted(os.listdir(os.path.join(root, "iter_0000001")))
    resumed = setup(CHECKPOINT_ARGV + _ep(2, "alltoall") + ["--load", root])
    same = all(torch.equal(a, b) for a, b in zip(trainer.model.state_dict().values(),
                                                 resumed.model.state_dict().values()))
    try:
        setup(CHECKPOINT_ARGV + _ep(4, "alltoall") + ["--load", root])
        refusal = None
    except CheckpointError as error:
        refusal = str(error)
    converted = root + "_ep4"
    if dist.get_rank() == 0:
        code = convert_main(["--load-model-type", "mg", "--save-model-type", "mg", "--load-dir", root, "--save-dir",
                             converted, "--model-type-hf", "qwen2-moe", "--target-expert-parallel-size", "4"])
        assert code == 0
    dist.barrier()
    at_ep4 = setup(CHECKPOINT_ARGV + _ep(4, "allgather") + ["--load", converted, "--finetune"])
    before, after = _full_weights(trainer), _full_weights(at_ep4)
    converted_equal = set(before) == set(after) and all(torch.equal(before[k], after[k]) for k in before)
    return {"names": names, "reloaded_equal": same, "refusal": refusal, "converted_equal": converted_equal}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Dict[str, Any]:
    references = {}
    for name, (_, reference_flags, weights) in JOBS.items():
        key = tuple(reference_flags)
        if key not in references:
            references[key] = _run(BASE + reference_flags, True)
    jobs = {name: (BASE + flags, weights) for name, (flags, _, weights) in JOBS.items()}
    per_rank = run_distributed(4, _worker, jobs, str(tmp_path_factory.mktemp("ep_checkpoint")))
    return {"references": references, "per_rank": per_rank}


def _close(ours: float, reference: float) -> bool:
    return abs(ours - reference) <= 1e-5 * max(abs(reference), 1e-3)


@pytest.mark.parametrize("name", sorted(JOBS))
def test_expert_parallel_layout_equals_ep1(results, name: str) -> None:
    _, reference_flags, weights = JOBS[name]
    reference = results["references"][tuple(reference_flags)]
    mtp_layers = 1 if "mtp" in name else 0
    if "--mtp-num-layers" in reference_flags:
        mtp_layers = int(reference_flags[reference_flags.index("--mtp-num-layers") + 1])
    expected = {"lm loss", "load_balancing_loss", "z_loss", "grad_norm"} | {f"mtp_{k} loss" for k in
                                                                            range(1, mtp_layers + 1)}
    expected |= {"indexer loss"} if "dsa" in name or "deepseek_v4" in name else set()
    assert set(reference["steps"][0]) == expected
    assert reference["steps"][1]["lm loss"] != reference["steps"][0]["lm loss"]
    for rank, per_rank in enumerate(results["per_rank"]):
        ours = per_rank[name]
        for step, (mine, theirs) in enumerate(zip(ours["steps"], reference["steps"])):
            for stat, value in theirs.items():
                assert _close(mine[stat], value), (name, rank, step, stat, mine[stat], value)
        if weights:
            assert set(ours["weights"]) == set(reference["weights"])
            for key, value in reference["weights"].items():
                assert torch.allclose(ours["weights"][key], value, rtol=1e-5, atol=1e-6), (name, rank, key)


def test_capacity_drops_tokens() -> None:
    """The capacity jobs are not vacuous: with the factor some routed pairs are dropped, so the loss differs."""
    from mindspeed_llm.training.training import setup

    losses = []
    for extra in ([], CAPACITY):
        trainer = setup(BASE + extra + ["--train-iters", "1"])
        losses.append(trainer.train_step(trainer.train_iterator()).loss)
    assert losses[0] != losses[1]


def test_distributed_optimizer_resumes_exactly_at_ep2(results) -> None:
    for per_rank in results["per_rank"]:
        assert per_rank["resume"]["resumed"] == per_rank["resume"]["expected"]


def test_ep_checkpoint_names_and_refusal(results) -> None:
    for per_rank in results["per_rank"]:
        case = per_rank["checkpoint"]
        assert case["names"] == ["checkpoint_complete", "mp_rank_00_000", "mp_rank_00_001"]
        assert case["reloaded_equal"]
        refusal = case["refusal"]
        assert refusal is not None and "--expert-model-parallel-size 2" in refusal
        assert "--target-expert-parallel-size" in refusal
        assert case["converted_equal"]
