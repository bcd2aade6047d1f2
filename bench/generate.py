"""Decode speed of our generation engine against ``transformers`` ``generate`` on the same converted model.

    python bench/generate.py [--new-tokens 64] [--prompt-len 32] [--rounds 3] [--dtype fp32|bf16]
    python bench/generate.py --smoke     # a tiny model, few tokens: seconds

A Llama-shaped random model (8 layers, hidden 512, 8 heads, 4 KV heads, FFN 1408, vocab 32000) is built
with ``transformers``, saved, converted with ``tools/convert_ckpt.py`` and loaded as our ``GPTModel`` (one
process). For batch 1 and batch 16 (random prompts, greedy, no EOS), each side generates ``--new-tokens``
tokens and a single token; the difference is the decode time of ``new_tokens - 1`` steps (prefill
excluded). ``decode_tokens_per_s`` is ``batch * (new_tokens - 1)`` over that time, the median of
``--rounds`` alternating rounds; ``ratio`` is ours over ``transformers``' (at least 1 expected).
``same_tokens`` says whether both produced the same ids. Prints one JSON line.
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

from core.checkpointing import checkpoint_file, load_file
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
    record = {"bench": "generate", "dtype": args.dtype, "new_tokens": new_tokens, "prompt_len": prompt_len,
              "threads": torch.get_num_threads(), **results,
              "grpo_rollout_training_split": None}  # GRPO (issue 13, point 4) is not built yet
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
