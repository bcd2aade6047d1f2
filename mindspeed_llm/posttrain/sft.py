"""Supervised fine-tuning (``posttrain.py --stage sft``) on the instruction data ``preprocess_data.py`` writes.

``--data-path PREFIX --is-instruction-dataset`` names the packed files of an instruction handler
(``{PREFIX}_packed_{input_ids,attention_mask,labels}_document``; ``core/datasets/sft_dataset.py`` reads
them). Only the tokens the handler labelled are trained (assistant replies; prompts, system text and user
turns carry -100), so the loss is the mean cross-entropy over the assistant tokens. Samples packed into one
sequence (``preprocess_data.py --pack``) each restart their positions and attend only within themselves:
the batch carries their document ids, which attention turns into a block-diagonal causal mask (under
context parallelism too).
"""
from __future__ import annotations

import argparse
import os
from typing import Dict, List, Tuple

import torch

from core.datasets.sft_dataset import PACKED_FILES, SFTPackedDataset, packed_prefix
from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.data.handlers import PAIRWISE_FILES
from mindspeed_llm.tokenizer import build_tokenizer
from mindspeed_llm.training.pretrain_task import PretrainTask
from mindspeed_llm.training.task import Batch, Splits


class SFTTask(PretrainTask):
    """Next-token loss on the labelled tokens of packed instruction sequences (the pretraining forward step)."""

    name = "sft"

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.pad = build_tokenizer(args).pad

    def validate(self, args: argparse.Namespace) -> None:
        check_instruction_data(args)

    def build_datasets(self, args: argparse.Namespace, num_samples: Tuple[int, int, int]) -> Splits:
        train = SFTPackedDataset(args.data_path[0], args.seq_length, num_samples[0], args.seed, pad_token_id=self.pad)
        return train, None, None

    def collate(self, samples: List[Dict[str, torch.Tensor]]) -> Batch:
        return {name: torch.stack([sample[name] for sample in samples]) for name in samples[0]}  # each [b, s]


def check_instruction_data(args: argparse.Namespace) -> None:
    """One instruction dataset prefix whose packed files exist; a pairwise dataset is named as such."""
    if not args.is_instruction_dataset:
        raise ArgumentError("--stage sft trains on instruction data: add --is-instruction-dataset with --data-path "
                            "PREFIX written by preprocess_data.py with an instruction handler")
    if args.mock_data or not args.data_path or len(args.data_path) != 1:
        raise ArgumentError("--stage sft needs one --data-path PREFIX of an instruction dataset (no weights, no "
                            "--mock-data)")
    prefix = args.data_path[0]
    missing = [packed_prefix(prefix, name) + ".idx" for name in PACKED_FILES
               if not os.path.isfile(packed_prefix(prefix, name) + ".idx")]
    if missing and os.path.isfile(packed_prefix(prefix, PAIRWISE_FILES[0]) + ".idx"):
        raise ArgumentError(f"--data-path {prefix} is a pairwise dataset ({packed_prefix(prefix, PAIRWISE_FILES[0])}"
                            ".idx); --stage sft needs an instruction dataset")
    if missing:
        raise ArgumentError(f"--data-path {prefix}: {missing[0]} not found; run preprocess_data.py with an "
                            "instruction handler (--handler-name AlpacaStyleInstructionHandler) first")
    if args.reset_position_ids or args.reset_attention_mask or args.eod_mask_loss:
        raise ArgumentError("--reset-position-ids/--reset-attention-mask/--eod-mask-loss split pretraining text at "
                            "EOD; instruction data carries its own sample boundaries: drop them")
