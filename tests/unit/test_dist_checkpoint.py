"""``--ckpt-format torch_dist`` in one process: resume, async save, bad input.

* Resuming from a torch_dist checkpoint equals the uninterrupted run bitwise (fp32 and bf16, whose fp32
  master weights are stored and preferred; with and without the distributed optimizer).
* ``--async-save`` writes the same tensors as a synchronous save; a write that fails in the background is
  reported in one line, training goes on, and the tracker keeps naming the previous checkpoint.
* Bad input: a misspelt ``--ckpt-format``, ``--async-save`` without torch_dist, a checkpoint whose tensor
  shapes differ from the model (the message names the tensor and both shapes), a truncated or missing data
  file (the message names the file), never a silent random init.

The layout changes (TP x PP x DP, the distributed optimizer, FSDP2) are in
tests/distributed/test_dist_checkpoint.py.
"""
from __future__ import annotations

import os
from typing import Dict, List

import pytest
import torch

from core import checkpointing
from core import dist_checkpointing as fmt
from mindspeed_llm.training.training import pretrain, run

ARGV = [
    "--num-layers", "2", "--hidden-size", "32", "--num-attention-heads", "4", "--seq-length", "16",
    "--max-position-embeddings", "16", "--micro-batch-size", "2", "--global-batch-size", "2", "--train-iters", "4",
    "--lr", "1e-2", "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "64", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--num-workers", "0", "--log-interval", "1",
]
DIST = ["--ckpt-format", "torch_dist"]
LLAMA = ARGV + ["--normalization", "RMSNorm", "--swiglu", "--position-embedding-type", "rope", "--disable-bias-linear",
                "--untie-embeddings-and-output-weights", "--ffn-hidden-size", "64"]


def _stored(directory: str) -> Dict[str, torch.Tensor]:
    metadata = fmt.read_metadata(directory)
    keys = [key for key, shape in fmt.stored_keys(metadata).items() if shape is not None]
    return fmt.read_full(directory, keys, metadata)


VARIANTS = {"fp32": [], "bf16": ["--bf16"], "fp32_distopt": ["--use-distributed-optimizer"],
            "bf16_distopt": ["--bf16", "--use-distributed-optimizer"]}


@pytest.fixture(scope="module")
def uninterrupted() -> Dict[str, List[float]]:
    return {name: run(ARGV + extra).losses for name, extra in VARIANTS.items()}


@pytest.mark.parametrize("precision", list(VARIANTS))
def test_resume_from_torch_dist_equals_the_uninterrupted_run(tmp_path, uninterrupted, precision):
    """Also the distributed optimizer, whose share each rank writes and reads in place (no gather)."""
    extra = VARIANTS[precision]
    save = str(tmp_path / "ckpt")
    first = run(ARGV + extra + DIST + ["--save", save, "--save-interval", "2", "--exit-interval", "2"])
    directory = checkpointing.iteration_dir(save, 2)
    assert sorted(os.listdir(directory)) == [".metadata", "__0_0.distcp", "checkpoint_complete", "common.pt",
                                            "metadata.json"]
    stored = _stored(directory)
    assert any(key.startswith("optimizer.exp_avg.") for key in stored)
    assert any(key.startswith("optimizer.fp32_param.") for key in stored) == ("--bf16" in extra)
    resumed = run(ARGV + extra + ["--load", save])
    assert first.losses + resumed.losses == uninterrupted[precision]


def test_async_save_writes_what_a_sync_save_writes(tmp_path):
    sync_dir, async_dir = str(tmp_path / "sync"), str(tmp_path / "async")
    run(ARGV + DIST + ["--save", sync_dir, "--save-interval", "2"])
    run(ARGV + DIST + ["--async-save", "--save", async_dir, "--save-interval", "2"])
    for iteration in (2, 4):
        sync, background = (_stored(checkpointing.iteration_dir(d, iteration)) for d in (sync_dir, async_dir))
        assert set(sync) == set(background) and sync
        for key, value in sync.items():
            assert torch.equal(value, background[key]), key
    assert checkpointing.read_tracker(async_dir) == (4, False)
    assert checkpointing.complete_iterations(async_dir) == [2, 4]


def test_a_failed_background_write_is_reported_and_the_tracker_stays(tmp_path, monkeypatch, capsys):
    from torch.distributed.checkpoint import FileSystemWriter

    original = FileSystemWriter.write_data

    def write_data(self, plan, planner):  # iteration 4's data file cannot be written
        if "iter_0000004" in str(self.path):
            raise OSError(28, "No space left on device")
        return original(self, plan, planner)

    monkeypatch.setattr(FileSystemWriter, "write_data", write_data)
    save = str(tmp_path / "ckpt")
    trainer = run(ARGV + ["--train-iters", "6"] + DIST + ["--async-save", "--save", save, "--save-interval", "2"])
    assert trainer.iteration == 6  # training went on
    out = capsys.readouterr().out
    failed = [line for line in out.splitlines() if "background save of iteration 4 failed" in line]
    assert len(failed) == 1 and "No space left on device" in failed[0] and "previous checkpoint" in failed[0]
    assert checkpointing.complete_iterations(save) == [2, 6]  # 4 has no marker: --load skips it
    assert checkpointing.read_tracker(save) == (6, False)


def test_a_failed_background_write_leaves_the_tracker_at_the_previous_save(tmp_path, monkeypatch):
    from torch.distributed.checkpoint import FileSystemWriter

    original = FileSystemWriter.write_data
    monkeypatch.setattr(FileSystemWriter, "write_data",
                        lambda self, plan, planner: (_ for _ in ()).throw(PermissionError(13, "Permission denied"))
                        if "iter_0000004" in str(self.path) else original(self, plan, planner))
    save = str(tmp_path / "ckpt")
    run(ARGV + DIST + ["--async-save", "--save", save, "--save-interval", "2"])
    assert checkpointing.read_tracker(save) == (2, False)
    assert checkpointing.complete_iterations(save) == [2]


@pytest.mark.parametrize("flags,needle", [
    (["--ckpt-format", "torch-dist"], "--ckpt-format"),
    (["--async-save", "--save", "SAVE"], "--async-save needs --ckpt-format torch_dist"),
])
def test_bad_format_flags_are_one_line(tmp_path, capsys, flags, needle):
    flags = [str(tmp_path / "s") if f == "SAVE" else f for f in flags]
    with pytest.raises(SystemExit) as info:
        pretrain(ARGV + flags)
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


@pytest.fixture()
def saved(tmp_path) -> str:
    save = str(tmp_path / "ckpt")
    run(ARGV + DIST + ["--save", save, "--save-interval", "2", "--exit-interval", "2"])
    return save


def _load_error(save: str, capsys, extra: List[str] = ()) -> str:
    with pytest.raises(SystemExit) as info:
        pretrain(ARGV + list(extra) + ["--load", save])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_a_shape_mismatch_names_the_tensor_and_both_shapes(saved, capsys):
    common_path = os.path.join(checkpointing.iteration_dir(saved, 2), fmt.COMMON_FILENAME)
    common = checkpointing.load_file(common_path)
    common["transformer_config"]["ffn_hidden_size"] = 96  # a checkpoint whose settings disagree with its tensors
    torch.save(common, common_path)
    message = _load_error(saved, capsys, ["--ffn-hidden-size", "96"])
    assert "tensor decoder.layers.0.mlp.linear_fc1.weight has shape (128, 32) in the checkpoint and (96, 32)" in message


def test_a_truncated_data_file_is_named(saved, capsys):
    data = os.path.join(checkpointing.iteration_dir(saved, 2), "__0_0.distcp")
    with open(data, "r+b") as handle:
        handle.truncate(os.path.getsize(data) // 2)
    message = _load_error(saved, capsys)
    assert data in message and "truncated" in message


def test_a_damaged_metadata_file_is_named(saved, capsys):
    metadata = os.path.join(checkpointing.iteration_dir(saved, 2), fmt.DCP_METADATA_FILENAME)
    with open(metadata, "wb") as handle:
        handle.write(b"garbage")
    message = _load_error(saved, capsys)
    assert metadata in message and "damaged" in message


# ---------------------------------------------------------------------------- tools/convert_ckpt.py

def _save_hf_llama(path: str) -> str:
    import transformers

    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=101,
                                      max_position_embeddings=64, dtype="float32")
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(config).save_pretrained(path)
    return path


def _hf_tensors(path: str) -> Dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return {k: v for name in sorted(os.listdir(path)) if name.endswith(".safetensors")
            for k, v in load_file(os.path.join(path, name)).items()}


def _convert(*flags: str) -> int:
    from tools.convert_ckpt import main as convert_main

    return convert_main(list(flags))


def test_convert_hf_to_torch_dist_and_back_is_exact(tmp_path):
    hf = _save_hf_llama(str(tmp_path / "hf"))
    dist_dir, back = str(tmp_path / "dist"), str(tmp_path / "back")
    assert _convert("--load-model-type", "hf", "--save-model-type", "mg", "--ckpt-format", "torch_dist",
                    "--load-dir", hf, "--save-dir", dist_dir) == 0
    release = checkpointing.iteration_dir(dist_dir, None, release=True)
    assert fmt.is_dist_checkpoint(release) and checkpointing.read_tracker(dist_dir) == (0, True)
    assert fmt.stored_keys(fmt.read_metadata(release))["model.embedding.word_embeddings.weight"] == (101, 32)
    assert _convert("--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", dist_dir,
                    "--save-dir", back) == 0
    original, returned = _hf_tensors(hf), _hf_tensors(back)
    assert set(original) == set(returned)
    for name, value in original.items():
        assert torch.equal(value, returned[name]), name


def test_a_trained_torch_dist_checkpoint_converts_as_the_per_rank_one(tmp_path):
    llama = LLAMA + ["--train-iters", "2", "--save-interval", "2"]
    legacy, dist_dir = str(tmp_path / "legacy"), str(tmp_path / "dist")
    run(llama + ["--save", legacy])
    run(llama + DIST + ["--save", dist_dir])
    outputs = {}
    for name, source in (("legacy", legacy), ("dist", dist_dir)):
        outputs[name] = str(tmp_path / f"hf_{name}")
        assert _convert("--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", source,
                        "--save-dir", outputs[name], "--model-type-hf", "llama2") == 0
    a, b = _hf_tensors(outputs["legacy"]), _hf_tensors(outputs["dist"])
    assert set(a) == set(b) and a
    for name, value in a.items():
        assert torch.equal(value, b[name]), name
    # and back into torch_dist from the per-rank checkpoint: training loads it (weights only)
    converted = str(tmp_path / "converted")
    assert _convert("--load-model-type", "mg", "--save-model-type", "mg", "--ckpt-format", "torch_dist",
                    "--load-dir", legacy, "--save-dir", converted, "--model-type-hf", "llama2") == 0
    loaded = run(LLAMA + ["--train-iters", "1", "--load", converted])
    assert loaded.iteration == 1


def test_convert_refuses_layout_flags_for_torch_dist(tmp_path, capsys):
    hf = _save_hf_llama(str(tmp_path / "hf"))
    capsys.readouterr()
    code = _convert("--load-model-type", "hf", "--save-model-type", "mg", "--ckpt-format", "torch_dist",
                    "--target-tensor-parallel-size", "2", "--load-dir", hf, "--save-dir", str(tmp_path / "out"))
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--target-tensor-parallel-size" in err[0] and "torch_dist" in err[0]
    assert not os.path.exists(tmp_path / "out")


def test_a_distributed_optimizer_checkpoint_resumes_without_it_and_back(tmp_path, uninterrupted):
    """bf16: the shares the distributed optimizer wrote (fp32 masters, moments) assemble into the plain
    optimizer's whole tensors, and the plain optimizer's checkpoint splits into the distributed one's shares."""
    for saved_with, loaded_with in ((["--use-distributed-optimizer"], []), ([], ["--use-distributed-optimizer"])):
        save = str(tmp_path / f"ckpt{len(saved_with)}")
        first = run(ARGV + ["--bf16"] + saved_with + DIST + ["--save", save, "--save-interval", "2",
                                                            "--exit-interval", "2"])
        resumed = run(ARGV + ["--bf16"] + loaded_with + ["--load", save])
        torch.testing.assert_close(torch.tensor(first.losses + resumed.losses),
                                   torch.tensor(uninterrupted["bf16"]), rtol=1e-5, atol=0)


def test_flat_boxes_cover_a_flat_range_in_order() -> None:
    import random

    rng = random.Random(0)
    for _ in range(500):
        shape = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
        total = int(torch.tensor(shape).prod())
        start = rng.randint(0, total)
        end = rng.randint(start, total)
        values = torch.arange(total).view(shape)
        seen = []
        for offset, box in fmt.flat_boxes(shape, start, end):
            view = values
            for dim, (first, length) in enumerate(box):
                view = view.narrow(dim, first, length)
            flat = view.reshape(-1).tolist()
            assert flat == list(range(offset, offset + len(flat))), (shape, start, end, box)  # contiguous
            seen += flat
        assert seen == list(range(start, end)), (shape, start, end)


def test_window_pieces_are_the_whole_tensor_pieces_restricted_to_the_window() -> None:
    """Fused QKV with GQA key/value heads replicated over 2 TP ranks, every flat window of the local tensor."""
    from core.tensor_parallel.param_meta import ParamMeta, Segment, TPShard

    meta = ParamMeta(tp_shard=TPShard(0, (Segment(4, 2), Segment(1, 2), Segment(1, 2))))
    local = torch.randn(6, 3)
    for tp_rank in range(2):
        shape, specs = fmt.global_layout(local.shape, meta, tp_rank, 2, 0)
        for start in range(0, 19, 2):
            for end in range(start, 19, 3):
                got = torch.full(shape, float("nan"))
                for offsets, view in fmt.window_pieces(local.reshape(-1)[start:end], local.shape, start, meta,
                                                       tp_rank, 2, 0)[1]:
                    _narrow(got, offsets, view.shape).copy_(view)
                inside = torch.zeros(18, dtype=torch.bool)
                inside[start:end] = True
                masked = torch.where(inside.view(6, 3), local, torch.tensor(float("nan")))
                expected = torch.full(shape, float("nan"))
                for spec in specs:
                    _narrow(expected, spec.global_offsets, spec.sizes).copy_(spec.view(masked))
                assert torch.equal(got.nan_to_num(99.0), expected.nan_to_num(99.0)), (tp_rank, start, end)


def _narrow(tensor: torch.Tensor, offsets, sizes) -> torch.Tensor:
    for dim, (offset, size) in enumerate(zip(offsets, sizes)):
        tensor = tensor.narrow(dim, offset, size)
    return tensor
