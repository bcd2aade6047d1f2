"""``--optimizer muon`` equals a Muon written out here, and does not depend on the layout.

* One process: each of three steps moves every weight as a reference written in this file does (Newton-Schulz
  on the whole matrix, Q, K and V apart, the spectral scale; torch's AdamW formula for the embeddings, the output
  layer and the norms), from the weights before the step and the gradient it used.
* TP 2 (``duplicated``, the default, and ``distributed``), DP 2 with the distributed optimizer, FSDP2, PP 2, and
  for an MoE model EP 2 and TP 2 (experts split): the one-process losses and weights over three steps (fp32
  tolerance: the matrices are gathered whole, so only the reductions' order differs). ``blockwise`` at TP 2
  orthogonalises each half on its own and must *not* equal one process.
* Runs saved after two steps and resumed give the losses and weights of four uninterrupted steps: the distributed
  optimizer (torch_dist, whose pieces hold Muon's momenta beside AdamW's moments, and its legacy
  ``distrib_optim.pt``) and TP 2 with the plain optimizer (legacy files).

    python -m pytest tests/distributed/test_muon.py -q
"""
from __future__ import annotations

import itertools
import math
from typing import Dict, List, Tuple

import pytest
import torch

from core.launcher import run_distributed
from core.tensor_parallel.mappings import all_gather_along_dim
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from tests.distributed.test_training_equivalence import by_config

MODEL = [
    "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "96", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2",
    "--seq-length", "16", "--max-position-embeddings", "16", "--position-embedding-type", "rope",
    "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear", "--attention-dropout", "0",
    "--hidden-dropout", "0", "--micro-batch-size", "2", "--global-batch-size", "4", "--train-iters", "3",
    "--lr", "0.02", "--lr-decay-style", "constant", "--weight-decay", "0.1", "--clip-grad", "1.0",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128", "--seed", "11", "--device", "cpu",
    "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1",
    "--untie-embeddings-and-output-weights", "--make-vocab-size-divisible-by", "64",
]
DENSE = MODEL + ["--optimizer", "muon", "--muon-fp32-matmul-prec", "high"]
MOE = DENSE + ["--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "48"]
# MuonClip: a threshold below the initial logits (about 0.1 here), so heads are clipped every step
CLIP = DENSE + ["--qk-clip", "--qk-clip-threshold", "0.06", "--qk-clip-alpha", "0.3"]
MLA_CLIP = DENSE + ["--qk-clip", "--qk-clip-threshold", "0.02", "--qk-clip-alpha", "0.3", "--multi-latent-attention",
                    "--num-query-groups", "4", "--q-lora-rank", "16", "--kv-lora-rank", "16", "--qk-head-dim", "8",
                    "--qk-pos-emb-head-dim", "8", "--v-head-dim", "8"]
TP2 = ["--tensor-model-parallel-size", "2"]
# small buckets: DP rank 1's chunk of each starts inside a matrix, whose pieces must be gathered to orthogonalise it
DISTOPT = ["--use-distributed-optimizer", "--ddp-bucket-size", "3000"]
STEPS = 3
QUINTIC = (3.4445, -4.7750, 2.0315)


def full_weights(trainer) -> Dict[str, torch.Tensor]:
    """Every weight, whole (FSDP2's DTensors gathered over DP, TP slices over TP, experts over EP)."""
    result = {}
    experts = trainer.state.expert_group
    for name, param in trainer.model.named_parameters():
        value = param.detach()
        value = value.full_tensor() if hasattr(value, "full_tensor") else value
        value = gather_full_tensor(value, param_meta(param).tp_shard, trainer.state.tp_group)
        if param_meta(param).num_global_experts is not None and experts.size > 1:
            value = all_gather_along_dim(value.contiguous(), 0, experts)
        result[name] = value
    return result


def train(argv: List[str], record: bool = False) -> Dict[str, object]:
    """Three steps; with ``record`` every step's weights before and after and the gradient it applied."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    losses, steps = [], []
    for _ in range(STEPS):
        before = full_weights(trainer) if record else None
        losses.append(trainer.train_step(iterator).loss)
        if record:  # an fp32 model's master gradient is its main_grad, clipped in place
            grads = {name: p.main_grad.clone() for name, p in trainer.model.named_parameters()}
            steps.append((before, grads, full_weights(trainer)))
    return {"losses": losses, "weights": full_weights(trainer), "steps": steps}


def resume(argv: List[str], ckpt: str, ckpt_format: str) -> Dict[str, object]:
    from mindspeed_llm.training.training import setup, train as run

    argv = argv + ["--train-iters", "4", "--ckpt-format", ckpt_format]
    full = setup(argv)
    iterator = full.train_iterator()
    for _ in range(4):
        full.train_step(iterator)
    first = run(setup(argv + ["--save", ckpt, "--save-interval", "2", "--exit-interval", "2"]))
    resumed = setup(argv + ["--load", ckpt])
    iterator = resumed.train_iterator()
    for _ in range(2):
        resumed.train_step(iterator)
    return {"full": full.losses, "first": first.losses, "resumed": resumed.losses,
            "full_weights": full_weights(full), "resumed_weights": full_weights(resumed)}


def probe(argv: List[str]) -> Dict[str, object]:
    """Learning rate 0, one batch twice: the first step records the logits and clips; the second records the
    logits of the clipped weights on the same tokens. Also the query and key weights around the first step."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv + ["--lr", "0", "--weight-decay", "0"])
    batch = next(trainer.train_iterator())
    same = itertools.repeat(batch)
    before = full_weights(trainer)
    trainer.train_step(same)
    first, after = trainer.optimizer.qk_clip.last_max_logits.clone(), full_weights(trainer)
    trainer.train_step(same)
    return {"first": first, "second": trainer.optimizer.qk_clip.last_max_logits.clone(), "before": before,
            "after": after}


def worker(rank: int, world_size: int, configs: Dict[str, Tuple]) -> Dict[str, object]:
    runs = {"train": train, "resume": resume, "probe": probe}
    return {name: runs[kind](argv, *extra) for name, (kind, argv, *extra) in configs.items()}


@pytest.fixture(scope="module")
def one_process() -> Dict[str, Dict]:
    configs = {"dense": ("train", DENSE, True), "moe": ("train", MOE), "clip": ("train", CLIP),
               "mla_clip": ("train", MLA_CLIP), "clip_probe": ("probe", CLIP), "mla_clip_probe": ("probe", MLA_CLIP)}
    return run_distributed(1, worker, configs)[0]


@pytest.fixture(scope="module")
def world2(tmp_path_factory) -> Dict[str, List[Dict]]:
    ckpt = tmp_path_factory.mktemp("muon")
    configs = {
        "dense_tp2": ("train", DENSE + TP2),
        "dense_tp2_distributed": ("train", DENSE + TP2 + ["--muon-tp-mode", "distributed"]),
        "dense_tp2_blockwise": ("train", DENSE + TP2 + ["--muon-tp-mode", "blockwise"]),
        "dense_dp2_distopt": ("train", DENSE + DISTOPT),
        "dense_fsdp2": ("train", DENSE + ["--use-torch-fsdp2"]),
        "dense_pp2": ("train", DENSE + ["--pipeline-model-parallel-size", "2"]),
        "moe_ep2": ("train", MOE + ["--expert-model-parallel-size", "2"]),
        "moe_tp2": ("train", MOE + TP2),
        "clip_tp2": ("train", CLIP + TP2),
        "clip_dp2_distopt": ("train", CLIP + DISTOPT),
        "clip_fsdp2": ("train", CLIP + ["--use-torch-fsdp2"]),
        "clip_cp2_ulysses": ("train", CLIP + ["--context-parallel-size", "2", "--context-parallel-algo",
                                              "ulysses_cp_algo"]),
        "clip_cp2_kv_allgather": ("train", CLIP + ["--context-parallel-size", "2", "--context-parallel-algo",
                                                   "kvallgather_cp_algo"]),
        "mla_clip_tp2": ("train", MLA_CLIP + TP2),
        "resume_distopt": ("resume", DENSE + DISTOPT, str(ckpt / "dist"), "torch_dist"),
        "resume_distopt_legacy": ("resume", DENSE + DISTOPT, str(ckpt / "legacy"), "torch"),
        "resume_tp2_legacy": ("resume", DENSE + TP2, str(ckpt / "tp2"), "torch"),
        # the distributed optimizer saves each parameter's own moments: SGD's momentum too
        "resume_sgd_distopt": ("resume", MODEL + DISTOPT + ["--optimizer", "sgd"], str(ckpt / "sgd"), "torch_dist"),
    }
    return by_config(run_distributed(2, worker, configs))


# ---- the reference, written out ------------------------------------------------------------------------------

def reference_orthogonalize(update: torch.Tensor) -> torch.Tensor:
    """Quintic Newton-Schulz, five steps, on the wide orientation, times the spectral scale."""
    x = update.float()
    transposed = x.shape[0] > x.shape[1]
    if transposed:
        x = x.t()
    x = x / (x.norm() + 1e-7)
    a, b, c = QUINTIC
    for _ in range(5):
        gram = x @ x.t()
        x = a * x + (b * gram + c * gram @ gram) @ x
    if transposed:
        x = x.t()
    return x * math.sqrt(max(update.shape))


def reference_direction(name: str, update: torch.Tensor, heads: Tuple[int, int, int]) -> torch.Tensor:
    if name.endswith("linear_qkv.weight"):  # Q, K and V apart
        return torch.cat([reference_orthogonalize(part) for part in update.split(heads, dim=0)])
    if update.dim() == 3:  # MoE experts: each expert's matrix
        return torch.stack([reference_orthogonalize(m) for m in update])
    return reference_orthogonalize(update)


def is_matrix(name: str, value: torch.Tensor) -> bool:
    return value.dim() >= 2 and "embedding" not in name and not name.startswith("output_layer")


def reference_run(steps: List[Tuple[Dict, Dict, Dict]], lr: float = 0.02, wd: float = 0.1, momentum: float = 0.9,
                  betas: Tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> List[Dict[str, torch.Tensor]]:
    """The weights after each step from the weights before it and its gradient."""
    state: Dict[str, Dict[str, torch.Tensor]] = {}
    qkv_rows = (4 * 16, 2 * 16, 2 * 16)  # 4 query heads, 2 key/value groups of head dim 16
    results = []
    for number, (before, grads, _) in enumerate(steps, start=1):
        after = {}
        for name, weight in before.items():
            grad, decay = grads[name], (0.0 if weight.dim() == 1 else wd)
            mine = state.setdefault(name, {})
            if is_matrix(name, weight):
                mine["m"] = momentum * mine.get("m", torch.zeros_like(grad)) + grad
                after[name] = weight * (1 - lr * decay) - lr * reference_direction(name, mine["m"], qkv_rows)
            else:
                mine["v"] = betas[0] * mine.get("v", torch.zeros_like(grad)) + (1 - betas[0]) * grad
                mine["s"] = betas[1] * mine.get("s", torch.zeros_like(grad)) + (1 - betas[1]) * grad * grad
                v_hat = mine["v"] / (1 - betas[0] ** number)
                s_hat = mine["s"] / (1 - betas[1] ** number)
                after[name] = weight * (1 - lr * decay) - lr * v_hat / (s_hat.sqrt() + eps)
        results.append(after)
    return results


def test_one_process_steps_as_the_written_out_muon(one_process) -> None:
    steps = one_process["dense"]["steps"]
    expected = reference_run(steps)
    kinds = {"muon": 0, "adamw": 0}
    for (before, _, after), reference in zip(steps, expected):
        for name, value in after.items():
            assert not torch.equal(value, before[name]), name  # every weight moved
            torch.testing.assert_close(value, reference[name], rtol=1e-5, atol=1e-6,
                                       msg=lambda text, name=name: f"{name}: {text}")
            kinds["muon" if is_matrix(name, value) else "adamw"] += 1
    assert kinds["muon"] == STEPS * 8 and kinds["adamw"] == STEPS * 7, kinds  # 4 matrices a layer; 2 norms a layer, the final norm, embedding, output


@pytest.mark.parametrize("config, model", [("dense_tp2", "dense"), ("dense_tp2_distributed", "dense"),
                                           ("dense_dp2_distopt", "dense"), ("dense_fsdp2", "dense"),
                                           ("dense_pp2", "dense"), ("moe_ep2", "moe"), ("moe_tp2", "moe"),
                                           ("clip_tp2", "clip"), ("clip_dp2_distopt", "clip"), ("clip_fsdp2", "clip"),
                                           ("clip_cp2_ulysses", "clip"), ("clip_cp2_kv_allgather", "clip"),
                                           ("mla_clip_tp2", "mla_clip")])
def test_every_layout_equals_one_process(one_process, world2, config: str, model: str) -> None:
    reference = one_process[model]
    for rank, result in enumerate(world2[config]):
        torch.testing.assert_close(torch.tensor(result["losses"]), torch.tensor(reference["losses"]),
                                   rtol=1e-5, atol=0)
        assert result["weights"], rank
        for name, value in result["weights"].items():  # a pipeline stage holds its own layers
            # AdamW's first steps move a weight by about lr * g / (|g| + eps): where g is near eps, a reordered sum
            # moves it visibly (one element of 8192 by 1.5e-4 here); Muon's directions are smooth in the gradient
            atol = 1e-5 if is_matrix(name, value) else 5e-4
            torch.testing.assert_close(value, reference["weights"][name], rtol=1e-4, atol=atol,
                                       msg=lambda text, name=name: f"rank {rank} {name}: {text}")


def test_blockwise_depends_on_the_tp_size(one_process, world2) -> None:
    """Megatron's default orthogonalises each TP slice alone: the weights leave the one-process run."""
    reference = one_process["dense"]["weights"]
    name = "decoder.layers.0.self_attention.linear_proj.weight"
    blockwise = world2["dense_tp2_blockwise"][0]["weights"][name]
    assert not torch.allclose(blockwise, reference[name], rtol=1e-3, atol=1e-4)
    torch.testing.assert_close(world2["dense_tp2"][0]["weights"][name], reference[name], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("config", ["resume_distopt", "resume_distopt_legacy", "resume_tp2_legacy",
                                    "resume_sgd_distopt"])
def test_a_run_resumes_exactly(world2, config: str) -> None:
    """Two steps, a checkpoint (torch_dist or the legacy files), two more: four uninterrupted steps' losses and
    weights (Muon's momenta and AdamW's moments come back)."""
    for result in world2[config]:
        assert result["first"] + result["resumed"] == result["full"]
        for name, value in result["full_weights"].items():
            assert torch.equal(value, result["resumed_weights"][name]), name


# ---- QK-clip (MuonClip) --------------------------------------------------------------------------------------

def test_qk_clip_changes_the_run(one_process) -> None:
    assert one_process["clip"]["losses"][1:] != one_process["dense"]["losses"][1:]
    assert (one_process["clip_probe"]["first"] > 0.06).any()


@pytest.mark.parametrize("config, groups, threshold", [("clip_probe", 2, 0.06), ("mla_clip_probe", 4, 0.02)])
def test_clipped_heads_score_the_threshold_on_the_same_tokens(one_process, config: str, groups: int,
                                                              threshold: float) -> None:
    """With nothing else moving the weights, the first layer's KV groups' (MLA: heads') largest logit becomes the
    threshold, each head's logit scaled by its group's eta (the query share times the key share). (Later layers'
    inputs change with the layers before them.)"""
    result = one_process[config]
    first, second = result["first"][:4], result["second"][:4]  # layer 0's 4 heads
    per_group = first.view(groups, -1).amax(dim=1)  # [groups]
    assert (per_group > threshold).all()
    eta = torch.clamp(threshold / per_group, max=1.0).repeat_interleave(4 // groups)
    torch.testing.assert_close(second, first * eta, rtol=1e-5, atol=0)
    torch.testing.assert_close(second.view(groups, -1).amax(dim=1), torch.full((groups,), threshold), rtol=1e-5,
                               atol=0)


def test_the_query_and_key_rows_take_their_shares(one_process) -> None:
    """alpha 0.3: each group's query rows times eta^0.3, key rows times eta^0.7, value rows unchanged."""
    result = one_process["clip_probe"]
    first, before, after = result["first"], result["before"], result["after"]
    name = "decoder.layers.0.self_attention.linear_qkv.weight"
    eta = torch.clamp(0.06 / first[:4].view(2, 2).amax(dim=1), max=1.0)  # layer 0's 2 groups of 2 heads
    q, k, v = (after[name] / before[name]).split([64, 32, 32])  # rows: 4 heads, 2 groups, 2 groups of 16
    torch.testing.assert_close(q, eta.pow(0.3).repeat_interleave(32)[:, None].expand_as(q), rtol=1e-5, atol=0)
    torch.testing.assert_close(k, eta.pow(0.7).repeat_interleave(16)[:, None].expand_as(k), rtol=1e-5, atol=0)
    torch.testing.assert_close(v, torch.ones_like(v))
