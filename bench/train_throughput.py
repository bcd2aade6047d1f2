"""Training throughput: our training step against Hugging Face Llama + PyTorch AdamW.

    python bench/train_throughput.py [--steps 4] [--warmup 1] [--dtypes fp32,bf16]

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
from typing import Callable, Dict, List

import torch

LAYERS, HIDDEN, HEADS, FFN, VOCAB, SEQ, MBS = 8, 512, 8, 1408, 32000, 512, 4


def our_argv(dtype: str) -> List[str]:
    argv = ["--num-layers", str(LAYERS), "--hidden-size", str(HIDDEN), "--num-attention-heads", str(HEADS),
            "--ffn-hidden-size", str(FFN), "--seq-length", str(SEQ), "--max-position-embeddings", str(SEQ),
            "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu",
            "--disable-bias-linear", "--untie-embeddings-and-output-weights", "--attention-dropout", "0",
            "--hidden-dropout", "0", "--micro-batch-size", str(MBS), "--global-batch-size", str(MBS),
            "--train-iters", "1000", "--lr", "1e-4", "--mock-data", "--tokenizer-type", "NullTokenizer",
            "--vocab-size", str(VOCAB), "--make-vocab-size-divisible-by", "1", "--device", "cpu",
            "--eval-iters", "0"]
    return argv + (["--bf16"] if dtype == "bf16" else [])


def our_step_fn(dtype: str):
    from mindspeed_llm.training.training import setup

    trainer = setup(our_argv(dtype))
    iterator = trainer.train_iterator()
    return (lambda: trainer.train_step(iterator)), trainer


def hf_step_fn(dtype: str) -> Callable[[], None]:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=FFN, num_hidden_layers=LAYERS,
                         num_attention_heads=HEADS, num_key_value_heads=HEADS, max_position_embeddings=SEQ,
                         tie_word_embeddings=False, attention_dropout=0.0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).train()
    model.config._attn_implementation = "sdpa"
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, VOCAB, (MBS, SEQ + 1))

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


def measure(dtype: str, steps: int, warmup: int, rounds: int) -> Dict[str, float]:
    from core.device import peak_tflops

    ours, trainer = our_step_fn(dtype)
    theirs = hf_step_fn(dtype)
    timed(ours, warmup)
    timed(theirs, warmup)
    our_times, hf_times = [], []
    for _ in range(rounds):  # alternate blocks so drifts in machine speed hit both
        our_times += timed(ours, steps)
        hf_times += timed(theirs, steps)
    tokens = MBS * SEQ
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
    args = parser.parse_args()
    result = {"model": f"llama L{LAYERS} h{HIDDEN} heads{HEADS} ffn{FFN} V{VOCAB} s{SEQ} mbs{MBS}",
              "threads": torch.get_num_threads()}
    for dtype in args.dtypes.split(","):
        result[dtype] = measure(dtype, args.steps, args.warmup, args.rounds)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
