"""Post-train a model (MindSpeed-LLM's entry): ``--stage sft`` on instruction data from preprocess_data.py.

    torchrun --nproc-per-node 2 posttrain.py --stage sft --is-instruction-dataset \
        --data-path data/alpaca --load ckpt/ --use-checkpoint-args --finetune \
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path TOKENIZER \
        --seq-length 1024 --micro-batch-size 1 --global-batch-size 8 --train-iters 100 --lr 1e-5 --save sft/

Takes every flag pretrain_gpt.py takes, plus the stage's own (``mindspeed_llm/entry_flags.py``: DPO's for
``--stage dpo``, GRPO's and the sampling flags for ``--stage grpo``, ...); a flag of another stage or entry is
refused with the entry that has it. ``posttrain_gpt.py`` is the same program under MindSpeed's name.
"""
from __future__ import annotations

import torch.distributed as dist

from mindspeed_llm.posttrain import posttrain


def main() -> None:
    try:
        posttrain()
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
