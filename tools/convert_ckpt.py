"""Convert checkpoints between Hugging Face safetensors (hf), our Megatron-style sharded layout (mg) and
the checkpoints of Megatron-LM / MindSpeed-LLM (megatron).

Hugging Face -> Megatron (TP shards)::

    python tools/convert_ckpt.py --load-model-type hf --save-model-type mg \\
        --target-tensor-parallel-size 2 --target-pipeline-parallel-size 1 \\
        --model-type-hf llama2 --load-dir ./llama-2-7b-hf --save-dir ./llama-2-7b-mcore-tp2

Megatron -> Hugging Face::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type hf \\
        --load-dir ./llama-2-7b-mcore-tp2 --save-dir ./llama-2-7b-hf-out --max-shard-size 5GB

Megatron -> Megatron (re-shard to another TP/PP/VPP layout)::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type mg \\
        --target-tensor-parallel-size 1 --target-pipeline-parallel-size 2 \\
        --num-layers-per-virtual-pipeline-stage 2 --load-dir ./ckpt-tp2 --save-dir ./ckpt-tp1-pp2-vpp2

LoRA adapters (a ``--lora-target-modules`` run's ``--save``) over their mg base -> HF, merged
(``W + alpha/r B A`` per projection, in fp32, modules to save replaced) or, with ``--save-lora-to-hf``, as
PEFT's ``adapter_config.json`` + ``adapter_model.safetensors`` (fused qkv / gate-up adapters split per HF
projection by the registry's own row transform, sharing ``A``; ``mindspeed_llm/transforms/peft_format.py``).
``--save-model-type mg`` (or ``megatron``) writes the merged model as a plain sharded checkpoint at any
target layout instead: the base of the next stage (DPO with fresh adapters after a LoRA SFT). Adapters of a
reward model (``--stage orm``: they hold its trained ``value_head.weight`` too, over a plain language-model base)
give that reward model: merged, HF's ``...ForSequenceClassification`` (``score.weight``, no ``lm_head``) or an mg
reward model; with ``--save-lora-to-hf``, PEFT's ``SEQ_CLS`` adapter with the score head saved whole::

    python tools/convert_ckpt.py --load-model-type mg --save-model-type hf --load-dir ./llama-2-7b-mcore \
        --lora-load ./lora-ckpt --save-dir ./llama-2-7b-merged [--save-lora-to-hf]
    python tools/convert_ckpt.py --load-model-type mg --save-model-type mg --load-dir ./llama-2-7b-mcore \
        --lora-load ./lora-ckpt --save-dir ./llama-2-7b-sft-mcore

A checkpoint written by MindSpeed-LLM or Megatron-LM (``megatron``) -> ours / HF, and back::

    python tools/convert_ckpt.py --load-model-type megatron --save-model-type mg \\
        --target-tensor-parallel-size 8 --load-dir ./mindspeed-ckpt --save-dir ./llama-2-7b-mcore-tp8
    python tools/convert_ckpt.py --load-model-type megatron --save-model-type hf --model-type-hf llama2 \\
        --vocab-size 32000 --load-dir ./mindspeed-ckpt --save-dir ./llama-2-7b-hf-out
    python tools/convert_ckpt.py --load-model-type mg --save-model-type megatron \\
        --target-tensor-parallel-size 4 --target-pipeline-parallel-size 2 \\
        [--transformer-impl transformer_engine] --load-dir ./ckpt --save-dir ./ckpt-for-megatron

What each format holds, how the tensors travel and every refusal: ``mindspeed_llm/convert/__init__.py``.
"""
from __future__ import annotations

import os
import sys
from typing import Optional, Sequence

if not __package__:  # run as a script (python tools/X.py) from a checkout not installed with pip install -e
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from core.checkpointing import CheckpointError
from mindspeed_llm.convert.arguments import build_parser
from mindspeed_llm.convert.driver import convert, return_large_frees_to_the_os
from mindspeed_llm.convert.errors import ConversionError
from mindspeed_llm.models.registry import RegistryError


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the converter; returns the exit code (2 with a one-line message on bad input)."""
    return_large_frees_to_the_os()
    try:
        args = build_parser().parse_args(argv)
        convert(args)
    except (ConversionError, RegistryError, CheckpointError) as error:
        print(f"convert_ckpt: error: {error}", file=sys.stderr)
        return 2
    print(f"convert_ckpt: wrote {args.save_model_type} checkpoint to {args.save_dir}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
