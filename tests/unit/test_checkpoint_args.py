"""``--use-checkpoint-args``: a converted checkpoint trains with no architecture flag.

A tiny random HF Llama is converted to mg at TP 1 with ``tools/convert_ckpt.py``;
``setup([... '--load', DIR, '--use-checkpoint-args', '--finetune', training flags])``
takes every architecture flag from it and its first training step gives the loss
of the same run with the flags written out. A flag that contradicts the
checkpoint, the flag without ``--load`` and a ``--load`` directory without a
checkpoint are one-line ArgumentErrors raised by ``parse_args``. The model
converted at TP 2 trains at TP 2 (one 2-process launch) with the TP-1 loss.

    python -m pytest tests/unit/test_checkpoint_args.py -q
"""
from __future__ import annotations

import os
from typing import List

import pytest
import torch
import transformers

from core.checkpointing import read_checkpoint_settings
from core.transformer.config import RUNTIME_CONFIG_FIELDS
from core.launcher import run_distributed
from core.transformer.config import TransformerConfig
from mindspeed_llm.arguments import ArgumentError, parse_args
from mindspeed_llm.training.training import setup
from tools.convert_ckpt import main as convert_main

HF = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
          vocab_size=128, max_position_embeddings=256, rms_norm_eps=1e-6, rope_theta=5000.0)
TRAINING = ["--seq-length", "32", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "2",
            "--lr", "1e-3", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu",
            "--eval-iters", "0", "--log-interval", "1000", "--hidden-dropout", "0", "--attention-dropout", "0",
            "--finetune"]
ARCHITECTURE = ["--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
                "--group-query-attention", "--num-query-groups", "2", "--normalization", "RMSNorm",
                "--norm-epsilon", "1e-6", "--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights",
                "--vocab-size", "128", "--make-vocab-size-divisible-by", "1", "--max-position-embeddings", "256",
                "--rotary-base", "5000"]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("ckpt_args") / "hf")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**HF, dtype="float32")).save_pretrained(path)
    return path


def to_mg(hf_dir: str, tp: int) -> str:
    out = os.path.join(os.path.dirname(hf_dir), f"mg_tp{tp}")
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", hf_dir,
                         "--save-dir", out, "--target-tensor-parallel-size", str(tp)]) == 0
    return out


@pytest.fixture(scope="module")
def mg_dir(hf_dir: str) -> str:
    return to_mg(hf_dir, 1)


def first_loss(argv: List[str]) -> float:
    trainer = setup(argv)
    return trainer.train_step(trainer.train_iterator()).loss


def tp2_worker(rank: int, world_size: int, load: str) -> float:
    return first_loss(TRAINING + ["--load", load, "--use-checkpoint-args", "--tensor-model-parallel-size", "2"])


def test_tp2_step_with_checkpoint_args_gives_the_tp1_loss(hf_dir: str, mg_dir: str) -> None:
    """The same HF model converted at TP 2 trains at TP 2 with no architecture flag: the TP-1 loss
    (vocabulary 128: no padding at either TP size, whose extra logits would change the loss)."""
    tp1 = first_loss(TRAINING + ["--load", mg_dir, "--use-checkpoint-args"])
    losses = run_distributed(2, tp2_worker, to_mg(hf_dir, 2))
    assert losses[0] == pytest.approx(tp1, rel=1e-5) and losses[1] == pytest.approx(tp1, rel=1e-5)


def test_converter_stores_the_architecture(mg_dir: str) -> None:
    _, args, config = read_checkpoint_settings(mg_dir)
    architecture = {f for f in TransformerConfig.__dataclass_fields__ if f not in RUNTIME_CONFIG_FIELDS}
    assert architecture <= set(config)
    assert (config["num_layers"], config["num_query_groups"], config["rotary_base"]) == (2, 2, 5000.0)
    assert args.model_type_hf == "llama2" and args.num_layers == 2


def test_training_takes_every_architecture_flag_from_the_checkpoint(mg_dir: str) -> None:
    base = TRAINING + ["--load", mg_dir]
    args = parse_args(base + ["--use-checkpoint-args"])
    assert (args.num_layers, args.hidden_size, args.num_query_groups, args.activation, args.disable_bias_linear,
            args.vocab_size, args.normalization) == (2, 64, 2, "swiglu", True, 128, "RMSNorm")
    with_checkpoint_args = first_loss(base + ["--use-checkpoint-args"])
    with_flags = first_loss(base + ARCHITECTURE)
    assert with_checkpoint_args == with_flags
    assert first_loss(base + ["--use-checkpoint-args", "--num-layers", "2", "--swiglu"]) == with_flags


@pytest.mark.parametrize("extra, message", [
    (["--num-layers", "3"], r"^--num-layers 3 contradicts the checkpoint's 2 \("),
    (["--rotary-base", "10000"], r"^--rotary-base 10000.0 contradicts the checkpoint's 5000.0 \("),
    (["--untie-embeddings-and-output-weights", "--disable-bias-linear", "--hidden-size", "128"],
     r"^--hidden-size 128 contradicts the checkpoint's 64"),
])
def test_contradicting_flag_is_refused(mg_dir: str, extra: List[str], message: str) -> None:
    with pytest.raises(ArgumentError, match=message) as error:
        parse_args(TRAINING + ["--load", mg_dir, "--use-checkpoint-args"] + extra)
    assert "\n" not in str(error.value)


def test_refusals_without_a_checkpoint(tmp_path) -> None:
    with pytest.raises(ArgumentError, match=r"^--use-checkpoint-args needs --load"):
        parse_args(TRAINING + ["--use-checkpoint-args"])
    with pytest.raises(ArgumentError, match=r"^--use-checkpoint-args: --load .* has no latest_checkpointed_iteration"):
        parse_args(TRAINING + ["--use-checkpoint-args", "--load", str(tmp_path)])
    with pytest.raises(ArgumentError, match=r"^--use-checkpoint-args: --load .*missing.*: no such directory"):
        parse_args(TRAINING + ["--use-checkpoint-args", "--load", str(tmp_path / "missing")])
