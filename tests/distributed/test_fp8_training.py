"""FP8 (``--fp8-format``/``--fp8-recipe``) does not depend on the layout.

* The FP8 linear itself at TP 2, column- and row-parallel, forward and backward, every recipe and format: the
  one-process product to fp32 rounding (a GEMM's blocking depends on its shape; the amax of every scale a split cuts is taken over the TP group; one
  scale taken locally would move elements by whole FP8 steps).
* The trainer (fp32 weights, the decoder's linears in FP8): DP 2 with the distributed optimizer and PP 2 give the
  one-process step's loss and gradients (fp32 tolerance), and every recipe with TP 2 + SP trains as one process
  does over three steps (losses within 1e-3). TP itself sums the row-parallel partial products in another order,
  a 1e-7 relative change that moves the rare element sitting on a rounding boundary by one FP8 step (measured
  on this model: up to 7% of a gradient's largest entry after the E5M2 rounding of one element), so the exact
  check of TP is the linear's, where the inputs are the same.
* Each recipe changes the run: the one-process losses of every recipe and of the run without FP8 differ.

    python -m pytest tests/distributed/test_fp8_training.py -q
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
import torch

from core.launcher import run_distributed
from core.parallel_state import initialize
from core.quantization.fp8 import SPLIT_IN, SPLIT_OUT, DelayedScaling, Fp8Recipe, fp8_linear, update_delayed_scaling
from core.tensor_parallel.mappings import all_gather_along_dim, all_reduce
from core.tensor_parallel.param_meta import gather_full_tensor, param_meta
from tests.distributed.test_training_equivalence import by_config

MODEL = [
    "--num-layers", "2", "--hidden-size", "256", "--ffn-hidden-size", "512", "--num-attention-heads", "4",
    "--seq-length", "32", "--max-position-embeddings", "32", "--position-embedding-type", "rope",
    "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear", "--attention-dropout", "0",
    "--hidden-dropout", "0", "--micro-batch-size", "2", "--global-batch-size", "8", "--train-iters", "3",
    "--lr", "1e-3", "--lr-warmup-iters", "1", "--lr-decay-style", "cosine", "--weight-decay", "0.1",
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128", "--seed", "7", "--device", "cpu",
    "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1",
    "--untie-embeddings-and-output-weights", "--make-vocab-size-divisible-by", "64",
]
RECIPES = {
    "tensorwise": ["--fp8-format", "hybrid", "--fp8-recipe", "tensorwise"],
    "rowwise": ["--fp8-format", "e4m3", "--fp8-recipe", "rowwise"],
    "blockwise": ["--fp8-format", "e4m3", "--fp8-recipe", "blockwise"],
    "mxfp8": ["--fp8-format", "hybrid", "--fp8-recipe", "mxfp8"],
    "hif8": ["--fp8-format", "hif8", "--fp8-recipe", "tensorwise"],
    "delayed": ["--fp8-format", "hybrid", "--fp8-recipe", "delayed", "--fp8-amax-history-len", "2",
                "--fp8-amax-compute-algo", "max"],
}
TP2_SP = ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
STEPS = 3


def run_training(argv: List[str]) -> Dict[str, object]:
    """Three steps: every step's loss, and the first step's gradients and updated weights (unsharded over TP),
    before any update could move a weight across a rounding boundary (under the distributed optimizer a rank's
    gradient buffer holds its own shard's sums only: its weights are compared)."""
    from mindspeed_llm.training.training import setup

    trainer = setup(argv)
    iterator = trainer.train_iterator()
    losses, grads, weights = [trainer.train_step(iterator).loss], {}, {}
    group = trainer.state.tp_group
    for name, param in trainer.model.named_parameters():
        grads[name] = gather_full_tensor(param.main_grad, param_meta(param).tp_shard, group)
        weights[name] = gather_full_tensor(param.detach(), param_meta(param).tp_shard, group)
    scales = {name: module.fp8_state.scale.clone() for name, module in trainer.model.named_modules()
              if getattr(module, "fp8_state", None) is not None}  # delayed: the scales step 2 uses
    losses += [trainer.train_step(iterator).loss for _ in range(STEPS - 1)]
    return {"losses": losses, "grads": grads, "weights": weights, "scales": scales}


def worker(rank: int, world_size: int, configs: Dict[str, List[str]]) -> Dict[str, object]:
    return {name: run_training(argv) for name, argv in configs.items()}


@pytest.fixture(scope="module")
def references() -> Dict[str, Dict]:
    configs = {name: MODEL + flags for name, flags in RECIPES.items()}
    configs["high_precision"] = MODEL
    return run_distributed(1, worker, configs)[0]


@pytest.fixture(scope="module")
def world2() -> Dict[str, List[Dict]]:
    configs = {f"{name}_tp2_sp": MODEL + flags + TP2_SP for name, flags in RECIPES.items()}
    configs["tensorwise_dp2_distopt"] = MODEL + RECIPES["tensorwise"] + ["--use-distributed-optimizer"]
    configs["blockwise_pp2"] = MODEL + RECIPES["blockwise"] + ["--pipeline-model-parallel-size", "2"]
    configs["delayed_dp2"] = MODEL + RECIPES["delayed"]
    return by_config(run_distributed(2, worker, configs))


def test_each_recipe_changes_the_run(references) -> None:
    losses = {name: tuple(result["losses"]) for name, result in references.items()}
    assert len(set(losses.values())) == len(losses), losses


@pytest.mark.parametrize("config, recipe", [("tensorwise_dp2_distopt", "tensorwise"), ("blockwise_pp2", "blockwise"),
                                            ("delayed_dp2", "delayed")])
def test_dp2_distributed_optimizer_and_pp2_equal_one_process(references, world2, config: str, recipe: str) -> None:
    reference = references[recipe]
    kinds = ("weights",) if "distopt" in config else ("grads", "weights")
    for rank, result in enumerate(world2[config]):
        torch.testing.assert_close(result["losses"][0], reference["losses"][0], rtol=1e-6, atol=0)
        assert result["weights"], rank
        for kind in kinds:
            for name, value in result[kind].items():  # a pipeline stage holds its own layers
                torch.testing.assert_close(value, reference[kind][name], rtol=1e-5, atol=1e-7,
                                           msg=lambda text, key=f"{kind} {name}": f"rank {rank} {key}: {text}")


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_tp2_with_sequence_parallelism_trains_as_one_process(references, world2, name: str) -> None:
    for result in world2[f"{name}_tp2_sp"]:
        torch.testing.assert_close(torch.tensor(result["losses"]), torch.tensor(references[name]["losses"]),
                                   rtol=1e-3, atol=0)


LINEAR_CASES: List[Tuple[str, str]] = [("e4m3", "tensorwise"), ("hybrid", "tensorwise"), ("hif8", "tensorwise"),
                                       ("e4m3", "rowwise"), ("e4m3", "blockwise"), ("hybrid", "blockwise"),
                                       ("e4m3", "mxfp8"), ("hybrid", "mxfp8"), ("hybrid", "delayed")]


def linear_worker(rank: int, world_size: int) -> Dict[Tuple[str, str], Dict[str, torch.Tensor]]:
    """Column- and row-parallel FP8 products of the same full tensors; outputs and gradients made whole."""
    group = initialize(tp=world_size).tp_group
    results = {}
    for fmt, recipe_name in LINEAR_CASES:
        recipe = Fp8Recipe(fmt, recipe_name, amax_history_len=2, amax_compute_algo="max")
        delayed = recipe_name == "delayed"
        states = (DelayedScaling(recipe), DelayedScaling(recipe)) if delayed else (None, None)
        for step in range(2 if delayed else 1):  # delayed: step 2 quantises with the scales step 1 reduced over TP
            generator = torch.Generator().manual_seed(step)
            x, weight = torch.randn(72, 256, generator=generator), torch.randn(384, 256, generator=generator) * 0.1
            grad_y = torch.randn(72, 384, generator=generator)
            column_w = weight.chunk(world_size, 0)[group.rank].clone().requires_grad_(True)
            column_x = x.clone().requires_grad_(True)
            column_y = fp8_linear(column_x, column_w, recipe, SPLIT_OUT if world_size > 1 else None, group,
                                  states[0])
            column_y.backward(grad_y.chunk(world_size, 1)[group.rank])
            row_w = weight.t().contiguous().chunk(world_size, 1)[group.rank].clone().requires_grad_(True)
            row_x = grad_y.chunk(world_size, 1)[group.rank].clone().requires_grad_(True)  # [72, 384/tp]
            row_y = fp8_linear(row_x, row_w, recipe, SPLIT_IN if world_size > 1 else None, group, states[1])
            row_y.backward(x)
            if delayed:
                update_delayed_scaling(list(states), (group,))
        results[(fmt, recipe_name)] = {
            "column_y": all_gather_along_dim(column_y.detach().contiguous(), 1, group),
            "column_dx": all_reduce(column_x.grad.clone(), group),
            "column_dw": all_gather_along_dim(column_w.grad.contiguous(), 0, group),
            "row_y": all_reduce(row_y.detach().clone(), group),
            "row_dx": all_gather_along_dim(row_x.grad.contiguous(), 1, group),
            "row_dw": all_gather_along_dim(row_w.grad.contiguous(), 1, group)}
    return results


def test_the_fp8_linear_at_tp2_equals_one_process() -> None:
    one = run_distributed(1, linear_worker)[0]
    for rank_result in run_distributed(2, linear_worker):
        for case, tensors in rank_result.items():
            for key, value in tensors.items():  # row_y and column_dx sum the ranks' partial products
                torch.testing.assert_close(value, one[case][key], rtol=1e-5, atol=1e-5,
                                           msg=lambda text, case=case, key=key: f"{case} {key}: {text}")


@pytest.mark.parametrize("config, dp", [("delayed_dp2", 2)])
def test_delayed_scales_are_reduced_as_one_process_sees_them(references, world2, config: str, dp: int) -> None:
    """After step 1 every rank holds the scales one process computed from all of the step's tensors (the
    amaxes reduced over DP). A DP rank's gradients are DP times one process's (DP averages them after), so its
    gradient scale is 1/DP of one process's: the same quantised numbers. (TP's reduction of the amaxes is checked
    on the linear, where the inputs are the same: see test_the_fp8_linear_at_tp2_equals_one_process.)"""
    reference = references["delayed"]["scales"]
    assert len(reference) == 8 and all(not torch.equal(scale, torch.ones(3)) for scale in reference.values())
    for result in world2[config]:
        assert result["scales"].keys() == reference.keys()
        for name, scale in result["scales"].items():
            torch.testing.assert_close(scale * torch.tensor([1.0, 1.0, dp]), reference[name], rtol=1e-6, atol=0)


def histories(trainer) -> Dict[str, torch.Tensor]:
    return {name: module.fp8_state.history.clone() for name, module in trainer.model.named_modules()
            if getattr(module, "fp8_state", None) is not None and module.fp8_state.history is not None}


def resume_worker(rank: int, world_size: int, ckpt: str) -> Dict[str, Dict[str, object]]:
    """Per checkpoint format: four steps straight, and two steps + a save + two more from it."""
    from mindspeed_llm.training.training import setup, train

    argv = MODEL + RECIPES["delayed"] + ["--train-iters", "4"]
    full = setup(argv)
    iterator = full.train_iterator()
    for _ in range(4):
        full.train_step(iterator)
    results = {}
    for ckpt_format in ("torch", "torch_dist"):
        directory = f"{ckpt}_{ckpt_format}"
        formatted = argv + ["--ckpt-format", ckpt_format]
        first = train(setup(formatted + ["--save", directory, "--save-interval", "2", "--exit-interval", "2"]))
        resumed = setup(formatted + ["--load", directory])
        loaded = histories(resumed)
        iterator = resumed.train_iterator()
        for _ in range(2):
            resumed.train_step(iterator)
        results[ckpt_format] = {"full": full.losses, "first": first.losses, "resumed": resumed.losses,
                                "saved_history": histories(first), "loaded_history": loaded,
                                "full_history": histories(full), "resumed_history": histories(resumed),
                                "directory": directory}
    return results


def load_worker(rank: int, world_size: int, directory: str) -> Dict[str, torch.Tensor]:
    """The histories a TP 2 run reads from a one-process torch_dist checkpoint, before any step."""
    from mindspeed_llm.training.training import setup

    argv = MODEL + RECIPES["delayed"] + ["--train-iters", "4", "--ckpt-format", "torch_dist", "--load", directory]
    return histories(setup(argv + ["--tensor-model-parallel-size", "2"]))


@pytest.fixture(scope="module")
def resumed(tmp_path_factory) -> Dict[str, Dict[str, object]]:
    return run_distributed(1, resume_worker, str(tmp_path_factory.mktemp("fp8") / "ckpt"))[0]


@pytest.mark.parametrize("ckpt_format", ["torch", "torch_dist"])
def test_a_delayed_run_resumes_exactly(resumed, ckpt_format: str) -> None:
    """Two steps, a checkpoint, two more from it: the losses and amax histories of four uninterrupted steps."""
    result = resumed[ckpt_format]
    assert result["first"] + result["resumed"] == result["full"]
    assert result["full_history"].keys() == result["resumed_history"].keys() and result["full_history"]
    for name, history in result["full_history"].items():
        assert torch.equal(history, result["resumed_history"][name]), name
        assert torch.equal(result["loaded_history"][name], result["saved_history"][name]), name


def test_torch_dist_histories_load_at_another_layout(resumed) -> None:
    """The histories are the same at every layout (reduced over TP and DP x CP), so a TP 2 run reads the
    one-process run's, whole, from the torch_dist checkpoint."""
    saved = resumed["torch_dist"]["saved_history"]
    for rank_histories in run_distributed(2, load_worker, resumed["torch_dist"]["directory"]):
        assert rank_histories.keys() == saved.keys()
        for name, history in rank_histories.items():
            assert torch.equal(history, saved[name]) and history.abs().sum() > 0, name


def test_delayed_weight_scales_at_tp2_are_the_whole_weights(references, world2) -> None:
    """The weights are the same before step 1 at any layout: after it, each TP rank's weight scale is the one
    of the whole weight (its amax reduced over TP), as one process computes it."""
    reference = references["delayed"]["scales"]
    for result in world2["delayed_tp2_sp"]:
        for name, scale in result["scales"].items():
            assert scale[1] == reference[name][1], name
