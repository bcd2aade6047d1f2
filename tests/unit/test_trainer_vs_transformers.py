"""Our single-process trainer equals ``transformers`` + ``torch.optim.AdamW``, trained by hand.

The parallel equivalence tests compare our layouts with our own one-process run,
so a bug that does not depend on the layout (decaying every parameter, a wrong
clip, an lr schedule off by one step) passes all of them. This test trains the
same tiny Llama-shaped model (RMSNorm, SwiGLU, GQA, RoPE, untied embeddings;
once without biases as ``LlamaForCausalLM`` and once with q/k/v biases as
``Qwen2ForCausalLM``) for three steps two ways:

* ours: ``setup(argv)``, ``trainer.train_step(iterator)`` (fp32, dropout 0,
  mock data, 4 micro-batches per step);
* the reference: the HF model built from our initial weights, written by
  ``trainer.save()`` and converted by the production converter
  (``tools/convert_ckpt.py``, mg -> hf); the same token batches (a second
  iterator over our mock dataset); mean cross-entropy over the global batch;
  ``torch.optim.AdamW`` with Megatron's two parameter groups (no decay on
  biases and norm weights), ``torch.nn.utils.clip_grad_norm_`` and the
  learning rate of Megatron's warmup + cosine formula written out below.

Losses, gradient norms and the final weights (our final checkpoint converted
the same way) must agree to about 1e-5 relative, and every weight must have moved.
The clip is checked to be active at every step.
"""
from __future__ import annotations

import math
import os
from typing import Dict, Iterator, List, Tuple

import pytest
import torch
import transformers
from safetensors.torch import load_file as load_safetensors

from mindspeed_llm.training.training import Trainer, setup
from tools.convert_ckpt import main as convert_main

STEPS = 3
LR, MIN_LR, WARMUP_INIT, WARMUP, DECAY = 1e-3, 1e-4, 1e-4, 1, 3
WEIGHT_DECAY, CLIP, BETAS, EPS = 0.1, 0.1, (0.9, 0.95), 1e-8
ARGV = [
    "--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128", "--num-attention-heads", "4",
    "--group-query-attention", "--num-query-groups", "2", "--seq-length", "32", "--max-position-embeddings", "32",
    "--position-embedding-type", "rope", "--normalization", "RMSNorm", "--swiglu", "--disable-bias-linear",
    "--untie-embeddings-and-output-weights", "--attention-dropout", "0", "--hidden-dropout", "0",
    "--micro-batch-size", "2", "--global-batch-size", "8", "--train-iters", str(STEPS),
    "--lr", str(LR), "--min-lr", str(MIN_LR), "--lr-warmup-init", str(WARMUP_INIT),
    "--lr-warmup-iters", str(WARMUP), "--lr-decay-iters", str(DECAY), "--lr-decay-style", "cosine",
    "--weight-decay", str(WEIGHT_DECAY), "--clip-grad", str(CLIP), "--adam-beta1", str(BETAS[0]),
    "--adam-beta2", str(BETAS[1]), "--adam-eps", str(EPS),
    # 128 tokens: no vocabulary padding, so HF's softmax runs over the same logits as ours
    "--mock-data", "--tokenizer-type", "NullTokenizer", "--vocab-size", "128", "--seed", "5",
    "--device", "cpu", "--eval-iters", "0", "--log-interval", "1",
]
# variant -> (extra flags, --model-type-hf, HF model class)
VARIANTS: Dict[str, Tuple[List[str], str, str]] = {
    "llama_no_bias": ([], "llama2", "LlamaForCausalLM"),
    "qkv_bias": (["--add-qkv-bias"], "qwen2", "Qwen2ForCausalLM"),
}


def megatron_lr(step: int) -> float:
    """Megatron's lr for the update at ``step`` (0-based): linear warmup, then cosine to MIN_LR."""
    if step <= WARMUP:
        return WARMUP_INIT + (LR - WARMUP_INIT) * step / WARMUP
    ratio = (step - WARMUP) / (DECAY - WARMUP)
    return MIN_LR + 0.5 * (math.cos(math.pi * ratio) + 1.0) * (LR - MIN_LR)


def megatron_param_groups(model: torch.nn.Module) -> List[Dict]:
    """Megatron's groups, written from HF names: biases and norm weights are not decayed."""
    decay, no_decay = [], []
    for name, param in model.named_parameters():
        (no_decay if name.endswith(".bias") or "norm" in name else decay).append(param)
    assert decay and no_decay
    return [{"params": decay, "weight_decay": WEIGHT_DECAY}, {"params": no_decay, "weight_decay": 0.0}]


def to_hf_weights(trainer: Trainer, family: str, root: str) -> str:
    """Save the trainer's weights and convert them with the production converter; the HF dir."""
    trainer.args.save = os.path.join(root, f"mg_iter{trainer.iteration}")
    trainer.save()
    hf_dir = os.path.join(root, f"hf_iter{trainer.iteration}")
    code = convert_main(["--load-model-type", "mg", "--save-model-type", "hf", "--load-dir", trainer.args.save,
                         "--save-dir", hf_dir, "--model-type-hf", family])
    assert code == 0
    return hf_dir


def global_batch(iterator: Iterator[Dict[str, torch.Tensor]], micro_batches: int) -> Tuple[torch.Tensor, ...]:
    """The next ``micro_batches`` micro-batches of our data pipeline, concatenated: tokens, labels [b, s]."""
    batches = [next(iterator) for _ in range(micro_batches)]
    for batch in batches:
        assert bool((batch["loss_mask"] == 1).all())  # the reference's plain mean assumes it
    return torch.cat([b["tokens"] for b in batches]), torch.cat([b["labels"] for b in batches])


def reference_step(model: transformers.PreTrainedModel, optimizer: torch.optim.Optimizer, step: int,
                   tokens: torch.Tensor, labels: torch.Tensor) -> Tuple[float, float]:
    """One HF training step; returns (loss, gradient norm before clipping)."""
    for group in optimizer.param_groups:
        group["lr"] = megatron_lr(step)
    optimizer.zero_grad(set_to_none=True)
    logits = model(input_ids=tokens).logits  # [b, s, v]
    loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
    optimizer.step()
    return loss.item(), norm.item()


def train_both(variant: str, root: str) -> Dict[str, object]:
    extra, family, model_class = VARIANTS[variant]
    trainer = setup(ARGV + extra)
    hf_model = getattr(transformers, model_class).from_pretrained(
        to_hf_weights(trainer, family, root), dtype=torch.float32, attn_implementation="eager")
    hf_model.train()
    initial = {name: p.detach().clone() for name, p in hf_model.named_parameters()}
    optimizer = torch.optim.AdamW(megatron_param_groups(hf_model), lr=LR, betas=BETAS, eps=EPS)
    ours_iterator, reference_iterator = trainer.train_iterator(), trainer.train_iterator()
    ours, reference = [], []
    for step in range(STEPS):
        result = trainer.train_step(ours_iterator)
        ours.append((result.loss, result.grad_norm))
        reference.append(reference_step(hf_model, optimizer, step, *global_batch(reference_iterator,
                                                                                   trainer.num_microbatches)))
    final = load_hf_dir(to_hf_weights(trainer, family, root))
    return {"ours": ours, "reference": reference, "initial": initial, "final_ours": final,
            "final_reference": {name: p.detach() for name, p in hf_model.named_parameters()}}


def load_hf_dir(hf_dir: str) -> Dict[str, torch.Tensor]:
    return load_safetensors(os.path.join(hf_dir, "model.safetensors"))


@pytest.fixture(scope="module", params=sorted(VARIANTS))
def runs(request, tmp_path_factory) -> Dict[str, object]:
    return train_both(request.param, str(tmp_path_factory.mktemp(request.param)))


def test_losses_and_grad_norms_equal_transformers(runs) -> None:
    ours, reference = torch.tensor(runs["ours"]), torch.tensor(runs["reference"])  # [steps, (loss, norm)]
    torch.testing.assert_close(ours, reference, rtol=1e-5, atol=0)
    assert bool((reference[:, 1] > 2 * CLIP).all()), "the clip must be active at every step"


def test_final_weights_equal_transformers(runs) -> None:
    ours, reference, initial = runs["final_ours"], runs["final_reference"], runs["initial"]
    assert set(ours) == set(reference)
    for name, value in reference.items():
        torch.testing.assert_close(ours[name], value, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")
        assert not torch.equal(value, initial[name]), f"{name} was not updated"

