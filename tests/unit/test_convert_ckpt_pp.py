"""Pipeline-parallel checkpoint conversion (``tools/convert_ckpt.py``).

* HF -> mg at PP 2 (even, ``--num-layer-list``, virtual pipeline, noop layers,
  TP 2 x PP 2, tied and untied embeddings) -> HF gives identical tensors; each
  converted file has exactly the names and shapes of the chunks training
  builds (``build_model_chunks``), loads strictly and passes ``check_layout``.
* mg PP 2 -> mg PP 1 equals HF -> mg PP 1 (and PP 1 -> PP 2 + VPP 2, noop
  layers dropped or re-inserted).
* A checkpoint written by training at PP 2 (2 gloo processes, tied embeddings,
  one step, ``trainer.save()``) converts to PP 1 and to HF and back: the PP 1
  checkpoint loaded by a single-process Trainer (``--load --finetune``) gives
  the PP 2 model's losses on the same batches, HF's logits equal the PP 2
  model's gathered logits, HF -> mg PP 2 reproduces the training files, and
  HF -> mg PP 2 + VPP 2 loads into a PP 2 + VPP 2 Trainer with the same loss.
* Every bad layout is one line, exit code 2, nothing valid written.

    python -m pytest tests/unit/test_convert_ckpt_pp.py -q
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Tuple

import pytest
import torch
import transformers

from core.checkpointing import TRACKER_FILENAME, check_layout, checkpoint_file, load_file, load_model_state_dicts
from core.models.gpt_model import build_model_chunks, layout_state
from core.pipeline_parallel.layout import stage_layers
from core.transformer.config import TransformerConfig
from core.launcher import run_distributed
from tests.unit.test_convert_ckpt import expect_error, read_safetensors, save_hf
from tools.convert_ckpt import main as convert_main


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory) -> Dict[str, str]:
    root = str(tmp_path_factory.mktemp("hf_pp"))
    return {
        "llama": save_hf(root, "llama", "LlamaConfig", "LlamaForCausalLM", max_shard_size="50MB",
                         num_hidden_layers=4),
        "qwen2_tied": save_hf(root, "qwen2_tied", "Qwen2Config", "Qwen2ForCausalLM", max_shard_size="50MB",
                              num_hidden_layers=4, tie_word_embeddings=True),
    }


def convert(load_type: str, save_type: str, load_dir: str, save_dir: str, *flags: str) -> None:
    code = convert_main(["--load-model-type", load_type, "--save-model-type", save_type, "--load-dir", load_dir,
                         "--save-dir", save_dir, *flags])
    assert code == 0


def mg_files(mg_dir: str) -> Dict[Tuple[int, int], Dict[str, Any]]:
    """(tp_rank, pp_rank) -> checkpoint of a converted (release) checkpoint, from its own args."""
    first_dir = os.path.join(mg_dir, "release")
    names = sorted(os.listdir(first_dir))
    pp = 1 if "mp_rank_00" in names else len([n for n in names if n.startswith("mp_rank_00_")])
    tp = len({n[:10] for n in names})
    files = {(t, p): load_file(checkpoint_file(mg_dir, None, t, p, pp, release=True))
             for t in range(tp) for p in range(pp)}
    args = files[(0, 0)]["args"]
    assert (args.tensor_model_parallel_size, args.pipeline_model_parallel_size) == (tp, pp)
    assert len(names) == tp * pp  # no stale rank directories
    return files


def chunk_dicts(checkpoint: Dict[str, Any]) -> List[Dict[str, torch.Tensor]]:
    if "model" in checkpoint:
        return [checkpoint["model"]]
    return [checkpoint[f"model{c}"] for c in range(len([k for k in checkpoint if k.startswith("model")]))]


def assert_training_layout(mg_dir: str) -> Dict[Tuple[int, int], Dict[str, Any]]:
    """Every file holds exactly the chunks ``build_model_chunks`` builds for its rank, and loads strictly."""
    files = mg_files(mg_dir)
    for (tp_rank, pp_rank), checkpoint in files.items():
        args = checkpoint["args"]
        tp, pp, vpp = args.tensor_model_parallel_size, args.pipeline_model_parallel_size, \
            args.virtual_pipeline_model_parallel_size
        config = TransformerConfig.from_dict(checkpoint["transformer_config"])
        assert tuple(args.noop_layers) == config.noop_layers and args.num_layers == config.num_layers
        placement = stage_layers(config.num_layers, pp, vpp, args.num_layer_list)
        models = build_model_chunks(config, layout_state(tp, tp_rank, pp, pp_rank), torch.device("cpu"), 0,
                                    placement)
        path = checkpoint_file(mg_dir, None, tp_rank, pp_rank, pp, release=True)
        check_layout(checkpoint, path, tp, pp, len(models))
        for model, state in zip(models, chunk_dicts(checkpoint)):
            expected = {n: tuple(p.shape) for n, p in model.state_dict().items()}
            assert {n: tuple(t.shape) for n, t in state.items()} == expected
            assert list(state) == list(expected)  # the order of named_parameters
        load_model_state_dicts(models, checkpoint)
    return files


def assert_same_hf(left: str, right: str) -> None:
    a, b = read_safetensors(left), read_safetensors(right)
    assert sorted(a) == sorted(b)
    for name, tensor in a.items():
        assert torch.equal(tensor, b[name]), name


def assert_same_mg(left: str, right: str) -> None:
    a, b = mg_files(left), mg_files(right)
    assert sorted(a) == sorted(b)
    for key in a:
        assert a[key]["transformer_config"] == b[key]["transformer_config"]
        for x, y in zip(chunk_dicts(a[key]), chunk_dicts(b[key]), strict=True):
            assert list(x) == list(y)
            for name in x:
                assert torch.equal(x[name], y[name]), name


# --------------------------------------------------------------------------- round trips

ROUND_TRIPS = {
    "pp2": ("llama", ["--target-pipeline-parallel-size", "2"]),
    "pp2_tied": ("qwen2_tied", ["--target-pipeline-parallel-size", "2"]),
    "pp2_layer_list": ("qwen2_tied", ["--target-pipeline-parallel-size", "2", "--num-layer-list", "1,3"]),
    "pp2_vpp2": ("llama", ["--target-pipeline-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1"]),
    "pp2_vpp2_by_size_tied": ("qwen2_tied", ["--target-pipeline-parallel-size", "2",
                                             "--virtual-pipeline-model-parallel-size", "2"]),
    "pp2_noop": ("llama", ["--target-pipeline-parallel-size", "2", "--noop-layers", "0,5", "--num-layers", "6"]),
    "pp4_noop_list_tied": ("qwen2_tied", ["--target-pipeline-parallel-size", "4", "--noop-layers", "2",
                                          "--num-layer-list", "2,0,1,2"]),
    "tp2_pp2_tied": ("qwen2_tied", ["--target-pipeline-parallel-size", "2", "--target-tensor-parallel-size", "2",
                                    "--make-vocab-size-divisible-by", "8"]),
}


@pytest.mark.parametrize("case", sorted(ROUND_TRIPS))
def test_hf_mg_pp_hf_round_trip_is_exact(hf_dirs, tmp_path, case: str) -> None:
    source, flags = ROUND_TRIPS[case]
    mg_dir, out_dir = str(tmp_path / "mg"), str(tmp_path / "hf")
    convert("hf", "mg", hf_dirs[source], mg_dir, *flags)
    assert open(os.path.join(mg_dir, TRACKER_FILENAME)).read() == "release"
    files = assert_training_layout(mg_dir)
    args = files[(0, 0)]["args"]
    pp = args.pipeline_model_parallel_size
    last = files[(0, pp - 1)]
    if source == "qwen2_tied":  # the last stage's copy of the tied embeddings
        embedding = chunk_dicts(files[(0, 0)])[0]["embedding.word_embeddings.weight"]
        assert torch.equal(chunk_dicts(last)[-1]["output_layer.weight"], embedding)
    if case == "pp2_noop":
        assert args.noop_layers == (0, 5) and args.num_layers == 6
        layers = sorted({int(n.split(".")[2]) for f in files.values() for s in chunk_dicts(f) for n in s
                         if n.startswith("decoder.layers.")})
        assert layers == [1, 2, 3, 4]  # HF layer j is the j-th non-noop layer
        hf = read_safetensors(hf_dirs[source])
        assert torch.equal(chunk_dicts(files[(0, 0)])[0]["decoder.layers.1.input_layernorm.weight"],
                           hf["model.layers.0.input_layernorm.weight"])
    if case == "pp2_vpp2":
        assert args.virtual_pipeline_model_parallel_size == 2 and args.num_layers_per_virtual_pipeline_stage == 1
        assert sorted(files[(0, 1)]) == ["args", "checkpoint_version", "hf_config", "iteration", "model0",
                                         "model1", "transformer_config"]
        assert "decoder.layers.3.mlp.linear_fc1.weight" in files[(0, 1)]["model1"]
    if case == "pp2_layer_list":
        assert args.num_layer_list == (1, 3)
    convert("mg", "hf", mg_dir, out_dir)
    assert_same_hf(hf_dirs[source], out_dir)


@pytest.mark.parametrize("source, layouts", [
    ("qwen2_tied", (["--target-pipeline-parallel-size", "2"], ["--target-pipeline-parallel-size", "2",
                                                              "--num-layers-per-virtual-pipeline-stage", "1"])),
    ("llama", (["--target-pipeline-parallel-size", "2", "--noop-layers", "0,5", "--target-tensor-parallel-size", "2"],
               ["--target-pipeline-parallel-size", "3", "--noop-layers", "1,3"])),
])
def test_mg_pp_reshard_equals_direct(hf_dirs, tmp_path, source: str, layouts) -> None:
    hf_dir = hf_dirs[source]
    first, second = layouts
    direct_pp1, direct_second, via = (str(tmp_path / n) for n in ("pp1", "second", "via"))
    convert("hf", "mg", hf_dir, direct_pp1)
    convert("hf", "mg", hf_dir, direct_second, *second)
    staged = str(tmp_path / "first")
    convert("hf", "mg", hf_dir, staged, *first)
    down = str(tmp_path / "down")
    # mg PP>1 -> mg PP 1 (noop layers dropped explicitly) equals HF -> mg PP 1
    convert("mg", "mg", staged, down, "--noop-layers", "")
    assert_same_mg(direct_pp1, down)
    # mg PP 1 -> another PP layout equals HF -> that layout directly
    convert("mg", "mg", down, via, *second)
    assert_same_mg(direct_second, via)
    assert_training_layout(via)


def test_mg_to_mg_keeps_noop_layers_by_default(hf_dirs, tmp_path) -> None:
    staged, kept = str(tmp_path / "staged"), str(tmp_path / "kept")
    convert("hf", "mg", hf_dirs["llama"], staged, "--target-pipeline-parallel-size", "2", "--noop-layers", "0,5")
    convert("mg", "mg", staged, kept, "--target-pipeline-parallel-size", "3")
    args = mg_files(kept)[(0, 0)]["args"]
    assert args.noop_layers == (0, 5) and args.pipeline_model_parallel_size == 3


def test_stale_layout_is_replaced(hf_dirs, tmp_path) -> None:
    """Re-converting into the same directory with another layout leaves only the new rank directories."""
    save = str(tmp_path / "out")
    convert("hf", "mg", hf_dirs["llama"], save, "--target-pipeline-parallel-size", "2")
    convert("hf", "mg", hf_dirs["llama"], save, "--overwrite")
    assert os.listdir(os.path.join(save, "release")) == ["mp_rank_00"]


# --------------------------------------------------------------------------- errors

HF_MG = ["--load-model-type", "hf", "--save-model-type", "mg"]
PP_ERRORS = {
    "list_length": (["--target-pipeline-parallel-size", "2", "--num-layer-list", "1,1,2"],
                    ["--num-layer-list has 3 entries", "--target-pipeline-parallel-size 2"]),
    "list_sum": (["--target-pipeline-parallel-size", "2", "--num-layer-list", "1,2"],
                 ["--num-layer-list 1,2 sums to 3", "(4)"]),
    "list_not_ints": (["--target-pipeline-parallel-size", "2", "--num-layer-list", "1;3"],
                      ["--num-layer-list '1;3' is not a comma-separated list"]),
    "pp_not_dividing": (["--target-pipeline-parallel-size", "3"],
                        ["--num-layers (4) is not divisible by --target-pipeline-parallel-size (3)"]),
    "noop_out_of_range": (["--noop-layers", "0,6"], ["--noop-layers [6] out of range", "numbered 0 to 5"]),
    "noop_twice": (["--noop-layers", "1,1"], ["--noop-layers 1,1 lists a layer twice"]),
    "num_layers_mismatch": (["--noop-layers", "3", "--num-layers", "4"],
                            ["--num-layers 4 does not equal the 4 HF layers + 1 --noop-layers = 5"]),
    "vpp_without_pp": (["--num-layers-per-virtual-pipeline-stage", "1"],
                       ["need --target-pipeline-parallel-size of 2 or more"]),
    "vpp_not_dividing": (["--target-pipeline-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "3"],
                         ["--num-layers-per-virtual-pipeline-stage (3) must divide the layers per pipeline stage"]),
    "vpp_with_list": (["--target-pipeline-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                       "--num-layer-list", "1,3"], ["--num-layer-list cannot be combined with a virtual pipeline"]),
    "vpp_size_mismatch": (["--target-pipeline-parallel-size", "2", "--num-layers-per-virtual-pipeline-stage", "1",
                           "--virtual-pipeline-model-parallel-size", "3"],
                          ["--virtual-pipeline-model-parallel-size (3) disagrees"]),
}


@pytest.mark.parametrize("case", sorted(PP_ERRORS))
def test_pipeline_layout_errors(capsys, hf_dirs, tmp_path, case: str) -> None:
    flags, fragments = PP_ERRORS[case]
    save = str(tmp_path / "out")
    expect_error(capsys, save, HF_MG + ["--load-dir", hf_dirs["llama"], *flags], *fragments)
    assert not os.path.exists(os.path.join(save, "release"))


def test_pipeline_flags_rejected_for_hf_target(capsys, hf_dirs, tmp_path) -> None:
    mg_dir = str(tmp_path / "mg")
    convert("hf", "mg", hf_dirs["llama"], mg_dir, "--target-pipeline-parallel-size", "2")
    expect_error(capsys, str(tmp_path / "out"),
                 ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", mg_dir,
                  "--target-pipeline-parallel-size", "2", "--noop-layers", "1"],
                 "--target-pipeline-parallel-size, --noop-layers describe(s) a Megatron target")


def test_mg_noop_change_must_keep_the_real_layers(capsys, hf_dirs, tmp_path) -> None:
    mg_dir = str(tmp_path / "mg")
    convert("hf", "mg", hf_dirs["llama"], mg_dir, "--noop-layers", "4")
    expect_error(capsys, str(tmp_path / "out"),
                 ["--load-model-type", "mg", "--save-model-type", "mg", "--load-dir", mg_dir, "--num-layers", "5",
                  "--noop-layers", ""],
                 "--num-layers 5 does not equal the 4 non-noop layers in the source + 0 --noop-layers = 4")


def test_incomplete_pp_source(capsys, hf_dirs, tmp_path) -> None:
    mg_dir = str(tmp_path / "mg")
    convert("hf", "mg", hf_dirs["llama"], mg_dir, "--target-pipeline-parallel-size", "2")
    os.remove(checkpoint_file(mg_dir, None, 0, 1, 2, release=True))
    expect_error(capsys, str(tmp_path / "out"),
                 ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", mg_dir],
                 "mp_rank_00_001", "is missing")


# --------------------------------------------------------------------------- a checkpoint written by training

TRAIN = [
    "--num-layers", "4", "--hidden-size", "32", "--ffn-hidden-size", "64", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2", "--seq-length", "16", "--max-position-embeddings", "16",
    "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
    "--add-qkv-bias", "--attention-dropout", "0", "--hidden-dropout", "0", "--micro-batch-size", "2",
    "--global-batch-size", "4", "--train-iters", "4", "--lr", "1e-2", "--mock-data", "--tokenizer-type",
    "NullTokenizer", "--vocab-size", "100", "--seed", "3", "--device", "cpu", "--distributed-backend", "gloo",
    "--eval-iters", "1", "--eval-interval", "1000", "--log-interval", "1000",
]
PP2 = ["--pipeline-model-parallel-size", "2"]
VPP2 = PP2 + ["--num-layers-per-virtual-pipeline-stage", "1"]
VOCAB = 100


def _forward_loss_on_first_batch(trainer) -> float:
    """Forward only, on the training split's first global batch (what a fresh --finetune run trains on)."""
    with torch.no_grad():
        for model in trainer.models:
            model.eval()
        first_batches = trainer.batches(trainer.datasets()[0])  # from sample 0, whatever was consumed
        stats = trainer.forward_backward(trainer.task.forward_step, first_batches, trainer.models,
                                         trainer.num_microbatches, forward_only=True,
                                         pipeline=trainer.pipeline_options())
    return trainer.reduce_stats(stats)["lm loss"]


def _pp2_logits(trainer, tokens: torch.Tensor) -> Optional[torch.Tensor]:
    """Full logits [b, s, vocab] of the PP 2 model (last rank), by hand over point-to-point."""
    import torch.distributed as dist
    from core.models.gpt_model import gather_logits

    model = trainer.models[0]
    model.eval()
    with torch.no_grad():
        if trainer.state.pp_rank == 0:
            dist.send(model(tokens).contiguous(), dst=1)  # [s, b, h]
            return None
        hidden = torch.empty(tokens.size(1), tokens.size(0), trainer.args.hidden_size)
        dist.recv(hidden, src=0)
        return gather_logits(model(None, hidden_states=hidden), model)


def training_worker(rank: int, world_size: int, ckpt: str, roundtrip: str, tokens: torch.Tensor) -> Dict:
    import torch.distributed as dist
    from mindspeed_llm.training.training import setup

    trainer = setup(TRAIN + PP2 + ["--save", ckpt])
    trainer.train_step(trainer.train_iterator())
    trainer.save()
    result = {"eval": trainer.evaluate()["lm loss"], "first_batch": _forward_loss_on_first_batch(trainer),
              "logits": _pp2_logits(trainer, tokens)}
    # the training checkpoint -> HF -> mg PP 2 + VPP 2 loads into a PP 2 + VPP 2 run with the same loss
    if rank == 0:
        hf_dir, vpp_dir = roundtrip + "_hf", roundtrip + "_vpp2"
        convert("mg", "hf", ckpt, hf_dir, "--model-type-hf", "qwen2")
        convert("hf", "mg", hf_dir, vpp_dir, "--target-pipeline-parallel-size", "2",
                "--num-layers-per-virtual-pipeline-stage", "1", "--make-vocab-size-divisible-by", "128")
    dist.barrier()
    interleaved = setup(TRAIN + VPP2 + ["--load", roundtrip + "_vpp2", "--finetune"])
    result["vpp2_chunks"] = len(interleaved.models)
    result["vpp2_eval"] = interleaved.evaluate()["lm loss"]
    return result


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Dict[str, Any]:
    root = tmp_path_factory.mktemp("trained_pp2")
    ckpt = str(root / "ckpt")
    tokens = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(11))
    results = run_distributed(2, training_worker, ckpt, str(root / "roundtrip"), tokens)
    return {"ckpt": ckpt, "root": root, "tokens": tokens, "ranks": results}


def test_training_checkpoint_layout(trained) -> None:
    ckpt = trained["ckpt"]
    assert open(os.path.join(ckpt, TRACKER_FILENAME)).read().strip() == "1"
    assert sorted(os.listdir(os.path.join(ckpt, "iter_0000001"))) == ["checkpoint_complete", "mp_rank_00_000",
                                                                 "mp_rank_00_001"]
    ranks = trained["ranks"]
    assert ranks[0]["eval"] == ranks[1]["eval"]  # shared over the pipeline
    assert [r["vpp2_chunks"] for r in ranks] == [2, 2]


def test_training_checkpoint_to_pp1_loads_with_the_same_losses(trained) -> None:
    from mindspeed_llm.training.training import setup

    pp1 = str(trained["root"] / "pp1")
    convert("mg", "mg", trained["ckpt"], pp1)
    files = assert_training_layout(pp1)
    assert list(files) == [(0, 0)] and "output_layer.weight" not in files[(0, 0)]["model"]
    trainer = setup(TRAIN + ["--load", pp1, "--finetune"])
    assert trainer.iteration == 0
    reference = trained["ranks"][1]
    torch.testing.assert_close(trainer.evaluate()["lm loss"], reference["eval"], rtol=1e-5, atol=0)
    first = trainer.train_step(trainer.train_iterator()).loss  # forward on the same first batch, then a step
    torch.testing.assert_close(first, reference["first_batch"], rtol=1e-5, atol=0)


def test_training_checkpoint_to_hf_matches_pp2_logits_and_back(trained) -> None:
    hf_dir, back = str(trained["root"] / "roundtrip_hf"), str(trained["root"] / "back")
    model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32,
                                                              attn_implementation="eager").eval()
    assert model.config.num_hidden_layers == 4 and model.config.tie_word_embeddings
    with torch.no_grad():
        logits = model(input_ids=trained["tokens"]).logits.float()  # [b, s, v]
    ours = trained["ranks"][1]["logits"]
    assert ours.shape == logits.shape
    assert (ours - logits).abs().max().item() <= 1e-4
    # HF -> mg at the training layout reproduces the training files' weights exactly (tied copy included)
    convert("hf", "mg", hf_dir, back, "--target-pipeline-parallel-size", "2", "--make-vocab-size-divisible-by", "128")
    converted = mg_files(back)
    for pp_rank in range(2):
        saved = load_file(checkpoint_file(trained["ckpt"], 1, 0, pp_rank, 2))["model"]
        mine = converted[(0, pp_rank)]["model"]
        assert list(mine) == list(saved)
        for name, tensor in saved.items():
            assert torch.equal(mine[name], tensor), name


def test_converted_vpp2_checkpoint_trains_on(trained) -> None:
    ranks = trained["ranks"]
    for r in ranks:
        torch.testing.assert_close(r["vpp2_eval"], r["eval"], rtol=1e-5, atol=0)
