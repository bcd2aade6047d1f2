"""Named prompt templates (``--prompt-type``) that turn conversations into token ids with label masks.

A conversation is an optional system text plus (user, assistant) turns. Each
turn is encoded as two segments, tokenized separately:

- prompt: ``prefix`` + ``system_format`` (first turn only, when a system text is
  given or the template has a default; inside the user text for llama2) +
  ``separator`` (later turns only) + ``user_format``;
- response: ``assistant_format``.

Formats are ``str.format`` strings over ``{content}``; ``{bos}`` and ``{eos}``
are replaced by the tokenizer's BOS (dropped when it has none) and EOD *ids*,
so they do not depend on how a tokenizer spells them. The prompt's ids are
masked (-100, ``IGNORE_INDEX``) in the labels; the response's ids are trained.

``--prompt-type tokenizer`` (alias ``hf``) uses the Hugging Face tokenizer's
own Jinja chat template: turn k's prompt is what the template adds between the
rendering of turns < k and that of turns < k plus the user message with
``add_generation_prompt=True`` (so turn 0's prompt includes the system message);
its response is what the assistant message adds.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

IGNORE_INDEX = -100

Turn = Tuple[str, str]  # (user text, assistant text)


@dataclass(frozen=True)
class Template:
    name: str
    user_format: str = "{content}"
    assistant_format: str = "{content}{eos}"
    system_format: str = "{content}"
    separator: str = ""
    prefix: str = ""
    default_system: str = ""
    system_inside_user: bool = False  # llama2: the system block opens the first [INST]


TEMPLATES: Dict[str, Template] = {t.name: t for t in (
    Template(name="empty"),
    Template(
        name="alpaca",
        user_format="### Instruction:\n{content}\n\n### Response:\n",
        system_format="{content}\n\n",
        separator="\n\n",
        default_system="Below is an instruction that describes a task. "
                       "Write a response that appropriately completes the request.",
    ),
    Template(
        name="chatml",
        user_format="<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n",
        assistant_format="{content}<|im_end|>\n",
        system_format="<|im_start|>system\n{content}<|im_end|>\n",
    ),
    Template(
        name="qwen",
        user_format="<|im_start|>user\n{content}<|im_end|>\n<|im_start|>assistant\n",
        assistant_format="{content}<|im_end|>\n",
        system_format="<|im_start|>system\n{content}<|im_end|>\n",
        default_system="You are a helpful assistant.",
    ),
    Template(
        name="llama2",
        user_format="{bos}[INST] {content} [/INST]",
        assistant_format=" {content} {eos}",
        system_format="<<SYS>>\n{content}\n<</SYS>>\n\n",
        system_inside_user=True,
    ),
    Template(
        name="llama3",
        prefix="{bos}",
        user_format="<|start_header_id|>user<|end_header_id|>\n\n{content}<|eot_id|>"
                    "<|start_header_id|>assistant<|end_header_id|>\n\n",
        assistant_format="{content}<|eot_id|>",
        system_format="<|start_header_id|>system<|end_header_id|>\n\n{content}<|eot_id|>",
    ),
)}
TOKENIZER_TEMPLATE_NAMES = ("tokenizer", "hf")
PROMPT_TYPES = tuple(TEMPLATES) + TOKENIZER_TEMPLATE_NAMES

_MARKER = re.compile(r"(\{bos\}|\{eos\})")


def end_of_turn_text(prompt_type: Optional[str]) -> Optional[str]:
    """The text a named template closes an assistant turn with (``<|im_end|>``, ``<|eot_id|>``), if any."""
    template = TEMPLATES.get(prompt_type or "")
    if template is None:
        return None
    return template.assistant_format.split("{content}", 1)[1].replace("{eos}", "").strip() or None


def encode_format(tokenizer, pieces: Sequence[Tuple[str, str]]) -> List[int]:
    """Token ids of the concatenated ``(format, content)`` pieces.

    Each format has ``{content}`` filled in; ``{bos}``/``{eos}`` in a format
    (never in the content) become ids. The text between markers is tokenized
    as one string.
    """
    ids: List[int] = []
    text = ""
    for fmt, content in pieces:
        for part in _MARKER.split(fmt):
            if part in ("{bos}", "{eos}"):
                ids += tokenizer.tokenize(text) if text else []
                text = ""
                special = tokenizer.bos if part == "{bos}" else tokenizer.eod
                ids += [special] if special is not None else []
            else:
                text += part.replace("{content}", content)
    return ids + (tokenizer.tokenize(text) if text else [])


class ChatEncoder:
    """Encodes (system, turns) with a named template or the tokenizer's own chat template."""

    def __init__(self, tokenizer, prompt_type: str) -> None:
        if prompt_type in TOKENIZER_TEMPLATE_NAMES:
            if not getattr(tokenizer, "has_chat_template", False):
                raise ValueError(f"--prompt-type {prompt_type} needs a tokenizer with a chat template "
                                 "(PretrainedFromHF whose tokenizer_config has chat_template); "
                                 f"otherwise choose one of {', '.join(TEMPLATES)}")
            self.template: Optional[Template] = None
        elif prompt_type in TEMPLATES:
            self.template = TEMPLATES[prompt_type]
        else:
            raise ValueError(f"--prompt-type {prompt_type}: unknown; choose one of {', '.join(PROMPT_TYPES)}")
        self.tokenizer = tokenizer

    def encode_turns(self, system: Optional[str], turns: Sequence[Turn]) -> List[Tuple[List[int], List[int]]]:
        """Per turn, (prompt ids, response ids)."""
        if self.template is None:
            return self._encode_with_chat_template(system, turns)
        return [self._encode_turn(index, system, user, assistant)
                for index, (user, assistant) in enumerate(turns)]

    def encode_prompt(self, system: Optional[str], history: Sequence[Turn], query: str) -> List[int]:
        """Ids of a conversation ending with the user's ``query`` (the generation prompt)."""
        pairs = self.encode_turns(system, list(history) + [(query, "")])
        ids = [i for prompt, response in pairs[:-1] for i in prompt + response]
        return ids + pairs[-1][0]

    def encode_response(self, system: Optional[str], history: Sequence[Turn], query: str,
                        response: str) -> List[int]:
        """Ids of ``response`` as the reply to ``query`` after ``history``."""
        return self.encode_turns(system, list(history) + [(query, response)])[-1][1]

    def _encode_turn(self, index: int, system: Optional[str], user: str,
                     assistant: str) -> Tuple[List[int], List[int]]:
        t = self.template
        assert t is not None
        system_text = (system if system else t.default_system) if index == 0 else ""
        if system_text and t.system_inside_user:
            user, system_text = t.system_format.replace("{content}", system_text) + user, ""
        pieces = [(t.separator, "")] if index > 0 else [(t.prefix, "")]
        if system_text:
            pieces.append((t.system_format, system_text))
        prompt = encode_format(self.tokenizer, pieces + [(t.user_format, user)])
        return prompt, encode_format(self.tokenizer, [(t.assistant_format, assistant)])

    def _encode_with_chat_template(self, system: Optional[str],
                                   turns: Sequence[Turn]) -> List[Tuple[List[int], List[int]]]:
        messages: List[Dict[str, str]] = [{"role": "system", "content": system}] if system else []
        rendered = ""  # the text already encoded; the system message goes into turn 0's prompt
        pairs = []
        for user, assistant in turns:
            messages.append({"role": "user", "content": user})
            with_prompt = self.tokenizer.apply_chat_template(messages, add_generation_prompt=True)
            messages.append({"role": "assistant", "content": assistant})
            with_reply = self.tokenizer.apply_chat_template(messages)
            if not (with_prompt.startswith(rendered) and with_reply.startswith(with_prompt)):
                raise ValueError("the tokenizer's chat template does not render conversations "
                                 "incrementally; choose a named --prompt-type")
            prompt_text, reply_text = with_prompt[len(rendered):], with_reply[len(with_prompt):]
            pairs.append((self.tokenizer.tokenize(prompt_text), self.tokenizer.tokenize(reply_text)))
            rendered = with_reply
        return pairs

