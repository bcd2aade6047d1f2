"""Training throughput: our training step against Hugging Face Llama + PyTorch AdamW.

    python bench/train_throughput.py [--steps 4] [--warmup 1] [--dtypes fp32,bf16]
    python bench/train_throughput.py --smoke     # a tiny model, one timed step: seconds

One Llama-shaped model (8 layers, hidden 512, 8 heads, FFN 1408, vocab 32000,
seq 512, micro batch 4), trained in the same process by our ``Trainer``
(fused QKV and gate/up, vocab-parallel cross-entropy, fp32 gradient buffers,
clipping, AdamW on fp32 master weights) and by
``transformers.LlamaForCausalLM`` with ``torch.optim.AdamW`` (bf16: autocast).
The two alternate in blocks so machine noise hits both. Prints one JSON line:
tokens/s of both, the ratio ours/HF and our MFU, per dtype.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from typing import Callable, Dict, List

import torch


@dataclass(frozen=True)
class Shape:
    """The Llama-shaped bench model and its micro-batch."""

    layers: int = 8
    hidden: int = 512
    heads: int = 8
    ffn: int = 1408
    vocab: int = 32000
    seq: int = 512
    micro_batch: int = 4

    def __str__(self) -> str:
        return (f"llama L{self.layers} h{self.hidden} heads{self.heads} ffn{self.ffn} V{self.vocab} s{self.seq} "
                f"mbs{self.micro_batch}")


BENCH, SMOKE = Shape(), Shape(layers=2, hidden=64, heads=4, ffn=128, vocab=256, seq=32, micro_batch=2)


def our_argv(shape: Shape, dtype: str, num_workers: int) -> List[str]:
    argv = ["--num-layers", str(shape.layers), "--hidden-size", str(shape.hidden),
            "--num-attention-heads", str(shape.heads), "--ffn-hidden-size", str(shape.ffn),
            "--seq-length", str(shape.seq), "--max-position-embeddings", str(shape.seq),
            "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
            "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--attention-dropout", "0",
            "--hidden-dropout", "0", "--micro-batch-size", str(shape.micro_batch),
            "--global-batch-size", str(shape.micro_batch), "--train-iters", "1000", "--lr", "1e-4", "--mock-data",
            "--tokenizer-type", "NullTokenizer", "--vocab-size", str(shape.vocab),
            "--make-vocab-size-divisible-by", "1", "--device", "cpu", "--eval-iters", "0",
            "--num-workers", str(num_workers)]
    return argv + (["--bf16"] if dtype == "bf16" else [])


def our_step_fn(shape: Shape, dtype: str, num_workers: int):
    from mindspeed_llm.training.training import setup

    trainer = setup(our_argv(shape, dtype, num_workers))
    iterator = trainer.train_iterator()
    return (lambda: trainer.train_step(iterator)), trainer


def hf_step_fn(shape: Shape, dtype: str) -> Callable[[], None]:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=shape.vocab, hidden_size=shape.hidden, intermediate_size=shape.ffn,
                         num_hidden_layers=shape.layers, num_attention_heads=shape.heads,
                         num_key_value_heads=shape.heads, max_position_embeddings=shape.seq,
                         tie_word_embeddings=False, attention_dropout=0.0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).train()
    model.config._attn_implementation = "sdpa"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, shape.vocab, (shape.micro_batch, shape.seq + 1))

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == "bf16"):
            out = model(input_ids=ids[:, :-1], labels=ids[:, :-1])
        out.loss.backward()
        optimizer.step()

    return step


def timed(step: Callable[[], object], count: int) -> List[float]:
    times = []
    for _ in range(count):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return times


def measure(shape: Shape, dtype: str, steps: int, warmup: int, rounds: int,
            num_workers: int = 2) -> Dict[str, float]:
    from core.device import peak_tflops

    ours, trainer = our_step_fn(shape, dtype, num_workers)
    theirs = hf_step_fn(shape, dtype)
    timed(ours, warmup)
    timed(theirs, warmup)
    our_times, hf_times = [], []
    for _ in range(rounds):  # alternate blocks so drifts in machine speed hit both
        our_times += timed(ours, steps)
        hf_times += timed(theirs, steps)
    tokens = shape.micro_batch * shape.seq
    ours_tps = tokens / statistics.median(our_times)
    hf_tps = tokens / statistics.median(hf_times)
    tflops = trainer.flops_per_token * ours_tps / 1e12
    return {"ours_tokens_per_s": round(ours_tps, 1), "hf_tokens_per_s": round(hf_tps, 1),
            "ratio": round(ours_tps / hf_tps, 3), "ours_tflops": round(tflops, 3),
            "ours_mfu": round(tflops / peak_tflops(half_precision=dtype == "bf16"), 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed steps per block")
    parser.add_argument("--rounds", type=int, default=2, help="alternating blocks per model")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--dtypes", default="fp32,bf16")
    parser.add_argument("--smoke", action="store_true", help="a tiny model, one timed step per model and dtype")
    args = parser.parse_args()
    shape = SMOKE if args.smoke else BENCH
    if args.smoke:
        args.steps, args.rounds = 1, 1
    result = {"bench": "train_throughput", "model": str(shape), "threads": torch.get_num_threads()}
    for dtype in args.dtypes.split(","):
        result[dtype] = measure(shape, dtype, args.steps, args.warmup, args.rounds,
                                num_workers=0 if args.smoke else 2)  # smoke: no DataLoader processes
    print(json.dumps(result))


if __name__ == "__main__":
    main()
