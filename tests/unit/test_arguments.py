"""Flags, YAML defaults, derived fields and every validation message of mindspeed_llm.arguments."""
from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import List

import pytest
import torch

from mindspeed_llm.arguments import (ArgumentError, parse_and_validate, parse_args, set_vocab_size,
                                     transformer_config_from_args, validate_args)

BASE = ["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "8", "--seq-length", "32",
        "--micro-batch-size", "2", "--train-iters", "100", "--lr", "1e-3"]


def _argv(*extra: str) -> List[str]:
    return BASE + list(extra)


def _error(argv: List[str], world_size: int = 1) -> str:
    """The one-line ArgumentError message that parse + validate raise for ``argv``."""
    with pytest.raises(ArgumentError) as info:
        validate_args(parse_args(argv), world_size)
    message = str(info.value)
    assert "\n" not in message
    return message


def _write_yaml(tmp_path: Path, text: str) -> str:
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    return str(path)


# ----------------------------------------------------------------------------- defaults, derived

def test_megatron_defaults() -> None:
    args = parse_args(_argv())
    assert args.make_vocab_size_divisible_by == 128
    assert args.attention_dropout == 0.1 and args.hidden_dropout == 0.1
    assert args.init_method_std == 0.02
    assert args.weight_decay == 0.01 and args.clip_grad == 1.0
    assert (args.adam_beta1, args.adam_beta2, args.adam_eps) == (0.9, 0.999, 1e-8)
    assert args.initial_loss_scale == 2.0**32 and args.min_loss_scale == 1.0
    assert args.loss_scale_window == 1000 and args.hysteresis == 2 and args.loss_scale is None
    assert args.seed == 1234 and args.log_interval == 100
    assert args.eval_interval == 1000 and args.eval_iters == 100
    assert args.min_lr == 0.0 and args.label_smoothing_factor == 0.0
    assert args.optimizer == "adam" and args.device is None and args.distributed_backend is None
    assert args.use_distributed_optimizer is False


def test_derived_fields() -> None:
    args = parse_args(_argv("--bf16", "--vocab-size", "1000", "--tensor-model-parallel-size", "2"))
    assert args.params_dtype == torch.bfloat16
    assert args.max_position_embeddings == 32
    assert args.lr_decay_iters == 100 and args.lr_warmup_iters == 0
    assert args.num_query_groups is None
    assert args.ffn_hidden_size == 256
    assert args.padded_vocab_size == 1024  # multiple of 128 x TP 2
    assert parse_args(_argv("--fp16")).params_dtype == torch.float16
    assert parse_args(_argv()).params_dtype == torch.float32


def test_padded_vocab_and_set_vocab_size() -> None:
    args = parse_args(_argv("--vocab-size", "1025", "--tensor-model-parallel-size", "2"))
    assert args.padded_vocab_size == 1280
    set_vocab_size(args, 32001)
    assert (args.vocab_size, args.padded_vocab_size) == (32001, 32256)
    assert parse_args(_argv()).padded_vocab_size is None


def test_swiglu_ffn_default_is_megatrons() -> None:
    args = parse_args(["--hidden-size", "4096", "--swiglu"])
    assert args.ffn_hidden_size == 10880  # int(4 * 4096 * 2 / 3 / 64) * 64
    assert parse_args(["--hidden-size", "64", "--ffn-hidden-size", "100"]).ffn_hidden_size == 100


def test_group_query_attention_implies_groups() -> None:
    assert parse_args(_argv("--group-query-attention", "--num-query-groups", "2")).num_query_groups == 2
    assert parse_args(_argv("--group-query-attention")).num_query_groups == 1
    # Megatron ignores the groups without --group-query-attention; here that is refused, not silent.
    message = _error(_argv("--num-query-groups", "2"))
    assert "--num-query-groups has no effect without --group-query-attention" in message


def test_warmup_from_fraction_and_decay_iters() -> None:
    args = parse_args(_argv("--lr-warmup-fraction", "0.29"))
    assert args.lr_warmup_iters == 29  # rounded, not floored (0.29 * 100 = 28.999...)
    args = parse_args(_argv("--lr-decay-iters", "50", "--lr-warmup-fraction", "0.1"))
    assert (args.lr_decay_iters, args.lr_warmup_iters) == (50, 5)


def test_max_position_embeddings_kept_when_given() -> None:
    assert parse_args(_argv("--max-position-embeddings", "128")).max_position_embeddings == 128


def test_backend_follows_device() -> None:
    assert parse_args(_argv("--device", "cpu")).distributed_backend == "gloo"
    assert parse_args(_argv("--device", "cuda")).distributed_backend == "nccl"
    assert parse_args(_argv("--device", "npu")).distributed_backend == "hccl"
    explicit = parse_args(_argv("--device", "cuda", "--distributed-backend", "gloo"))
    assert explicit.distributed_backend == "gloo"


def test_validate_fills_batch_fields() -> None:
    args = parse_args(_argv("--tensor-model-parallel-size", "2"))
    validate_args(args, 8)
    assert (args.world_size, args.data_parallel_size) == (8, 4)
    assert args.global_batch_size == 8 and args.num_micro_batches == 1
    args = parse_args(_argv("--global-batch-size", "32"))
    validate_args(args, 2)
    assert args.num_micro_batches == 8


def test_noop_layers_and_vpp() -> None:
    args = parse_args(_argv("--noop-layers", "1,3", "--pipeline-model-parallel-size", "2",
                            "--num-layers-per-virtual-pipeline-stage", "1", "--global-batch-size", "4"))
    validate_args(args, 2)
    assert args.noop_layers == (1, 3) and args.virtual_pipeline_model_parallel_size == 2


def test_use_distributed_optimizer_is_accepted() -> None:
    args = parse_args(_argv("--use-distributed-optimizer"))
    validate_args(args, 2)
    assert args.use_distributed_optimizer is True


def test_explicit_args_records_what_was_given() -> None:
    args = parse_args(_argv("--seed", "1234"))
    assert args.explicit_args["seed"] == 1234  # given, even though equal to the default
    assert "hidden_dropout" not in args.explicit_args


# ----------------------------------------------------------------------------- YAML

def test_yaml_sets_values_and_cli_overrides(tmp_path: Path) -> None:
    path = _write_yaml(tmp_path, "num-layers: 2\nhidden_size: 128\nnum-attention-heads: 4\n"
                                 "seq_length: 64\nmicro-batch-size: 1\ntrain-iters: 10\nlr: 1.0e-4\n"
                                 "swiglu: true\nnormalization: RMSNorm\n"
                                 "data-path: [0.3, a, 0.7, b]\n")
    args = parse_args(["--yaml-cfg", path, "--num-layers", "6", "--lr", "3e-4"])
    assert args.num_layers == 6 and args.lr == 3e-4  # command line wins
    assert args.hidden_size == 128 and args.seq_length == 64 and args.max_position_embeddings == 64
    assert args.swiglu is True and args.normalization == "RMSNorm"
    assert args.data_path == ["0.3", "a", "0.7", "b"]
    assert "hidden_size" in args.explicit_args
    validate_args(args, 1)  # required sizes may come from the YAML file


def test_yaml_string_numbers_are_converted(tmp_path: Path) -> None:
    path = _write_yaml(tmp_path, "lr: 1e-4\nnum-layers: '3'\nnoop-layers: [0, 2]\n")
    args = parse_args(["--yaml-cfg", path])
    assert args.lr == 1e-4 and args.num_layers == 3 and args.noop_layers == (0, 2)


def test_yaml_unknown_key_names_file_and_key(tmp_path: Path) -> None:
    path = _write_yaml(tmp_path, "num-layers: 2\nnum-layerz: 3\n")
    with pytest.raises(ArgumentError, match=re.escape(path) + r".*num-layerz"):
        parse_args(["--yaml-cfg", path])


def test_yaml_bad_values(tmp_path: Path) -> None:
    path = _write_yaml(tmp_path, "normalization: BatchNorm\n")
    with pytest.raises(ArgumentError, match="normalization.*BatchNorm"):
        parse_args(["--yaml-cfg", path])
    path = _write_yaml(tmp_path, "swiglu: 3\n")
    with pytest.raises(ArgumentError, match="swiglu.*true or false"):
        parse_args(["--yaml-cfg", path])
    path = _write_yaml(tmp_path, "num-layers: 2.5\n")
    with pytest.raises(ArgumentError, match="num-layers.*integer"):
        parse_args(["--yaml-cfg", path])
    path = _write_yaml(tmp_path, "- a\n- b\n")
    with pytest.raises(ArgumentError, match="mapping"):
        parse_args(["--yaml-cfg", path])
    with pytest.raises(ArgumentError, match="no such file"):
        parse_args(["--yaml-cfg", str(tmp_path / "missing.yaml")])


# ----------------------------------------------------------------------------- validation messages

def test_fp16_with_bf16() -> None:
    message = _error(_argv("--fp16", "--bf16"))
    assert "--fp16" in message and "--bf16" in message


def test_world_size_not_divisible_by_parallel_sizes() -> None:
    message = _error(_argv("--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"), 6)
    assert "world size 6" in message and "--tensor-model-parallel-size" in message
    assert "--pipeline-model-parallel-size" in message and "--context-parallel-size" in message


def test_heads_not_divisible_by_tp() -> None:
    message = _error(_argv("--num-attention-heads", "6", "--hidden-size", "48",
                           "--tensor-model-parallel-size", "4"), 4)
    assert "--num-attention-heads (6)" in message and "--tensor-model-parallel-size (4)" in message


def test_query_groups_and_tp_must_divide_one_another() -> None:
    message = _error(_argv("--group-query-attention", "--num-query-groups", "3",
                           "--num-attention-heads", "6", "--hidden-size", "48",
                           "--tensor-model-parallel-size", "2"), 2)
    assert "--num-query-groups (3)" in message and "--tensor-model-parallel-size (2)" in message
    # KV heads are replicated when TP exceeds them: groups 2, TP 4 is fine.
    validate_args(parse_args(_argv("--group-query-attention", "--num-query-groups", "2",
                                   "--tensor-model-parallel-size", "4")), 4)


def test_heads_not_multiple_of_groups() -> None:
    message = _error(_argv("--group-query-attention", "--num-query-groups", "3"))
    assert "--num-attention-heads (8)" in message and "--num-query-groups (3)" in message


def test_global_batch_not_divisible() -> None:
    message = _error(_argv("--global-batch-size", "10", "--tensor-model-parallel-size", "2"), 8)
    assert "--global-batch-size (10)" in message and "--micro-batch-size (2)" in message
    assert "data-parallel size (4" in message and "multiple of 8" in message


def test_sequence_parallel_without_tp_is_turned_off_with_a_warning() -> None:
    args = parse_args(_argv("--sequence-parallel"))
    with pytest.warns(UserWarning, match="--sequence-parallel"):
        validate_args(args, 1)
    assert args.sequence_parallel is False
    args = parse_args(_argv("--sequence-parallel", "--tensor-model-parallel-size", "2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        validate_args(args, 2)
    assert args.sequence_parallel is True


def test_load_path_must_exist(tmp_path: Path) -> None:
    missing = str(tmp_path / "no_such_ckpt")
    message = _error(_argv("--load", missing))
    assert "--load" in message and missing in message
    validate_args(parse_args(_argv("--load", str(tmp_path))), 1)  # an existing empty dir is fine


@pytest.mark.parametrize("flag", ["--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length",
                                  "--micro-batch-size", "--train-iters"])
def test_missing_required_size(flag: str) -> None:
    index = BASE.index(flag)
    argv = BASE[:index] + BASE[index + 2:]
    message = _error(argv)
    assert "missing required" in message and flag in message and "--yaml-cfg" in message


def test_missing_several_required() -> None:
    message = _error([])
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--seq-length",
                 "--micro-batch-size", "--train-iters"):
        assert flag in message


def test_mock_data_needs_vocab_size() -> None:
    message = _error(_argv("--mock-data"))
    assert "--mock-data" in message and "--vocab-size" in message
    validate_args(parse_args(_argv("--mock-data", "--vocab-size", "512")), 1)


def test_warmup_iters_with_fraction() -> None:
    message = _error(_argv("--lr-warmup-iters", "10", "--lr-warmup-fraction", "0.1"))
    assert "--lr-warmup-iters" in message and "--lr-warmup-fraction" in message


def test_min_lr_above_lr() -> None:
    message = _error(_argv("--min-lr", "1e-2"))
    assert "--min-lr (0.01)" in message and "--lr (0.001)" in message


def test_warmup_not_shorter_than_decay() -> None:
    message = _error(_argv("--lr-warmup-iters", "100"))
    assert "--lr-decay-iters (100" in message


def test_wsd_needs_decay_iters() -> None:
    assert "--lr-wsd-decay-iters" in _error(_argv("--lr-decay-style", "WSD"))
    too_long = _argv("--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "200")
    assert "--lr-wsd-decay-iters (200)" in _error(too_long)
    validate_args(parse_args(_argv("--lr-decay-style", "WSD", "--lr-wsd-decay-iters", "20")), 1)


def test_tokenizers_need_their_files(tmp_path: Path) -> None:
    message = _error(_argv("--tokenizer-type", "NullTokenizer"))
    assert "--tokenizer-type NullTokenizer" in message and "--vocab-size" in message
    assert "--tokenizer-name-or-path" in _error(_argv("--tokenizer-type", "PretrainedFromHF"))
    assert "--tokenizer-model" in _error(_argv("--tokenizer-type", "SentencePieceTokenizer"))
    assert "--vocab-file" in _error(_argv("--tokenizer-type", "GPT2BPETokenizer"))
    vocab = tmp_path / "vocab.json"
    vocab.write_text("{}")
    gpt2 = ("--tokenizer-type", "GPT2BPETokenizer", "--vocab-file", str(vocab))
    assert "--merge-file" in _error(_argv(*gpt2))
    missing = str(tmp_path / "merges.txt")
    assert _error(_argv(*gpt2, "--merge-file", missing)) == f"--merge-file {missing}: no such file; fix the path"
    missing = str(tmp_path / "sp.model")
    assert _error(_argv("--tokenizer-type", "SentencePieceTokenizer", "--tokenizer-model", missing)).startswith(
        f"--tokenizer-model {missing}: no such file")


def test_save_interval_needs_save(tmp_path: Path) -> None:
    message = _error(_argv("--save-interval", "10"))
    assert "--save-interval" in message and "--save " in message
    validate_args(parse_args(_argv("--save-interval", "10", "--save", str(tmp_path))), 1)


def test_pipeline_layers_and_vpp_messages() -> None:
    message = _error(_argv("--num-layers", "3", "--pipeline-model-parallel-size", "2"), 2)
    assert "--num-layers (3)" in message and "--pipeline-model-parallel-size (2)" in message
    message = _error(_argv("--num-layers-per-virtual-pipeline-stage", "1"))
    assert "--num-layers-per-virtual-pipeline-stage" in message
    message = _error(_argv("--noop-layers", "4"))
    assert "--noop-layers [4]" in message


def test_hidden_not_divisible_by_heads_without_kv_channels() -> None:
    message = _error(_argv("--hidden-size", "60"))
    assert "--hidden-size (60)" in message and "--kv-channels" in message
    validate_args(parse_args(_argv("--hidden-size", "60", "--kv-channels", "8")), 1)


def test_backend_device_mismatch() -> None:
    message = _error(_argv("--device", "cpu", "--distributed-backend", "nccl"))
    assert "--distributed-backend nccl" in message and "--device cuda" in message


def test_bad_flag_values_raise_argument_error() -> None:
    with pytest.raises(ArgumentError, match="position-embedding-type"):
        parse_args(_argv("--position-embedding-type", "no_such_type"))
    with pytest.raises(ArgumentError, match="unrecognized"):
        parse_args(_argv("--no-such-flag"))


def test_parse_and_validate_prints_error_and_exits_2(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit) as info:
        parse_and_validate(_argv("--fp16", "--bf16"), 1)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "--fp16" in err and err.count("\n") == 1
    args = parse_and_validate(_argv(), 2)
    assert args.data_parallel_size == 2


# ----------------------------------------------------------------------------- model config

def test_transformer_config_from_args() -> None:
    args = parse_args(_argv("--vocab-size", "1000", "--group-query-attention", "--num-query-groups", "2",
                            "--normalization", "RMSNorm", "--norm-epsilon", "1e-6", "--swiglu",
                            "--disable-bias-linear", "--add-qkv-bias",
                            "--untie-embeddings-and-output-weights", "--rotary-base", "500000",
                            "--rope-scaling-type", "llama3", "--rope-scaling-factor", "8",
                            "--low-freq-factor", "2", "--high-freq-factor", "5",
                            "--original-max-position-embeddings", "4096", "--bf16",
                            "--tensor-model-parallel-size", "2", "--sequence-parallel",
                            "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
                            "--noop-layers", "3"))
    validate_args(args, 2)
    config = transformer_config_from_args(args)
    assert (config.num_layers, config.hidden_size, config.num_attention_heads) == (4, 64, 8)
    assert config.num_query_groups == 2 and config.kv_channels == 8
    assert config.ffn_hidden_size == args.ffn_hidden_size
    assert config.normalization == "RMSNorm" and config.norm_epsilon == 1e-6
    assert config.activation == "swiglu" and not config.add_bias_linear and config.add_qkv_bias
    assert config.untie_embeddings_and_output_weights
    assert config.rotary_base == 500000 and config.rope_scaling_type == "llama3"
    rope = (config.rope_scaling_factor, config.rope_low_freq_factor, config.rope_high_freq_factor)
    assert rope == (8, 2, 5)
    assert config.rope_original_max_position_embeddings == 4096
    assert config.params_dtype == torch.bfloat16
    assert config.tensor_model_parallel_size == 2 and config.sequence_parallel
    assert config.attention_dropout == 0.0 and config.hidden_dropout == 0.0
    assert config.noop_layers == (3,)
    assert config.padded_vocab_size == args.padded_vocab_size == 1024
    assert config.max_position_embeddings == 32


def test_transformer_config_needs_vocab_size() -> None:
    args = parse_args(_argv())
    validate_args(args, 1)
    with pytest.raises(ArgumentError, match="--vocab-size"):
        transformer_config_from_args(args)
    set_vocab_size(args, 300)
    assert transformer_config_from_args(args).vocab_size == 300


# ----------------------------------------------------------------------------- one validation pass

def test_model_config_checks_run_in_validation() -> None:
    """The TransformerConfig's own checks run in validate_args, before the vocabulary is known."""
    args = parse_args(_argv("--sliding-window", "0"))
    assert args.vocab_size is None
    with pytest.raises(ArgumentError, match=r"^--sliding-window 0 must be at least 1"):
        validate_args(args, 1)
    message = _error(_argv("--ffn-hidden-size", "100", "--tensor-model-parallel-size", "8"), 8)
    assert "--ffn-hidden-size (100)" in message and "--tensor-model-parallel-size (8)" in message


RECOMPUTE_ERRORS = {
    # name: (flags, world size, the whole message or its start)
    "method_alone": (["--recompute-method", "block"], 1,
                     "--recompute-method block needs --recompute-granularity full; add it or drop --recompute-method"),
    "selective_with_method": (["--recompute-granularity", "selective", "--recompute-method", "uniform"], 1,
                              "--recompute-granularity selective takes no --recompute-method or "
                              "--recompute-num-layers"),
    "selective_with_layers": (["--recompute-granularity", "selective", "--recompute-num-layers", "1"], 1,
                              "--recompute-granularity selective takes no --recompute-method"),
    "layers_without_method": (["--recompute-num-layers", "1"], 1,
                              "--recompute-num-layers needs --recompute-granularity full and --recompute-method"),
    "full_without_method": (["--recompute-granularity", "full"], 1,
                            "--recompute-granularity full needs --recompute-method uniform|block and "
                            "--recompute-num-layers N"),
    "full_without_layers": (["--recompute-granularity", "full", "--recompute-method", "block"], 1,
                            "--recompute-granularity full needs"),
    "layers_over_stage": (["--recompute-granularity", "full", "--recompute-method", "block",
                           "--recompute-num-layers", "3", "--pipeline-model-parallel-size", "2"], 2,
                          "--recompute-num-layers (3) must be between 1 and the layers per pipeline stage (2); "
                          "lower it"),
    "layers_over_chunk": (["--recompute-granularity", "full", "--recompute-method", "uniform",
                           "--recompute-num-layers", "2", "--pipeline-model-parallel-size", "2",
                           "--num-layers-per-virtual-pipeline-stage", "1", "--global-batch-size", "4"], 2,
                          "--recompute-num-layers (2) must be between 1 and the layers per virtual pipeline chunk (1)"),
    "layers_zero": (["--recompute-granularity", "full", "--recompute-method", "uniform",
                     "--recompute-num-layers", "0"], 1, "--recompute-num-layers (0) must be between 1 and"),
}


@pytest.mark.parametrize("case", list(RECOMPUTE_ERRORS))
def test_recompute_errors(case: str) -> None:
    flags, world_size, expected = RECOMPUTE_ERRORS[case]
    assert _error(_argv(*flags), world_size).startswith(expected)


def test_valid_recompute_combinations() -> None:
    for flags, world_size in (
            (["--recompute-granularity", "selective"], 1),
            (["--recompute-activation-function"], 1),
            (["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "4"], 1),
            (["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers", "3",
              "--pipeline-model-parallel-size", "2", "--num-layer-list", "1,3"], 2)):
        args = parse_args(_argv(*flags))
        validate_args(args, world_size)
        assert transformer_config_from_args(_with_vocab(args)).recompute_granularity == args.recompute_granularity


def _with_vocab(args):
    set_vocab_size(args, 100)
    return args


def test_tensorboard_dir_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "events"
    path.write_text("")
    assert _error(_argv("--tensorboard-dir", str(path))) == (
        f"--tensorboard-dir {path} is a file, not a directory; choose a directory")
    validate_args(parse_args(_argv("--tensorboard-dir", str(tmp_path / "new"), "--log-timers-to-tensorboard",
                                   "--tensorboard-log-interval", "5")), 1)


def test_optional_logger_packages_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import mindspeed_llm.arguments as arguments

    monkeypatch.setattr(arguments, "_installed", lambda module: False)
    assert "pip install -e .[tensorboard]" in _error(_argv("--tensorboard-dir", str(tmp_path)))
    message = _error(_argv("--wandb-project", "demo"))
    assert message.startswith("--wandb-project needs the wandb package: pip install -e .[wandb]")
    monkeypatch.setattr(arguments, "_installed", lambda module: True)
    validate_args(parse_args(_argv("--wandb-project", "demo", "--wandb-exp-name", "run1",
                                   "--wandb-save-dir", str(tmp_path))), 1)


def test_wandb_is_looked_up_not_imported() -> None:
    import sys

    import mindspeed_llm.arguments as arguments

    before = set(sys.modules)
    arguments._installed("wandb")
    assert "wandb" not in set(sys.modules) - before


def test_scheduler_flags_megatron_spellings_and_exclusion() -> None:
    for spelling in ("--use-checkpoint-opt_param-scheduler", "--use-checkpoint-opt-param-scheduler"):
        assert parse_args(_argv(spelling)).use_checkpoint_opt_param_scheduler
    for spelling in ("--override-opt_param-scheduler", "--override-opt-param-scheduler"):
        assert parse_args(_argv(spelling)).override_opt_param_scheduler
    message = _error(_argv("--override-opt-param-scheduler", "--use-checkpoint-opt_param-scheduler"))
    assert message.startswith("--override-opt-param-scheduler and --use-checkpoint-opt_param-scheduler are "
                              "mutually exclusive")


def test_logging_flag_defaults_are_megatrons() -> None:
    args = parse_args(_argv())
    assert (args.tensorboard_log_interval, args.tensorboard_queue_size) == (1, 1000)
    assert not args.log_timers_to_tensorboard and args.wandb_save_dir is None and args.num_workers == 2


@pytest.mark.parametrize("flags, expected", [
    (["--log-interval", "0"], "--log-interval must be at least 1, got 0"),
    (["--num-workers", "-1"], "--num-workers must be 0 or more, got -1"),
    (["--exit-interval", "0"], "--exit-interval must be at least 1, got 0"),
    (["--vocab-size", "0"], "--vocab-size must be at least 1, got 0"),
    (["--micro-batch-size", "0"], "--micro-batch-size must be at least 1, got 0"),
    (["--vocab-size", "100", "--make-vocab-size-divisible-by", "0"],
     "--make-vocab-size-divisible-by must be at least 1, got 0"),
])
def test_counts_out_of_range(flags: List[str], expected: str) -> None:
    assert _error(_argv(*flags)) == expected


def test_layer_lists_parse_from_flags_and_yaml(tmp_path: Path) -> None:
    assert _error(_argv("--noop-layers", "1;3")) == (
        "--noop-layers '1;3' is not a comma-separated list of integers; write e.g. 3,5")
    path = _write_yaml(tmp_path, "noop-layers: [1, 3]\nnum-layer-list: 2,4\n")
    args = parse_args(_argv("--yaml-cfg", path))
    assert args.noop_layers == (1, 3) and args.num_layer_list == (2, 4)
