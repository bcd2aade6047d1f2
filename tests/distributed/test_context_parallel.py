"""Context parallelism equals one process: losses and grad norms of two training steps, fp32, 1e-5.

One 4-process launch runs every layout; each is compared with the single-process run of the same model:

* every algorithm at CP 2 (x DP 2) and CP 4: the ring (megatron_cp_algo; also with the exchange
  overlapped and with contiguous parts, ``--attention-mask-type general``), Ulysses (KV heads repeated
  when they do not split, and always with ``--kv-head-repeat-before-uly-alltoall``), the hybrid at 2 x 2
  and the K/V all-gather;
* CP 2 x TP 2 (with SP; and Ulysses over the TP-split heads), CP 2 x PP 2, CP 2 x PP 2 with virtual stages,
  CP 2 x DP 2 with the distributed optimizer, selective and full recompute;
* packed documents (``--reset-attention-mask --reset-position-ids --eod-mask-loss``) under each algorithm,
  a sliding window under the ring and the all-gather, ALiBi under the all-gather and Ulysses (whose heads
  move between ranks), MLA under the ring;
* resuming at CP 2: one step, save, load, the second step equals the uninterrupted run;
* supervised fine-tuning on packed instruction data (``posttrain.py --stage sft``: per-sample document
  ids and positions) under the ring, Ulysses with TP 2 and the all-gather at CP 4; with
  ``--no-pad-to-seq-lengths`` (micro-batches of their own lengths) at CP 2 x PP 2, CP 2 x TP 2 with SP and
  TP 2 with SP x PP 2, equal to the run padded to ``--seq-length``; and SFT's other layouts without CP: DP 4 with
  the distributed optimizer, FSDP2 at DP 2 x TP 2 and (variable lengths) at DP 4, TP 2 x PP 2 x VPP 2;

    python -m pytest -q tests/distributed/test_context_parallel.py
"""
from __future__ import annotations

from typing import Dict, List, Tuple

from core.launcher import run_distributed

ARGV = ["--num-layers", "2", "--hidden-size", "16", "--num-attention-heads", "4", "--group-query-attention",
        "--num-query-groups", "2", "--ffn-hidden-size", "32", "--seq-length", "16", "--max-position-embeddings",
        "16", "--vocab-size", "8", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
        "--micro-batch-size", "1", "--global-batch-size", "4", "--train-iters", "2", "--optimizer", "sgd",
        "--lr", "0.5", "--mock-data", "--tokenizer-type", "NullTokenizer", "--seed", "3", "--device", "cpu",
        "--distributed-backend", "gloo", "--eval-iters", "0", "--log-interval", "1000", "--hidden-dropout", "0",
        "--attention-dropout", "0", "--make-vocab-size-divisible-by", "1", "--init-method-std", "0.3",
        "--position-embedding-type", "rope"]
MODELS = {
    "base": [],
    "documents": ["--reset-attention-mask", "--reset-position-ids", "--eod-mask-loss"],
    "window": ["--sliding-window", "5"],
    "alibi": ["--position-embedding-type", "alibi"],
    "mla": ["--multi-latent-attention", "--num-query-groups", "4", "--kv-lora-rank", "8", "--qk-head-dim", "4", "--qk-pos-emb-head-dim", "4",
            "--v-head-dim", "4"],
    "four_layers": ["--num-layers", "4"],
}


def _cp(size: int, algo: str = "megatron_cp_algo", *extra: str) -> List[str]:
    return ["--context-parallel-size", str(size), "--context-parallel-algo", algo, *extra]


RING, ULYSSES, HYBRID, GATHER = "megatron_cp_algo", "ulysses_cp_algo", "hybrid_cp_algo", "kvallgather_cp_algo"
# layout name -> (model, flags)
LAYOUTS: Dict[str, Tuple[str, List[str]]] = {
    "ring_cp2": ("base", _cp(2)),
    "ring_cp4": ("base", _cp(4)),
    "ring_cp4_overlap_general": ("base", _cp(4, RING, "--use-cp-send-recv-overlap", "--attention-mask-type",
                                              "general")),
    "ulysses_cp2": ("base", _cp(2, ULYSSES)),
    "ulysses_cp4_kv_repeated": ("base", _cp(4, ULYSSES)),
    "ulysses_cp2_repeat_flag": ("base", _cp(2, ULYSSES, "--kv-head-repeat-before-uly-alltoall")),
    "hybrid_2x2": ("base", _cp(4, HYBRID, "--ulysses-degree-in-cp", "2")),
    "gather_cp2": ("base", _cp(2, GATHER)),
    "gather_cp4": ("base", _cp(4, GATHER)),
    "ring_cp2_tp2_sp": ("base", _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]),
    "ulysses_cp2_tp2": ("base", _cp(2, ULYSSES) + ["--tensor-model-parallel-size", "2"]),
    "ring_cp2_pp2": ("base", _cp(2) + ["--pipeline-model-parallel-size", "2"]),
    "ring_cp2_pp2_vpp": ("four_layers", _cp(2) + ["--pipeline-model-parallel-size", "2",
                                                  "--num-layers-per-virtual-pipeline-stage", "1"]),
    "ring_cp2_dp2_distributed_optimizer": ("base", _cp(2) + ["--use-distributed-optimizer"]),
    "ring_cp2_selective_recompute": ("base", _cp(2) + ["--recompute-granularity", "selective"]),
    "ulysses_cp2_full_recompute": ("base", _cp(2, ULYSSES) + ["--recompute-granularity", "full",
                                                              "--recompute-method", "uniform",
                                                              "--recompute-num-layers", "1"]),
    "documents_ring_cp2": ("documents", _cp(2)),
    "documents_ring_cp4": ("documents", _cp(4)),
    "documents_ulysses_cp2": ("documents", _cp(2, ULYSSES)),
    "documents_hybrid_2x2": ("documents", _cp(4, HYBRID, "--ulysses-degree-in-cp", "2")),
    "documents_gather_cp2": ("documents", _cp(2, GATHER)),
    "window_ring_cp4": ("window", _cp(4)),
    "window_gather_cp2": ("window", _cp(2, GATHER)),
    "alibi_gather_cp2": ("alibi", _cp(2, GATHER)),
    "alibi_ulysses_cp2": ("alibi", _cp(2, ULYSSES)),
    "mla_ring_cp2": ("mla", _cp(2)),
    "mla_gather_cp2": ("mla", _cp(2, GATHER)),
}
TOLERANCE = 1e-5


VARIABLE_LENGTHS = ["--no-pad-to-seq-lengths", "--pad-to-multiple-of", "1"]
SFT_LAYOUTS: Dict[str, List[str]] = {
    "sft_ring_cp2": _cp(2),
    "sft_ulysses_cp2_tp2": _cp(2, ULYSSES) + ["--tensor-model-parallel-size", "2"],
    "sft_gather_cp4": _cp(4, GATHER),
    # --no-pad-to-seq-lengths: each micro-batch its own length (rounded only to what CP and SP need),
    # shapes exchanged between pipeline stages; the losses of the run padded to --seq-length
    "sft_variable_lengths_ring_cp2_pp2": _cp(2) + ["--pipeline-model-parallel-size", "2"] + VARIABLE_LENGTHS,
    "sft_variable_lengths_ring_cp2_tp2_sp": _cp(2) + ["--tensor-model-parallel-size", "2", "--sequence-parallel"]
                                             + VARIABLE_LENGTHS,
    "sft_variable_lengths_tp2_sp_pp2": ["--tensor-model-parallel-size", "2", "--sequence-parallel",
                                        "--pipeline-model-parallel-size", "2"] + VARIABLE_LENGTHS,
    # the other data-parallel layouts of SFT (no CP): the distributed optimizer and FSDP2
    "sft_dp4_distributed_optimizer": ["--use-distributed-optimizer"],
    "sft_fsdp2_dp2_tp2": ["--use-torch-fsdp2", "--tensor-model-parallel-size", "2"],
    "sft_variable_lengths_fsdp2_dp4": ["--use-torch-fsdp2"] + VARIABLE_LENGTHS,
}
SFT_FOUR_LAYERS = ["--num-layers", "4"]  # interleaved pipeline stages: two virtual stages of one layer per rank
SFT_DEEP_LAYOUTS: Dict[str, List[str]] = {
    "sft_tp2_pp2_vpp2": SFT_FOUR_LAYERS + ["--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size",
                                           "2", "--num-layers-per-virtual-pipeline-stage", "1"],
}


def _sft_argv(prefix: str) -> List[str]:
    return [arg for arg in ARGV if arg != "--mock-data"] + ["--vocab-size", "32", "--stage", "sft",
                                                            "--is-instruction-dataset", "--data-path", prefix]


def _steps(argv: List[str]) -> List[Dict[str, float]]:
    from mindspeed_llm.posttrain import SFTTask
    from mindspeed_llm.training.pretrain_task import PretrainTask
    from mindspeed_llm.training.training import setup

    trainer = setup(argv, SFTTask if "--stage" in argv else PretrainTask)
    iterator = trainer.train_iterator()
    return [_figures(trainer.train_step(iterator)) for _ in range(2)]


def _figures(result) -> Dict[str, float]:
    return {"lm loss": result.loss, "grad_norm": result.grad_norm}


def _resumed(argv: List[str], directory: str) -> List[Dict[str, float]]:
    """One step, save; a new trainer loads it and takes the second step."""
    from mindspeed_llm.training.training import setup

    first = setup(argv + ["--save", directory])
    step = _figures(first.train_step(first.train_iterator()))
    first.save()
    second = setup(argv + ["--load", directory])
    return [step, _figures(second.train_step(second.train_iterator()))]


def _worker(rank: int, world: int, jobs: Dict[str, List[str]], resume: Tuple[List[str], str]) -> Dict[str, list]:
    results = {name: _steps(argv) for name, argv in jobs.items()}
    results["resume_ring_cp2"] = _resumed(*resume)
    return results


def _close(ours: List[Dict[str, float]], theirs: List[Dict[str, float]]) -> bool:
    return all(abs(a[key] - b[key]) <= TOLERANCE * abs(b[key]) for a, b in zip(ours, theirs) for key in b)


def test_every_context_parallel_layout_equals_one_process(tmp_path) -> None:
    from tests.unit.test_posttrain_sft import instruction_dataset

    references = {model: _steps(ARGV + extra) for model, extra in MODELS.items()}
    assert references["documents"][0] != references["base"][0]  # the document flags act
    sft = _sft_argv(instruction_dataset(tmp_path)[0])
    references["sft"] = _steps(sft)
    references["sft_four_layers"] = _steps(sft + SFT_FOUR_LAYERS)
    jobs = {name: ARGV + MODELS[model] + flags for name, (model, flags) in LAYOUTS.items()}
    jobs.update((name, sft + flags) for name, flags in {**SFT_LAYOUTS, **SFT_DEEP_LAYOUTS}.items())
    resume = (ARGV + _cp(2), str(tmp_path / "checkpoint"))
    per_rank = run_distributed(4, _worker, jobs, resume)
    expected = {name: references[model] for name, (model, _) in LAYOUTS.items()}
    expected["resume_ring_cp2"] = references["base"]
    expected.update((name, references["sft"]) for name in SFT_LAYOUTS)
    expected.update((name, references["sft_four_layers"]) for name in SFT_DEEP_LAYOUTS)
    wrong = {name: (steps, expected[name]) for name, steps in per_rank[-1].items()
             if not _close(steps, expected[name])}
    assert not wrong, f"{sorted(wrong)} differ from one process: {wrong}"
