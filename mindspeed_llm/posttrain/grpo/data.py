"""GRPO's prompts: the instruction records ``preprocess_data.py`` writes, each split into a prompt and its reply.

``--data-path PREFIX --is-instruction-dataset`` names the files of an instruction handler written without
``--pack`` (one record per stored sequence; ``core/datasets/sft_dataset.py``). A record's prompt is its tokens
before the first labelled one (the template's system, user turn and assistant prefix: what the policy
continues); its labelled tokens are the reference reply, which reward functions receive decoded as the
``answer`` column (GSM8K's ``... #### 42`` when the reply field holds GSM8K's answer, e.g.
``--map-keys '{"prompt": "question", "response": "answer"}'``).

Samples follow the fine-tuning datasets' order (a permutation per epoch from ``--seed``); sample ``i``'s
position in that order also seeds its generations, so rollouts do not depend on the parallel layout.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import numpy as np
from torch.utils.data import Dataset

from core.datasets.sft_dataset import IGNORE_INDEX, SFTPackedDataset, packed_prefix


@dataclass(frozen=True)
class PromptSample:
    """One prompt of the run: its position in the sample order, its token ids and its reference reply's."""

    index: int
    prompt: List[int]
    reference: List[int]


def split_record(ids: np.ndarray, labels: np.ndarray) -> tuple:
    """(prompt ids, reference ids) of a record: the tokens before the first labelled one, and the labelled ones."""
    trained = np.flatnonzero(labels != IGNORE_INDEX)  # [k] positions of the reply's tokens
    start = int(trained[0]) if len(trained) else len(ids)
    return [int(t) for t in ids[:start]], [int(t) for t in ids[trained]]


class PromptDataset(Dataset):
    """Prompts (and reference replies) of the stored instruction records, ``num_samples`` of them in epochs."""

    def __init__(self, prefix: str, num_samples: Optional[int], seed: int,
                 sequence_ids: Optional[Sequence[int]] = None) -> None:
        self.records = SFTPackedDataset(prefix, 1, num_samples, seed, sequence_ids=sequence_ids)
        self.prefix = prefix

    def __len__(self) -> int:
        return len(self.records)

    def record(self, sequence: int) -> tuple:
        """(prompt ids, reference ids) of stored sequence ``sequence``; a packed sequence is refused."""
        files = self.records.files
        if int(np.max(files["attention_mask"][sequence], initial=0)) > 1:
            raise ValueError(f"{packed_prefix(self.prefix, 'attention_mask')}: sequence {sequence} packs several "
                             "records; GRPO reads one record per sequence: re-run preprocess_data.py without --pack")
        return split_record(np.asarray(files["input_ids"][sequence]), np.asarray(files["labels"][sequence]))

    def __getitem__(self, idx: int) -> PromptSample:
        if not 0 <= idx < len(self):
            raise IndexError(f"sample {idx} out of range [0, {len(self)})")
        prompt, reference = self.record(int(self.records.order[idx]))
        return PromptSample(idx, prompt, reference)

    def longest_prompt(self) -> tuple:
        """(length, stored sequence) of the longest prompt among the sequences drawn from."""
        longest = (0, -1)
        for sequence in self.records.sequence_ids:
            longest = max(longest, (len(self.record(int(sequence))[0]), int(sequence)))
        return longest
