"""Decode speed of our generation engine against ``transformers`` ``generate`` on the same converted model.

    python bench/generate.py [--new-tokens 64] [--prompt-len 32] [--rounds 3] [--dtype fp32|bf16]
    python bench/generate.py --smoke     # a tiny model, few tokens: seconds

A Llama-shaped random model (8 layers, hidden 512, 8 heads, 4 KV heads, FFN 1408, vocab 32000) is built
with ``transformers``, saved, converted with ``tools/convert_ckpt.py`` and loaded as our ``GPTModel`` (one
process). For batch 1 and batch 16 (random prompts, greedy, no EOS), each side generates ``--new-tokens``
tokens and a single token; the difference is the decode time of ``new_tokens - 1`` steps (prefill
excluded). ``decode_tokens_per_s`` is ``batch * (new_tokens - 1)`` over that time, the median of
``--rounds`` alternating rounds; ``ratio`` is ours over ``transformers``' (at least 1 expected).
``same_tokens`` says whether both produced the same ids.

``grpo_rollout_training_split``: ``posttrain.py --stage grpo`` on the same converted model (``--load
--use-checkpoint-args --finetune``, fp32, one process): 4 prompts of ``--prompt-len`` random ids per step, 4
generations each, ``--new-tokens`` new tokens at most (the built-in ``format`` reward, so the timing does not
depend on what is learned). Per step (the median of ``--rounds`` steps after a warm-up step): the seconds of
the rollout (generation and rewards) and of training (forward, backward and the optimizer on the rollout's
completions), the rollout's share of the step, and the tokens per second of each: generated tokens per
rollout second, trained positions per training second. Prints one JSON line.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Callable, Dict, List

import torch
import transformers

import numpy as np

from core.checkpointing import checkpoint_file, load_file
from core.datasets.indexed_dataset import IndexedDatasetBuilder
from core.datasets.sft_dataset import PACKED_FILES, packed_prefix
from core.models.gpt_model import build_model, layout_state
from core.transformer.config import TransformerConfig
from mindspeed_llm.inference.engine import GenerationConfig, generate
from tools.convert_ckpt import main as convert_main

SHAPE = dict(hidden_size=512, intermediate_size=1408, num_hidden_layers=8, num_attention_heads=8,
             num_key_value_heads=4, vocab_size=32000, max_position_embeddings=1024)
SMOKE_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=128, max_position_embeddings=128)
BATCHES = (1, 16)


def _converted(shape: Dict[str, int], dtype: torch.dtype, root: str):
    """(HF model, our model) with the same weights."""
    config = transformers.LlamaConfig(**shape, dtype="float32")
    torch.manual_seed(0)
    hf = transformers.LlamaForCausalLM(config).eval()
    hf.save_pretrained(os.path.join(root, "hf"))
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir",
                             os.path.join(root, "hf"), "--save-dir", os.path.join(root, "mg"), "--model-type-hf",
                             "llama2", "--target-tensor-parallel-size", "1", "--target-pipeline-parallel-size", "1"])
    assert code == 0, "conversion failed"
    checkpoint = load_file(checkpoint_file(os.path.join(root, "mg"), None, 0, 0, 1, release=True))
    ours_config = TransformerConfig.from_dict({**checkpoint["transformer_config"], "params_dtype": dtype})
    ours = build_model(ours_config, layout_state(1), torch.device("cpu"), seed=0)
    ours.load_state_dict(checkpoint["model"], strict=True)
    hf.generation_config.eos_token_id = None
    return hf.to(dtype).eval(), ours.eval()


def _timed(run: Callable[[int], List[List[int]]], new_tokens: int) -> tuple:
    """(seconds of the decode steps, the ids of the full run)."""
    start = time.perf_counter()
    run(1)
    prefill = time.perf_counter() - start
    start = time.perf_counter()
    ids = run(new_tokens)
    return time.perf_counter() - start - prefill, ids


def bench(batch: int, hf, ours, prompt_len: int, new_tokens: int, rounds: int) -> Dict[str, object]:
    generator = torch.Generator().manual_seed(batch)
    vocab = hf.config.vocab_size
    prompts = [torch.randint(3, vocab, (prompt_len,), generator=generator).tolist() for _ in range(batch)]
    input_ids = torch.tensor(prompts)

    def ours_run(n: int) -> List[List[int]]:
        return generate(ours, prompts, GenerationConfig(max_new_tokens=n)).token_ids

    def hf_run(n: int) -> List[List[int]]:
        with torch.no_grad():
            out = hf.generate(input_ids=input_ids, attention_mask=torch.ones_like(input_ids), max_new_tokens=n,
                              min_new_tokens=n, do_sample=False, pad_token_id=0, eos_token_id=None)
        return out[:, prompt_len:].tolist()

    ours_times, hf_times, same = [], [], True
    for _ in range(rounds):
        seconds, ours_ids = _timed(ours_run, new_tokens)
        ours_times.append(seconds)
        seconds, hf_ids = _timed(hf_run, new_tokens)
        hf_times.append(seconds)
        same = same and ours_ids == hf_ids
    steps = batch * (new_tokens - 1)
    ours_rate = steps / max(statistics.median(ours_times), 1e-9)
    hf_rate = steps / max(statistics.median(hf_times), 1e-9)
    return {"decode_tokens_per_s": round(ours_rate, 1), "transformers_decode_tokens_per_s": round(hf_rate, 1),
            "ratio": round(ours_rate / hf_rate, 3), "same_tokens": same}


def _prompt_dataset(prefix: str, count: int, prompt_len: int, vocab: int) -> None:
    """``count`` instruction records of ``prompt_len`` random prompt ids and a one-token reply (unpacked)."""
    rng = np.random.RandomState(0)
    for name in PACKED_FILES:
        builder = IndexedDatasetBuilder(packed_prefix(prefix, name) + ".bin", np.int32)
        for _ in range(count):
            ids = rng.randint(3, vocab - 1, prompt_len + 1)
            row = {"input_ids": ids, "attention_mask": np.ones_like(ids),
                   "labels": np.concatenate([np.full(prompt_len, -100), ids[-1:]])}[name]
            builder.add_item(row)
            builder.end_document()
        builder.finalize(packed_prefix(prefix, name) + ".idx")


def grpo_split(root: str, vocab: int, prompt_len: int, new_tokens: int, rounds: int) -> Dict[str, float]:
    """Rollout and training time of GRPO steps on the converted model (see the module docstring)."""
    from mindspeed_llm.posttrain import GRPOTask
    from mindspeed_llm.training.training import setup

    prefix = os.path.join(root, "prompts")
    _prompt_dataset(prefix, 64, prompt_len, vocab)
    steps = rounds + 1
    argv = ["--load", os.path.join(root, "mg"), "--use-checkpoint-args", "--finetune", "--stage", "grpo",
            "--is-instruction-dataset", "--data-path", prefix, "--tokenizer-type", "NullTokenizer",
            "--vocab-size", str(vocab), "--seq-length", str(prompt_len + new_tokens), "--micro-batch-size", "2",
            "--global-batch-size", "4", "--num-generations", "4", "--max-new-tokens", str(new_tokens),
            "--reward-funcs", "format", "--train-iters", str(steps), "--lr", "1e-6", "--device", "cpu",
            "--attention-dropout", "0", "--hidden-dropout", "0", "--eval-iters", "0"]
    with contextlib.redirect_stdout(io.StringIO()):
        trainer = setup(argv, GRPOTask)
    iterator = trainer.train_iterator()
    rollout, training, generated, trained = [], [], [], []
    for _ in range(steps):
        result = trainer.train_step(iterator)
        seconds = result.timers["rollout"]
        rollout.append(seconds)
        training.append(result.timers["forward-backward"] - seconds + result.timers["optimizer"])
        generated.append(sum(len(c) for c in trainer.task.last_rollout["completions"]) / max(seconds, 1e-9))
        trained.append(result.tokens / max(training[-1], 1e-9))
    rollout_s, training_s = statistics.median(rollout[1:]), statistics.median(training[1:])
    return {"rollout_s": round(rollout_s, 3), "training_s": round(training_s, 3),
            "rollout_share": round(rollout_s / (rollout_s + training_s), 3),
            "rollout_tokens_per_s": round(statistics.median(generated[1:]), 1),
            "training_tokens_per_s": round(statistics.median(trained[1:]), 1)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dtype", choices=("fp32", "bf16"), default="fp32")
    parser.add_argument("--smoke", action="store_true", help="a tiny model and few tokens: seconds")
    args = parser.parse_args(argv)
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float32
    shape = SMOKE_SHAPE if args.smoke else SHAPE
    new_tokens, prompt_len, rounds = (4, 8, 1) if args.smoke else (args.new_tokens, args.prompt_len, args.rounds)
    with tempfile.TemporaryDirectory(prefix="bench_generate_") as root:
        hf, ours = _converted(shape, dtype, root)
        with torch.no_grad():
            results = {f"batch_{b}": bench(b, hf, ours, prompt_len, new_tokens, rounds) for b in BATCHES}
        split = grpo_split(root, shape["vocab_size"], prompt_len, new_tokens, rounds)
    record = {"bench": "generate", "dtype": args.dtype, "new_tokens": new_tokens, "prompt_len": prompt_len,
              "threads": torch.get_num_threads(), **results, "grpo_rollout_training_split": split}
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
