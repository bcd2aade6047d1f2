"""Pretrain a GPT-style decoder with Megatron's flags.

    torchrun --nproc-per-node 2 pretrain_gpt.py \
        --tensor-model-parallel-size 2 --num-layers 2 --hidden-size 128 --num-attention-heads 4 \
        --seq-length 128 --micro-batch-size 2 --global-batch-size 8 --train-iters 50 \
        --lr 1e-3 --mock-data --tokenizer-type NullTokenizer --vocab-size 1000 --save ckpt/

Writes Megatron-layout checkpoints under ``--save`` and prints one log line per
``--log-interval`` iterations. A single process runs without torchrun too.
"""
from __future__ import annotations

import torch.distributed as dist

from mindspeed_llm.training.training import pretrain  # the pretraining task (pretrain_task.py)


def main() -> None:
    try:
        pretrain()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
