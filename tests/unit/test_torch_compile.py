"""``--use-torch-compile`` (regional compilation of each transformer layer), on one process.

* Three training steps of a 2-layer model (hidden 64, seq 32, fp32, SwiGLU, RMSNorm) with the layers
  compiled by inductor give the eager run's losses and gradients (``main_grad`` after each step) within
  1e-5; so does the run with full recompute and dropout on (inductor draws eager's random numbers), and
  selective recompute. The compiled layers really are compiled (dynamo compiled graphs), and the state dict's
  names are the eager model's.
* ``run`` prints one compile line after the first step: layers, compile seconds, graphs and graph breaks.
* A backend that raises while compiling ends the run with one line naming the fallback (run without
  --use-torch-compile), and an unknown backend name is refused in validation.

TP=2 with sequence parallelism, PP=2 with VPP and FSDP2 are in tests/distributed/test_torch_compile.py.

    python -m pytest -q tests/unit/test_torch_compile.py
"""
from __future__ import annotations

from typing import Dict, List, Tuple

import pytest
import torch

from core.transformer.compile import compile_failure
from mindspeed_llm.arguments import ArgumentError, parse_args, validate_args
from mindspeed_llm.training.training import run, setup

ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "32",
    "--swiglu", "--normalization", "RMSNorm", "--micro-batch-size", "2", "--global-batch-size", "4",
    "--train-iters", "3", "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "100",
    "--seed", "5", "--device", "cpu", "--num-workers", "0", "--log-interval", "1", "--eval-iters", "0",
]
NO_DROPOUT = ["--hidden-dropout", "0", "--attention-dropout", "0"]
COMPILE = ["--use-torch-compile"]
STEPS = 3
TOLERANCE = 1e-5


def _train(argv: List[str]) -> Tuple[List[float], List[Dict[str, torch.Tensor]], List[str]]:
    """Losses and every step's gradients of ``STEPS`` steps, and the state dict's names."""
    trainer = setup(argv)
    iterator = trainer.train_iterator()
    losses, grads = [], []
    for _ in range(STEPS):
        losses.append(trainer.train_step(iterator).loss)
        grads.append({name: p.main_grad.detach().clone() for name, p in trainer.model.named_parameters()})
    return losses, grads, list(trainer.model.state_dict())


def _assert_close(compiled: Tuple, eager: Tuple) -> None:
    (losses, grads, names), (eager_losses, eager_grads, eager_names) = compiled, eager
    assert names == eager_names  # in-place compilation: no ``_orig_mod.`` in any name
    assert max(abs(a - b) for a, b in zip(losses, eager_losses)) <= TOLERANCE, (losses, eager_losses)
    assert len(set(eager_losses)) == STEPS  # training moves
    for step, (got, want) in enumerate(zip(grads, eager_grads)):
        for name, value in want.items():
            assert torch.allclose(got[name], value, rtol=0, atol=TOLERANCE), f"step {step} {name}"


def _compiled_graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


@pytest.mark.parametrize("extra", [
    pytest.param(NO_DROPOUT, id="plain"),
    pytest.param(["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"],
                 id="full_recompute_dropout"),
    pytest.param(NO_DROPOUT + ["--recompute-granularity", "selective"], id="selective_recompute"),
])
def test_compiled_layers_equal_eager(extra: List[str]) -> None:
    import torch._dynamo

    eager = _train(ARGV + extra)
    torch._dynamo.reset()  # this run compiles its own graphs (inductor's on-disk cache still helps)
    graphs = _compiled_graphs()
    compiled = _train(ARGV + extra + COMPILE)
    assert _compiled_graphs() > graphs  # the layers ran compiled
    _assert_close(compiled, eager)


def test_compile_line_after_the_first_step(capsys: pytest.CaptureFixture) -> None:
    run(ARGV + NO_DROPOUT + COMPILE + ["--train-iters", "2", "--torch-compile-backend", "aot_eager"])
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("torch.compile")]
    assert len(lines) == 1, lines
    assert lines[0].startswith("torch.compile (aot_eager): 2 layers compiled regionally; ")
    assert "s of compilation in the first step" in lines[0] and "graph breaks" in lines[0]


def _failing_backend(graph: torch.fx.GraphModule, example_inputs: list) -> None:
    raise RuntimeError("no C compiler found\nsecond line of a long explanation")


def test_a_backend_that_fails_gives_one_line(capsys: pytest.CaptureFixture) -> None:
    import torch._dynamo

    if "failing_for_test" not in torch._dynamo.list_backends(exclude_tags=()):
        torch._dynamo.register_backend(_failing_backend, name="failing_for_test")
    torch._dynamo.reset()  # no cached graph from another test may spare this run its compilation
    with pytest.raises(SystemExit) as exit_info:
        run(ARGV + NO_DROPOUT + COMPILE + ["--torch-compile-backend", "failing_for_test"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --use-torch-compile: "), err
    assert "no C compiler found" in err[0] and err[0].endswith("run without --use-torch-compile")
    assert compile_failure(ValueError("unrelated")) is None  # other errors keep their traceback


def test_unknown_backend_and_backend_without_the_flag_are_refused() -> None:
    with pytest.raises(ArgumentError, match=r"--torch-compile-backend nonesuch .*run without --use-torch-compile"):
        validate_args(parse_args(ARGV + COMPILE + ["--torch-compile-backend", "nonesuch"]), 1)
    with pytest.raises(ArgumentError, match="--torch-compile-backend.*--use-torch-compile"):
        validate_args(parse_args(ARGV + ["--torch-compile-backend", "aot_eager"]), 1)
