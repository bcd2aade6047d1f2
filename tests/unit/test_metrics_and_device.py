"""The Megatron log line, FLOPs per token, and core.device.

``format_log_line`` keeps Megatron's fields in Megatron's order (log parsers
keep working) and appends throughput, TFLOP/s per device, MFU and memory.
``training_flops_per_token`` is checked against a hand computation of its
documented formula, against 6 x (matmul parameters) plus the attention-score
term, and for skipping noop layers. ``train()`` prints one line per
``--log-interval`` iterations.
"""
from __future__ import annotations

import math
import os
import re
import subprocess
import sys

import pytest
import torch

from core.device import Accelerator, detect_device_type, init_accelerator, peak_tflops
from core.models.gpt_model import build_model
from core.parallel_state import single_process_state
from mindspeed_llm.arguments import parse_args, transformer_config_from_args
from mindspeed_llm.training.metrics import IterationStats, format_log_line, training_flops_per_token
from mindspeed_llm.training.training import setup, train

MEGATRON = (r" iteration\s+\d+/\s+\d+ \| consumed samples:\s+\d+ \| elapsed time per iteration \(ms\): [\d.]+ \|"
            r" learning rate: [\d.E+-]+ \| global batch size:\s+\d+ \| lm loss: [\d.E+-]+ \| loss scale: [\d.]+ \|"
            r" grad norm: [\d.]+ \| number of skipped iterations:\s+\d+ \| number of nan iterations:\s+\d+ \|")
APPENDED = (r" tokens per second: [\d.]+ \| TFLOP/s per device: [\d.]+ \| MFU: [\d.]+% \|"
            r" memory \(GB\): [\d.]+ \|")
LOG_LINE = re.compile("^" + MEGATRON + APPENDED + "$")

MODEL = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--group-query-attention",
         "--num-query-groups", "2", "--ffn-hidden-size", "128", "--swiglu", "--seq-length", "32",
         "--micro-batch-size", "2", "--train-iters", "6", "--lr", "1e-3"]


def _config(extra=(), vocab="100", model=MODEL):
    return transformer_config_from_args(parse_args(list(model) + ["--vocab-size", vocab, *extra]))


def _stats(**overrides) -> IterationStats:
    values = dict(iteration=20, train_iters=100, consumed_samples=160, elapsed_ms=123.456, learning_rate=2.5e-4,
                  global_batch_size=8, loss=4.123456789, loss_scale=65536.0, grad_norm=1.23456,
                  skipped_iterations=1, nan_iterations=0, tokens_per_second=12345.67, tflops_per_device=3.14159,
                  mfu=0.4567, memory_gb=1.5)
    values.update(overrides)
    return IterationStats(**values)


# ---------------------------------------------------------------------------- log line

def test_log_line_matches_megatron_format():
    line = format_log_line(_stats())
    assert LOG_LINE.match(line), line
    assert " iteration       20/     100 |" in line
    assert " consumed samples:          160 |" in line
    assert " learning rate: 2.500000E-04 |" in line
    assert " lm loss: 4.123457E+00 |" in line
    assert " loss scale: 65536.0 |" in line
    assert " grad norm: 1.235 |" in line
    assert " number of skipped iterations:   1 |" in line
    assert " MFU: 45.7% |" in line and " memory (GB): 1.50 |" in line
    assert "\n" not in line


def test_log_line_without_grad_norm_omits_the_field():
    """A skipped fp16 step has no grad norm; Megatron then leaves the field out."""
    line = format_log_line(_stats(grad_norm=None))
    assert "grad norm" not in line
    assert re.match(MEGATRON.replace(r" grad norm: [\d.]+ \|", ""), line), line


def test_train_prints_one_line_per_log_interval(capsys):
    trainer = setup(MODEL + ["--vocab-size", "100", "--global-batch-size", "4", "--log-interval", "2",
                             "--mock-data", "--tokenizer-type", "NullTokenizer", "--device", "cpu",
                             "--eval-iters", "0", "--attention-dropout", "0", "--hidden-dropout", "0",
                             "--peak-tflops", "2.0"])
    capsys.readouterr()
    train(trainer)
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith(" iteration ")]
    assert len(lines) == 3, out
    parsed = []
    for line in lines:
        assert LOG_LINE.match(line), line
        fields = dict(part.strip().rsplit(":", 1) if ":" in part else (part.strip(), "")
                      for part in line.split("|") if part.strip())
        parsed.append(fields)
    assert [int(re.search(r"iteration\s+(\d+)/", line).group(1)) for line in lines] == [2, 4, 6]
    assert all(re.search(r"/\s+6 \|", line) for line in lines)
    assert [int(p["consumed samples"]) for p in parsed] == [8, 16, 24]
    assert all(int(p["global batch size"]) == 4 for p in parsed)
    assert all(float(p["loss scale"]) == 1.0 for p in parsed)  # fp32: no scaling
    # the logged loss is the mean over the interval's iterations
    for k, p in enumerate(parsed):
        expected = (trainer.losses[2 * k] + trainer.losses[2 * k + 1]) / 2
        assert float(p["lm loss"]) == pytest.approx(expected, rel=1e-6)
    # MFU = TFLOP/s per device / --peak-tflops (both as printed, so up to their rounding)
    for p in parsed:
        tflops, mfu = float(p["TFLOP/s per device"]), float(p["MFU"].rstrip("%")) / 100
        assert abs(mfu - tflops / 2.0) <= 0.0006 + 0.005 / 2.0
        assert float(p["tokens per second"]) > 0 and float(p["memory (GB)"]) > 0
    assert trainer.flops_per_token == training_flops_per_token(trainer.config, 32)


def test_train_prints_megatron_validation_block(capsys):
    trainer = setup(MODEL + ["--vocab-size", "100", "--global-batch-size", "2", "--train-iters", "3",
                             "--log-interval", "10", "--eval-interval", "3", "--eval-iters", "1", "--mock-data",
                             "--tokenizer-type", "NullTokenizer", "--device", "cpu"])
    capsys.readouterr()
    train(trainer)
    out = capsys.readouterr().out
    match = re.search(r"^ validation loss at iteration 3 \| lm loss value: ([\d.E+-]+) \| lm loss PPL: "
                      r"([\d.E+-]+) \| $", out, re.MULTILINE)
    assert match, out
    assert float(match.group(2)) == pytest.approx(math.exp(float(match.group(1))), rel=1e-5)


# ---------------------------------------------------------------------------- FLOPs per token

def test_flops_per_token_by_hand():
    # h=64, 4 heads of 16 (q=64), 2 KV groups (kv=32), f=128 SwiGLU, s=32, V=100 padded to 128, 2 layers
    qkv = 2 * 64 * (64 + 2 * 32)       # 16384
    proj = 2 * 64 * 64                 # 8192
    scores = 4 * 32 * 64               # 8192: QK^T and context x V over the full s x s matrix
    mlp = 2 * 64 * 128 * 3             # 49152: three h x f matrices
    logits = 2 * 64 * 128              # 16384: the output layer multiplies the padded vocabulary
    expected = 3 * (2 * (qkv + proj + scores + mlp) + logits)
    assert expected == 540672
    assert training_flops_per_token(_config(), 32) == expected


def test_flops_per_token_is_six_n_plus_attention_scores():
    """3 x 2 FLOPs per multiply-add: 6 x the matmul weights a token meets, plus 3 x 4 s q per layer."""
    # a vocabulary that needs no padding, so the model's output layer is exactly V x h
    config = _config(vocab="128")
    model = build_model(config, single_process_state(), torch.device("cpu"), 1)
    matmul = sum(p.numel() for name, p in model.named_parameters()
                 if p.dim() == 2 and "word_embeddings" not in name and "position" not in name)
    output_layer = config.hidden_size * 128  # tied with the embedding (same tensor)
    n = matmul + output_layer
    attention_scores = 3 * config.num_layers * 4 * 32 * config.num_attention_heads * config.kv_channels
    assert training_flops_per_token(config, 32) == 6 * n + attention_scores
    # longer sequences only add the attention-score term
    assert training_flops_per_token(config, 64) - training_flops_per_token(config, 32) == attention_scores


MAMBA_SIZES = ["--mamba-head-dim", "16", "--mamba-num-groups", "2", "--mamba-state-dim", "8"]
GDN_SIZES = ["--linear-num-key-heads", "2", "--linear-num-value-heads", "4", "--linear-key-head-dim", "8",
             "--linear-value-head-dim", "16"]


@pytest.mark.parametrize("extra", [
    ["--experimental-attention-variant", "gated_delta_net", "--linear-attention-freq", "2",
     "--attention-output-gate", *GDN_SIZES],  # GPT layers: a DeltaNet then a gated attention, each with its MLP
    ["--hybrid-override-pattern", "G*-", "--num-layers", "3", *GDN_SIZES],  # one branch per layer
    ["--hybrid-override-pattern", "H-M", "--num-layers", "3", *MAMBA_SIZES],  # Falcon-H1's side by side, then Mamba
    ["--hybrid-override-pattern", "K*-", "--num-layers", "3", "--kda-full-rank-gates", "--linear-num-key-heads", "4",
     "--linear-num-value-heads", "4", "--linear-key-head-dim", "8", "--linear-value-head-dim", "16"],  # Bailing's KDA
], ids=["gdn_gpt_layers", "hybrid_letters", "mamba_beside_attention", "kda_full_rank_gates"])
def test_flops_of_linear_attention_layers_are_six_n_plus_their_scans(extra):
    """Hybrid and DeltaNet layers count the weights they hold (6 x the matmul weights a token meets, the conv
    and the per-head vectors aside) plus 3 x their scores (attention) or delta rule (6 nv dk dv)."""
    config = _config(extra, vocab="128")
    model = build_model(config, single_process_state(), torch.device("cpu"), 1)
    matmul = sum(p.numel() for name, p in model.named_parameters()
                 if p.dim() == 2 and "word_embeddings" not in name)
    parts = [config.layer_parts(i)[0] for i in range(config.num_layers)]
    beside = parts.count("mamba_and_attention")  # an attention and a Mamba scan (7/3 d_inner N) each
    scans = ((parts.count("attention") + beside) * 4 * 32 * config.num_attention_heads * config.kv_channels
             + parts.count("gated_delta_net") * 6 * 4 * 8 * 16
             + parts.count("kimi_delta_attention") * 6 * config.linear_num_value_heads * config.linear_key_head_dim
             * config.linear_value_head_dim
             + (parts.count("mamba") + beside) * 7 * config.mamba_d_inner * 8 / 3)
    assert training_flops_per_token(config, 32) == 6 * (matmul + config.hidden_size * 128) + 3 * scans


def test_flops_of_z_layers_count_their_shared_block_at_every_depth():
    """Zamba's 'Z' layers: 6 x the matmul weights each token meets, a shared block's once per 'Z' layer that
    runs it (ZMZ over one block: twice), plus 3 x (the block's attention scores + each Mamba scan)."""
    config = _config(["--hybrid-override-pattern", "ZMZ", "--num-layers", "3", "--shared-block-adapter-rank", "4",
                      "--shared-block-attention-adapters", *MAMBA_SIZES], vocab="128")
    model = build_model(config, single_process_state(), torch.device("cpu"), 1)
    runs = 2  # both 'Z' layers run block 0
    matmul = sum(p.numel() * (runs if name.startswith("decoder.shared_blocks.") else 1)
                 for name, p in model.named_parameters() if p.dim() == 2 and "word_embeddings" not in name)
    scans = (runs * 4 * 32 * config.num_attention_heads * config.kv_channels
             + 3 * 7 * config.mamba_d_inner * 8 / 3)
    assert training_flops_per_token(config, 32) == 6 * (matmul + config.hidden_size * 128) + 3 * scans


def test_frozen_weights_need_no_weight_gradient_and_a_reference_one_forward():
    """LoRA/QLoRA: the weight matmuls count twice (forward, input gradient), the score matmuls three times."""
    from mindspeed_llm.training.metrics import forward_flops_per_token

    config = _config()
    weights, scores = forward_flops_per_token(config, 32)
    assert scores == config.num_layers * 4 * 32 * config.num_attention_heads * config.kv_channels
    assert training_flops_per_token(config, 32) == 3 * (weights + scores)
    assert training_flops_per_token(config, 32, frozen_weights=True) == 2 * weights + 3 * scores
    lora = setup(MODEL + ["--vocab-size", "100", "--mock-data", "--tokenizer-type", "NullTokenizer", "--device", "cpu",
                          "--lora-target-modules", "linear_qkv"])
    assert lora.flops_per_token == training_flops_per_token(lora.config, 32, frozen_weights=True)
    assert lora.forward_flops_per_token == sum(forward_flops_per_token(lora.config, 32))


def test_flops_per_token_skips_noop_layers():
    with_noop = _config(["--noop-layers", "1"])
    one_layer_model = list(MODEL)
    one_layer_model[MODEL.index("--num-layers") + 1] = "1"
    one_layer = _config(model=one_layer_model)
    assert one_layer.num_layers == 1
    assert training_flops_per_token(with_noop, 32) == training_flops_per_token(one_layer, 32)
    assert training_flops_per_token(with_noop, 32) < training_flops_per_token(_config(), 32)


def test_flops_per_token_gelu_has_two_mlp_matrices():
    gelu = _config(model=[a for a in MODEL if a != "--swiglu"])
    swiglu = _config()
    assert training_flops_per_token(swiglu, 32) - training_flops_per_token(gelu, 32) == 3 * 2 * (2 * 64 * 128)


# ---------------------------------------------------------------------------- core.device

def test_init_accelerator_cpu():
    acc = init_accelerator("cpu")
    assert isinstance(acc, Accelerator)
    assert acc.type == "cpu" and acc.backend == "gloo" and acc.device == torch.device("cpu")
    assert acc.module is None
    state = acc.get_rng_state()
    assert torch.equal(state, torch.get_rng_state())
    assert acc.max_memory_gb() > 0


def test_backend_for_each_device_type():
    assert Accelerator("cuda").backend == "nccl"
    assert Accelerator("npu").backend == "hccl"
    assert Accelerator("cuda", local_rank=3).device == torch.device("cuda", 3)


def test_invalid_device_name_errors():
    with pytest.raises(ValueError, match="--device 'tpu'"):
        init_accelerator("tpu")
    assert init_accelerator("cpu").type == "cpu"


def test_detection_falls_back_to_cpu():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    assert detect_device_type() in ("cpu", "npu")


def test_peak_tflops_override_and_cpu_default():
    assert peak_tflops(123.0) == 123.0
    init_accelerator("cpu")
    assert peak_tflops() > 0
    assert peak_tflops(None) == peak_tflops()


def test_cpu_bf16_peak_is_the_fp32_one_without_bf16_units(monkeypatch):
    """MFU's CPU denominator: bf16 counts AMX / AVX512-BF16 only where PyTorch multiplies on them; elsewhere
    bf16 products run in fp32 (core.device.gemm_dtype), and so does the peak."""
    import core.device as device

    monkeypatch.setattr(device, "_cpu_flags", lambda: "flags : avx2 avx512f avx512_bf16 amx_bf16")
    monkeypatch.setattr(device, "_CPU_HALF_GEMM_UNITS", {torch.bfloat16: True, torch.float16: False})
    fp32 = device._cpu_peak_tflops(half_precision=False)
    assert device._cpu_peak_tflops(half_precision=True) == 16 * fp32  # AMX: 1024 flops/cycle against 64
    monkeypatch.setattr(device, "_CPU_HALF_GEMM_UNITS", {torch.bfloat16: False, torch.float16: False})
    assert device._cpu_peak_tflops(half_precision=True) == fp32


_FAULTS_OF_A_REUSED_TENSOR = """
import resource, torch
from core.device import init_accelerator, keep_freed_host_memory
init_accelerator("cpu")
def faults() -> int:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    torch.empty(16 * 2**20).fill_(1.0)  # 64 MiB, written then freed
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
counts = [faults() for _ in range(12)]
print(keep_freed_host_memory(), sum(counts[-4:]))
"""


def _reused_tensor_faults(**env: str):
    """(whether the tuning applied, page faults of the last 4 of 12 64 MiB tensors) in a fresh process."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", _FAULTS_OF_A_REUSED_TENSOR], capture_output=True, text=True,
                          env={**environ, **env}, check=True)
    applied, faults = done.stdout.split()
    return applied == "True", int(faults)


def test_cpu_accelerator_reuses_freed_host_memory():
    """On the CPU, once the heap holds a few freed 64 MiB blocks (aligned allocations leave gaps), the next
    tensors reuse them instead of faulting 16k fresh pages each; a user's own malloc setting (glibc's
    MALLOC_*_ variables) is left alone."""
    if not sys.platform.startswith("linux"):
        pytest.skip("glibc's malloc only")
    applied, faults = _reused_tensor_faults()
    if not applied:
        pytest.skip("the C library has no mallopt (not glibc)")
    assert faults < 1000
    applied, faults = _reused_tensor_faults(MALLOC_MMAP_MAX_="65536")
    assert not applied and faults > 4 * 8000


def test_deepseek_v4_attention_flops_follow_each_layer_kind() -> None:
    """DeepSeek-V4's layers count their own projections and the keys they read: the window, every HCA entry, the
    CSA top-k and its indexer's scores; not the dense s x s attention of 4 heads of 8."""
    from core.transformer.config import TransformerConfig
    from core.transformer.compressed_attention import compressed_attention_flops as flops

    config = TransformerConfig(num_layers=3, hidden_size=32, num_attention_heads=4, vocab_size=64,
                               add_bias_linear=False, compressed_attention_pattern="CHS", num_query_groups=1,
                               kv_channels=8, rotary_percent=0.5, q_lora_rank=8, sliding_window=3,
                               csa_compress_ratio=2, hca_compress_ratio=4, o_groups=2, o_lora_rank=4,
                               dsa_indexer_n_heads=2, dsa_indexer_head_dim=4, dsa_indexer_topk=2)
    h, d, q, s = 32, 8, 32, 16
    shared = 2 * h * 8 + 2 * 8 * q + 2 * h * d + 2 * q * 4 + 2 * 2 * 4 * h  # q latent, q, kv, grouped out
    sliding = flops(config, s, 2)
    assert sliding == (shared, 4 * 3 * q)
    hca = flops(config, s, 1)
    assert hca == (shared + 2 * h * 2 * d, 4 * (3 + s // 4) * q)
    csa = flops(config, s, 0)
    indexer = 2 * h * 2 * 2 * 4 + 2 * 8 * 2 * 4 + 2 * h * 2
    assert csa == (shared + 2 * h * 2 * d * 2 + indexer, 4 * (3 + 2) * q + 2 * 2 * 4 * (s // 2))
    from mindspeed_llm.training.metrics import forward_flops_per_token, mlp_forward_flops_per_token
    layers = [flops(config, s, layer) for layer in range(3)]  # the model's count is the layers' sum
    expected = (sum(w for w, _ in layers) + 3 * mlp_forward_flops_per_token(config) + 2 * h * config.padded_vocab_size,
                sum(a for _, a in layers))
    assert forward_flops_per_token(config, s) == expected


def test_moe_mla_and_dsa_flops_are_the_weights_a_token_meets() -> None:
    """A DeepSeek-V3.2-shaped model (a dense MLA layer, then MoE layers, DSA top-5, one MTP module): the weight FLOPs
    are twice the weights one token meets in the built model (the router, its top-2 of 4 experts and the shared
    expert, not every expert; MLA's latent projections; the indexer), and the activation FLOPs read the top-k keys
    in attention and every key in the indexer (the dense warm-up reads every key in attention too)."""
    from mindspeed_llm.training.metrics import forward_flops_per_token

    argv = ["--multi-latent-attention", "--q-lora-rank", "24", "--kv-lora-rank", "16", "--qk-head-dim", "8",
            "--qk-pos-emb-head-dim", "4", "--v-head-dim", "12", "--num-query-groups", "4", "--rope-interleaved",
            "--position-embedding-type", "rope", "--experimental-attention-variant", "dsa",
            "--dsa-indexer-n-heads", "2", "--dsa-indexer-head-dim", "8", "--dsa-indexer-topk", "5",
            "--num-experts", "4", "--moe-router-topk", "2", "--moe-ffn-hidden-size", "24", "--n-shared-experts", "1",
            "--shared-expert-gate", "--first-k-dense-replace", "1", "--mtp-num-layers", "1",
            "--untie-embeddings-and-output-weights", "--disable-bias-linear"]
    config = _config(argv, vocab="128")
    model = build_model(config, single_process_state(), torch.device("cpu"), 1)
    met = 0
    for name, param in model.named_parameters():
        if "word_embeddings" in name or param.dim() < 2:
            continue
        share = config.moe_router_topk / config.num_experts if param.dim() == 3 else 1  # [experts, ...]
        met += param.numel() * share
    met += model.output_layer.weight.numel()  # the MTP module's logits go through the shared output layer again
    s, heads, keys = 32, 4, 5
    attention = 2 * keys * heads * (8 + 4) + 2 * keys * heads * 12
    indexer = 2 * s * 2 * 8
    layers = config.num_layers + 1  # the MTP module's layer is the last decoder layer again
    weights, activations = forward_flops_per_token(config, s)
    assert weights == 2 * met
    assert activations == layers * (attention + indexer)
    warmup = _config(argv + ["--dsa-dense-warmup", "--dsa-indexer-loss-coeff", "0.1"], vocab="128")
    assert forward_flops_per_token(warmup, s)[1] == layers * (attention * s // keys + indexer)
