"""Generate text from a checkpoint of ours (MindSpeed-LLM's ``inference.py``).

    python inference.py --task greedy --load ckpt/ --use-checkpoint-args \
        --tokenizer-type PretrainedFromHF --tokenizer-name-or-path TOKENIZER \
        --prompt "The capital of France is" --max-new-tokens 32 [--output-file out.jsonl]
    torchrun --nproc-per-node 2 inference.py ... --tensor-model-parallel-size 2   # a TP 2 checkpoint

``--task greedy`` (argmax), ``do_sample`` (``--temperature``, ``--top-k``, ``--top-p``, seeded by ``--seed``),
``beam_search`` (``--num-beams``, Hugging Face's rules; a response is printed once complete), ``chat`` (an
interactive loop: one user turn per stdin line, read by rank 0, ``--history-turns`` earlier turns kept, the
tokenizer's chat template or ``--prompt-type``; ``exit`` or end of input stops it).
``--repetition-penalty`` applies to every task. Prompts come from ``--prompt`` (repeatable) and
``--prompt-file`` (jsonl, a ``prompt`` field per line), are generated in batches of ``--micro-batch-size``
(default 8), wrapped in a chat template with ``--hf-chat-template`` or ``--prompt-type NAME``. The first
batch's first response is streamed to stdout as it is generated; every response is printed, and with
``--output-file`` written as jsonl (``prompt``, ``response``, ``token_ids``: the generated ids). A response ends at the tokenizer's EOS,
at ``--stop-strings`` (and at a named template's end-of-turn text), or after ``--max-new-tokens``.
Runs at any TP and PP (CP 1, no virtual stages), on one process on the CPU too. Rank 0 prints and writes.
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Callable, List, Optional, Sequence, Tuple

import torch.distributed as dist

from core.checkpointing import CheckpointError
from mindspeed_llm.arguments import ArgumentError
from mindspeed_llm.data.templates import ChatEncoder, Turn, end_of_turn_text
from mindspeed_llm.inference.beam_search import BeamConfig, beam_search
from mindspeed_llm.inference.engine import Generation, GenerationConfig, check_prompts, generate
from mindspeed_llm.inference.loading import InferenceSetup, setup_inference
from mindspeed_llm.inference.sampling import SamplingConfig


def is_rank_0() -> bool:
    return not dist.is_initialized() or dist.get_rank() == 0


def emit(text: str, end: str = "\n") -> None:
    if is_rank_0():
        print(text, end=end, flush=True)


def read_prompts(args: argparse.Namespace) -> List[str]:
    """``--prompt`` texts, then ``--prompt-file``'s ``prompt`` fields (one-line errors on a bad file)."""
    prompts = list(args.prompt)
    if args.prompt_file:
        try:
            with open(args.prompt_file, encoding="utf-8") as handle:
                lines = [line for line in handle if line.strip()]
        except OSError as error:
            raise ValueError(f"--prompt-file {args.prompt_file}: {error.strerror}") from None
        for number, line in enumerate(lines, 1):
            try:
                prompts.append(str(json.loads(line)["prompt"]))
            except (json.JSONDecodeError, KeyError, TypeError):
                raise ValueError(f"--prompt-file {args.prompt_file} line {number}: expected a JSON object with a "
                                 "'prompt' field") from None
    return prompts


def chat_encoder(args: argparse.Namespace, tokenizer) -> Optional[ChatEncoder]:
    """The template prompts are wrapped in: ``--hf-chat-template``, ``--prompt-type``, or for ``chat`` the
    tokenizer's own template when it has one (else ``empty``); None: plain text."""
    if args.hf_chat_template:
        return ChatEncoder(tokenizer, "hf")
    if args.prompt_type:
        return ChatEncoder(tokenizer, args.prompt_type)
    if args.task == "chat":
        return ChatEncoder(tokenizer, "hf" if getattr(tokenizer, "has_chat_template", False) else "empty")
    return None


def end_of_turn_strings(args: argparse.Namespace) -> Tuple[str, ...]:
    """``--stop-strings`` plus a named template's end-of-turn text (``<|im_end|>``, ``<|eot_id|>``)."""
    tail = end_of_turn_text(args.prompt_type)
    return tuple(args.stop_strings) + ((tail,) if tail else ())


class Session:
    """One loaded model, tokenizer and decoding settings; turns texts into responses."""

    def __init__(self, setup: InferenceSetup) -> None:
        args, tokenizer = setup.args, setup.tokenizer
        self.args, self.model, self.tokenizer = args, setup.model, tokenizer
        self.encoder = chat_encoder(args, tokenizer)
        self.stops = end_of_turn_strings(args)
        sampling = SamplingConfig(do_sample=args.task == "do_sample", temperature=args.temperature,
                                  top_k=args.top_k, top_p=args.top_p,
                                  repetition_penalty=args.repetition_penalty)
        self.config = GenerationConfig(max_new_tokens=args.max_new_tokens, sampling=sampling,
                                       eos_token_ids=self._eos_ids(), stop_strings=self.stops,
                                       pad_token_id=self._pad_id(), seed=args.seed)

    def _eos_ids(self) -> Tuple[int, ...]:
        try:
            return (int(self.tokenizer.eod),)
        except (ValueError, AttributeError, TypeError):
            return ()

    def _pad_id(self) -> int:
        try:
            return int(self.tokenizer.pad)
        except (ValueError, AttributeError, TypeError):
            return 0

    def encode(self, text: str, history: Sequence[Turn] = ()) -> List[int]:
        if self.encoder is not None:
            return self.encoder.encode_prompt(None, history, text)
        ids = self.tokenizer.tokenize(text)
        bos = getattr(self.tokenizer, "bos", None)
        return ([bos] if getattr(self.tokenizer, "add_bos", False) and bos is not None else []) + ids

    def response_text(self, ids: Sequence[int]) -> str:
        """The decoded response, without the EOS token and cut at the first stop string."""
        eos = set(self.config.eos_token_ids)
        text = self.tokenizer.detokenize([i for i in ids if i not in eos])
        cuts = [text.index(s) for s in self.stops if s in text]
        return text[:min(cuts)] if cuts else text

    def generate(self, prompts: List[List[int]], stream: bool) -> Generation:
        if self.args.task == "beam_search":  # the best beam is known at the end only
            result = beam_search(self.model, prompts, self.config, BeamConfig(self.args.num_beams))
            if stream:
                emit(self.response_text(result.token_ids[0]))
            return result
        on_tokens = self._streamer() if stream else None
        result = generate(self.model, prompts, self.config, decode=self.tokenizer.detokenize, on_tokens=on_tokens)
        if stream:
            emit("")
        return result

    def _streamer(self) -> Callable[[List[int], List[bool]], None]:
        """Prints the first row's new text after every step."""
        generated: List[int] = []
        printed = [0]

        def on_tokens(tokens: List[int], active: List[bool]) -> None:
            if not active[0]:
                return
            generated.append(tokens[0])
            text = self.response_text(generated)
            if not text.endswith("\ufffd"):  # wait for the rest of a multi-byte character
                emit(text[printed[0]:], end="")
                printed[0] = len(text)
        return on_tokens


def run_prompts(session: Session, texts: List[str]) -> None:
    """Generate for every prompt text in batches; print, and write ``--output-file``."""
    args = session.args
    if not texts:
        raise ValueError(f"--task {args.task} needs --prompt TEXT or --prompt-file FILE")
    encoded = [session.encode(text) for text in texts]
    check_prompts(encoded, session.model.config.max_position_embeddings)  # every prompt before any work
    records = []
    batch = args.micro_batch_size
    for start in range(0, len(texts), batch):
        chunk = texts[start:start + batch]
        if start == 0:
            emit(f"[prompt 0] {chunk[0]}\n[response 0] ", end="")
        result = session.generate(encoded[start:start + batch], stream=start == 0)
        for offset, (text, ids) in enumerate(zip(chunk, result.token_ids)):
            response = session.response_text(ids)
            if start + offset > 0:
                emit(f"[prompt {start + offset}] {text}\n[response {start + offset}] {response}")
            records.append({"prompt": text, "response": response, "token_ids": ids})
    if args.output_file and is_rank_0():
        with open(args.output_file, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        emit(f"wrote {len(records)} responses to {args.output_file}")


def read_line_on_rank_0() -> str:
    """A line of stdin read by rank 0 and shared with every rank ('' at end of input)."""
    line = [sys.stdin.readline() if is_rank_0() else ""]
    if dist.is_initialized():
        dist.broadcast_object_list(line, src=0)
    return line[0]


def run_chat(session: Session) -> None:
    """One user turn per stdin line; the response is streamed; ``exit``/``quit`` or end of input stops."""
    history: List[Turn] = []
    keep = session.args.history_turns
    while True:
        emit("User: ", end="")
        line = read_line_on_rank_0()
        if not line or line.strip() in ("exit", "quit"):
            emit("")
            return
        query = line.rstrip("\n")
        recent = history[-keep:] if keep > 0 else []
        emit("Assistant: ", end="")
        result = session.generate([session.encode(query, recent)], stream=True)
        history.append((query, session.response_text(result.token_ids[0])))


def check_task(args: argparse.Namespace) -> None:
    """inference.py's own rules, before the model is built."""
    if args.task not in ("greedy", "do_sample", "chat", "beam_search"):
        raise ValueError(f"inference.py needs --task greedy|do_sample|beam_search|chat, got {args.task}")
    if args.task != "chat":
        read_prompts(args)  # a bad --prompt-file fails now


def main(argv: Optional[Sequence[str]] = None) -> int:
    try:
        setup = setup_inference(argv, check_task)
        args = setup.args
        session = Session(setup)
        if args.task == "chat":
            run_chat(session)
        else:
            run_prompts(session, read_prompts(args))
    except (ValueError, ArgumentError, CheckpointError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
