"""Supervised fine-tuning (``posttrain.py --stage sft``) on the instruction data ``preprocess_data.py`` writes.

``--data-path PREFIX --is-instruction-dataset`` names the packed files of an instruction handler
(``{PREFIX}_packed_{input_ids,attention_mask,labels}_document``; ``core/datasets/sft_dataset.py`` reads
them). Only the tokens the handler labelled are trained (assistant replies; prompts, system text and user
turns carry -100), so the loss is the mean cross-entropy over the assistant tokens. Samples packed into one
sequence (``preprocess_data.py --pack``) each restart their positions and attend only within themselves:
the batch carries their document ids, which attention turns into a block-diagonal causal mask (under
context parallelism too).

Flags (MindSpeed-LLM's):

- ``--no-pad-to-seq-lengths`` (and ``--variable-seq-lengths``, its name up to MindSpeed 2.2): each
  micro-batch is cut to its longest sample rounded up to ``--pad-to-multiple-of`` (default 8), never
  beyond ``--seq-length``, instead of being padded to ``--seq-length``. The rounding also keeps what
  context parallelism (2 x CP load-balanced ring chunks, CP parts) and sequence parallelism (TP parts
  of each CP part) need. Padding is causal-masked and loss-free, so the loss equals the padded run's;
  pipeline stages exchange the activations' shapes (``--no-pad-to-seq-lengths`` sets
  ``--variable-seq-lengths``).
- ``--full-shuffle-instruction-dataset``: the sample order is shuffled across epochs too
  (``SFTPackedDataset(full_shuffle=True)``).
- ``--prompt-type NAME``: templates act when ``preprocess_data.py`` tokenizes the data; training checks
  that the dataset was written with NAME (``{PREFIX}_packed_settings.json``) and refuses it otherwise.
- ``--split a,b,c``: train / validation / test ranges of the stored sequences (``splits.py``); without it
  every sequence is trained on. Validation (``--eval-iters``, ``--eval-interval``) reports ``lm loss``.
"""
from __future__ import annotations

import argparse
import math
import os
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch

from core.datasets.sft_dataset import (PACKED_FILES, SFTPackedDataset, check_packed_files, packed_prefix,
                                      real_length)
from core.transformer.context_parallel import sequence_divisor, ulysses_degree
from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.data.handlers import PAIRWISE_FILES, dataset_settings, settings_path
from mindspeed_llm.data.templates import TOKENIZER_TEMPLATE_NAMES
from mindspeed_llm.entry_flags import posttrain_entry
from mindspeed_llm.posttrain.splits import build_split_datasets, check_splits, split_sequence_ids, stored_sequences
from mindspeed_llm.tokenizer import build_tokenizer
from mindspeed_llm.training.pretrain_task import PretrainTask, check_token_ids
from mindspeed_llm.training.task import Batch, Splits


class SFTTask(PretrainTask):
    """Next-token loss on the labelled tokens of packed instruction sequences (the pretraining forward step)."""

    name = "sft"
    entry = posttrain_entry("sft")

    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args)
        self.pad = build_tokenizer(args).pad
        # --no-pad-to-seq-lengths / --variable-seq-lengths: micro-batch lengths are multiples of this
        self.length_multiple: Optional[int] = micro_batch_length_multiple(args) if args.variable_seq_lengths else None

    def validate(self, args: argparse.Namespace) -> None:
        check_instruction_data(args)
        check_prompt_type(args)
        check_splits(args, stored_sequences(args.data_path[0], PACKED_FILES[0]), "sequences")

    def build_datasets(self, args: argparse.Namespace, num_samples: Tuple[int, int, int]) -> Splits:
        """The --split ranges of the stored sequences (everything to training by default)."""
        prefix = args.data_path[0]

        def split_dataset(sequence_ids: np.ndarray, samples: int) -> SFTPackedDataset:
            return SFTPackedDataset(prefix, args.seq_length, samples, args.seed, pad_token_id=self.pad,
                                    full_shuffle=args.full_shuffle_instruction_dataset, sequence_ids=sequence_ids)

        ids = split_sequence_ids(args, stored_sequences(prefix, PACKED_FILES[0]))
        return build_split_datasets(split_dataset, ids, num_samples)

    def collate(self, samples: List[Dict[str, torch.Tensor]]) -> Batch:
        batch = {name: torch.stack([sample[name] for sample in samples]) for name in samples[0]}  # each [b, s]
        check_token_ids(torch.stack([batch["tokens"], batch["labels"]]), self.args)
        if self.length_multiple is None:
            return batch
        length = padded_length(real_length(batch["document_ids"]), self.length_multiple, self.args.seq_length)
        return {name: value[:, :length].contiguous() for name, value in batch.items()}  # each [b, length]


def micro_batch_length_multiple(args: argparse.Namespace) -> int:
    """What a micro-batch's length must divide by: --pad-to-multiple-of, the context-parallel split (2 x CP
    load-balanced ring chunks, else CP parts) and, under sequence parallelism, TP parts of each CP part."""
    cp, tp = args.context_parallel_size, args.tensor_model_parallel_size
    ulysses = ulysses_degree(args.context_parallel_algo, cp, args.ulysses_degree_in_cp)
    multiple = math.lcm(args.pad_to_multiple_of,
                        sequence_divisor(cp, args.context_parallel_algo, args.attention_mask_type, ulysses))
    return math.lcm(multiple, cp * tp) if args.sequence_parallel else multiple


def padded_length(longest: int, multiple: int, seq_length: int) -> int:
    """``longest`` rounded up to ``multiple``, at most ``seq_length`` (which validation made divisible by what
    CP and SP need) and at least ``multiple``."""
    return min(max(-(-longest // multiple), 1) * multiple, seq_length)


# consumes: --is-instruction-dataset (it declares what --data-path holds; SFT requires it, pretraining refuses it)
def check_instruction_data(args: argparse.Namespace) -> None:
    """One instruction dataset prefix whose packed files exist; a pairwise dataset is named as such."""
    if not args.is_instruction_dataset:
        raise ArgumentError(f"--stage {args.stage} trains on instruction data: add --is-instruction-dataset with "
                            "--data-path PREFIX written by preprocess_data.py with an instruction handler")
    if args.mock_data or not args.data_path or len(args.data_path) != 1:
        raise ArgumentError(f"--stage {args.stage} needs one --data-path PREFIX of an instruction dataset (no "
                            "weights, no --mock-data)")
    prefix = args.data_path[0]
    missing = [packed_prefix(prefix, name) + ".idx" for name in PACKED_FILES
               if not os.path.isfile(packed_prefix(prefix, name) + ".idx")]
    if missing and os.path.isfile(packed_prefix(prefix, PAIRWISE_FILES[0]) + ".idx"):
        raise ArgumentError(f"--data-path {prefix} is a pairwise dataset ({packed_prefix(prefix, PAIRWISE_FILES[0])}"
                            f".idx); --stage {args.stage} needs an instruction dataset")
    if missing:
        raise ArgumentError(f"--data-path {prefix}: {missing[0]} not found; run preprocess_data.py with an "
                            "instruction handler (--handler-name AlpacaStyleInstructionHandler) first")
    check_packed_files(prefix, PACKED_FILES)  # sound and of one run (cheap); IndexedDatasetError
    if args.reset_position_ids or args.reset_attention_mask or args.eod_mask_loss:
        raise ArgumentError("--reset-position-ids/--reset-attention-mask/--eod-mask-loss split pretraining text at "
                            "EOD; instruction data carries its own sample boundaries: drop them")


# consumes: --prompt-type (in training a template's only role is this check: the data was tokenized with it)
def check_prompt_type(args: argparse.Namespace) -> None:
    """--prompt-type must name the template the --data-path dataset records (preprocess_data.py writes it)."""
    if args.prompt_type is None:
        return
    prefix = args.data_path[0]
    try:
        settings = dataset_settings(prefix)
    except ValueError as error:
        raise ArgumentError(str(error)) from None
    recorded = (settings or {}).get("prompt_type")
    if recorded is None:
        raise ArgumentError(f"--prompt-type {args.prompt_type}: templates apply when preprocess_data.py tokenizes the "
                            f"data, and {prefix} records none ({settings_path(prefix)} not found); drop --prompt-type "
                            f"or re-run preprocess_data.py --prompt-type {args.prompt_type}")
    if _template_name(recorded) != _template_name(args.prompt_type):
        raise ArgumentError(f"--prompt-type {args.prompt_type} differs from {recorded}, the template {prefix} was "
                            f"tokenized with ({settings_path(prefix)}); pass --prompt-type {recorded} or re-run "
                            f"preprocess_data.py --prompt-type {args.prompt_type}")


def _template_name(prompt_type: str) -> str:
    """One name per template (``hf`` is an alias of ``tokenizer``)."""
    return TOKENIZER_TEMPLATE_NAMES[0] if prompt_type in TOKENIZER_TEMPLATE_NAMES else prompt_type
