"""Checkpoint conversion: tools/convert_ckpt.py HF -> TP2xPP2 -> HF vs a transformers round trip, same run.

Usage::

    python bench/convert.py            # TinyLlama's shape (1.1B parameters, bf16 files, ~2.2 GB per copy)
    python bench/convert.py --smoke    # a tiny Llama: seconds

Writes a synthetic Llama-shaped HF checkpoint (TinyLlama-1.1B: hidden 2048, 22
layers, 32 heads, 4 KV heads, FFN 5632, vocab 32000; random bf16 weights
written as safetensors shards tensor by tensor, no torch model is built) into a
temporary directory, then runs, each as its own subprocess:

- ``to_mg``: ``tools/convert_ckpt.py`` HF -> mg at TP 2, PP 2;
- ``to_hf``: ``tools/convert_ckpt.py`` that mg checkpoint -> HF;
- ``transformers``: ``AutoModelForCausalLM.from_pretrained(dtype=bfloat16)`` +
  ``save_pretrained`` of the same HF checkpoint (the baseline).

Each subprocess's wall seconds and peak RSS (``VmHWM``, measured by the child itself:
the kernel's ``ru_maxrss`` of a child counts the parent's RSS at fork) are reported, with the converter's totals (seconds summed, peak
RSS the larger of its two runs) and their ratios to the baseline;
``roundtrip_exact`` says whether HF -> mg -> HF gave identical tensors
(compared one tensor at a time). Prints one JSON line. Each copy is deleted as
soon as it is no longer needed; nothing is written outside the temporary
directory.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Tuple

import torch
from safetensors import safe_open
from safetensors.torch import save_file

TINYLLAMA = dict(hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                 intermediate_size=5632, vocab_size=32000, max_position_embeddings=2048)
SMOKE = dict(hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
             intermediate_size=128, vocab_size=128, max_position_embeddings=64)
SHARD_BYTES = 500 * 10**6
BASELINE = """
import sys, torch
from transformers import AutoModelForCausalLM
model = AutoModelForCausalLM.from_pretrained(sys.argv[1], dtype=torch.bfloat16)
model.save_pretrained(sys.argv[2])
"""
# Runs a module or a code string and writes the process's peak RSS (VmHWM, kB) to a file at exit. The
# child measures itself: the kernel's ru_maxrss of a child also counts the parent's RSS at fork time.
MEASURED = """
import atexit, runpy, sys
report, kind, target = sys.argv[1:4]
def write_peak():
    with open('/proc/self/status') as status:
        kb = next(line for line in status if line.startswith('VmHWM:')).split()[1]
    with open(report, 'w') as out:
        out.write(kb)
atexit.register(write_peak)
sys.argv = [target] + sys.argv[4:]
if kind == 'module':
    runpy.run_module(target, run_name='__main__', alter_sys=True)
else:
    exec(compile(target, '<baseline>', 'exec'), {'__name__': '__main__'})
"""


def llama_tensors(shape: Dict[str, int]) -> List[Tuple[str, Tuple[int, ...]]]:
    """(name, shape) of every tensor of an untied Llama checkpoint, in HF's order."""
    h, f, v = shape["hidden_size"], shape["intermediate_size"], shape["vocab_size"]
    head_dim = h // shape["num_attention_heads"]
    kv = shape["num_key_value_heads"] * head_dim
    names = [("model.embed_tokens.weight", (v, h))]
    for i in range(shape["num_hidden_layers"]):
        layer = f"model.layers.{i}."
        names += [(layer + "input_layernorm.weight", (h,)), (layer + "self_attn.q_proj.weight", (h, h)),
                  (layer + "self_attn.k_proj.weight", (kv, h)), (layer + "self_attn.v_proj.weight", (kv, h)),
                  (layer + "self_attn.o_proj.weight", (h, h)), (layer + "post_attention_layernorm.weight", (h,)),
                  (layer + "mlp.gate_proj.weight", (f, h)), (layer + "mlp.up_proj.weight", (f, h)),
                  (layer + "mlp.down_proj.weight", (h, f))]
    return names + [("model.norm.weight", (h,)), ("lm_head.weight", (v, h))]


def write_checkpoint(path: str, shape: Dict[str, int], shard_bytes: int) -> int:
    """A random bf16 Llama checkpoint in safetensors shards, one shard in memory at a time; its parameter count."""
    from transformers import LlamaConfig

    os.makedirs(path)
    LlamaConfig(**shape, dtype="bfloat16", tie_word_embeddings=False).save_pretrained(path)
    generator = torch.Generator().manual_seed(0)
    shards: List[Dict[str, torch.Tensor]] = [{}]
    size = total = 0
    files: List[str] = []

    def flush() -> None:
        files.append(f"shard-{len(files):05d}.safetensors")
        save_file(shards[0], os.path.join(path, files[-1]), metadata={"format": "pt"})
        weight_map.update({name: files[-1] for name in shards[0]})
        shards[0] = {}

    weight_map: Dict[str, str] = {}
    for name, tensor_shape in llama_tensors(shape):
        tensor = (torch.randn(tensor_shape, generator=generator) * 0.02).to(torch.bfloat16)
        if len(tensor_shape) == 1:
            tensor += 1  # norm weights near 1
        if shards[0] and size + tensor.nbytes > shard_bytes:
            flush()
            size = 0
        shards[0][name] = tensor
        size += tensor.nbytes
        total += tensor.numel()
    flush()
    index = {"metadata": {"total_size": total * 2}, "weight_map": weight_map}
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as handle:
        json.dump(index, handle)
    return total


def run_child(kind: str, target: str, argv: List[str], report: str) -> Tuple[float, float]:
    """(wall seconds, peak RSS in MB) of ``python -m target argv`` (kind ``module``) or of the code
    ``target`` with ``argv`` (kind ``code``) in a subprocess; its stderr goes to ours."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", MEASURED, report, kind, target, *argv], stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"bench/convert.py: {target if kind == 'module' else 'baseline'} exited {done.returncode}")
    with open(report) as handle:
        return seconds, int(handle.read()) / 1024


def same_tensors(a: str, b: str) -> bool:
    """Whether two HF directories hold the same tensors (one tensor in memory at a time)."""
    def where(path: str) -> Dict[str, str]:
        files = [f for f in os.listdir(path) if f.endswith(".safetensors")]
        out = {}
        for file in files:
            with safe_open(os.path.join(path, file), framework="pt") as handle:
                out.update({name: os.path.join(path, file) for name in handle.keys()})
        return out

    left, right = where(a), where(b)
    if set(left) != set(right):
        return False
    for name in left:
        with safe_open(left[name], framework="pt") as x, safe_open(right[name], framework="pt") as y:
            if not torch.equal(x.get_tensor(name), y.get_tensor(name)):
                return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny Llama: seconds")
    args = parser.parse_args()
    shape = SMOKE if args.smoke else TINYLLAMA
    with tempfile.TemporaryDirectory(prefix="bench_convert_") as root:
        src, mg, back, baseline = (os.path.join(root, name) for name in ("hf", "mg", "hf_back", "transformers"))
        params = write_checkpoint(src, shape, SHARD_BYTES if not args.smoke else 20_000)
        print(f"bench/convert.py: wrote {params / 1e9:.3f}B parameters to {src}", file=sys.stderr)
        results: Dict[str, Dict[str, float]] = {}
        convert = ("module", "tools.convert_ckpt")
        for name, (kind, target), argv in (
                ("transformers", ("code", BASELINE), [src, baseline]),
                ("to_mg", convert, ["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", src,
                                    "--save-dir", mg, "--target-tensor-parallel-size", "2",
                                    "--target-pipeline-parallel-size", "2"]),
                ("to_hf", convert, ["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", mg,
                                    "--save-dir", back])):
            seconds, rss = run_child(kind, target, argv, os.path.join(root, "peak_rss_kb"))
            results[name] = {"seconds": round(seconds, 2), "peak_rss_mb": round(rss, 1)}
            print(f"bench/convert.py: {name}: {results[name]}", file=sys.stderr)
            if name == "transformers":
                shutil.rmtree(baseline)
            if name == "to_hf":
                shutil.rmtree(mg)
        exact = same_tensors(src, back)
    converter = {"seconds": round(results["to_mg"]["seconds"] + results["to_hf"]["seconds"], 2),
                 "peak_rss_mb": max(results["to_mg"]["peak_rss_mb"], results["to_hf"]["peak_rss_mb"])}
    base = results["transformers"]
    print(json.dumps({
        "bench": "convert", "smoke": args.smoke, "parameters": params, "dtype": "bfloat16",
        "layout": "TP2xPP2", **{name: value for name, value in results.items()}, "converter": converter,
        "seconds_ratio": round(converter["seconds"] / base["seconds"], 3),
        "peak_rss_ratio": round(converter["peak_rss_mb"] / base["peak_rss_mb"], 3),
        "peak_rss_target_ratio": round(1 / 3, 3), "roundtrip_exact": exact,
    }))


if __name__ == "__main__":
    main()
