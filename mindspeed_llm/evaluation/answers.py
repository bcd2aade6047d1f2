"""Answers out of generated text: GSM8K numbers and BBH targets, and their comparison with references."""
from __future__ import annotations

import re
from typing import Optional

NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")
HASHES = re.compile(r"####\s*(-?[\d,]*\.?\d+)")
THE_ANSWER_IS = re.compile(r"[Tt]he (?:final )?answer is[:\s]*\$?\s*(-?[\d,]*\.?\d+)")


def boxed_content(text: str) -> Optional[str]:
    """The content of the last ``\\boxed{...}`` (braces nested)."""
    start = text.rfind("\\boxed{")
    if start < 0:
        return None
    depth, begin = 0, start + len("\\boxed{")
    for position in range(begin, len(text)):
        if text[position] == "{":
            depth += 1
        elif text[position] == "}":
            if depth == 0:
                return text[begin:position]
            depth -= 1
    return None


def normalize_number(text: str) -> Optional[str]:
    """``"1,234.50"`` -> ``"1234.5"``; None when ``text`` holds no number."""
    match = NUMBER.search(text.replace("$", ""))
    if match is None:
        return None
    value = match.group(0).replace(",", "")
    try:
        number = float(value)
    except ValueError:
        return None
    return str(int(number)) if number == int(number) else repr(number)


def gsm8k_reference(answer: str) -> str:
    """The number after GSM8K's ``####``."""
    return normalize_number(answer.split("####")[-1]) or answer.split("####")[-1].strip()


def extract_gsm8k_answer(text: str) -> Optional[str]:
    """The model's number: after ``####``, else in the last ``\\boxed{}``, else after "the answer is",
    else the last number in the text."""
    hashes = HASHES.search(text)
    if hashes:
        return normalize_number(hashes.group(1))
    boxed = boxed_content(text)
    if boxed is not None and normalize_number(boxed) is not None:
        return normalize_number(boxed)
    stated = THE_ANSWER_IS.findall(text)
    if stated:
        return normalize_number(stated[-1])
    numbers = NUMBER.findall(text)
    return normalize_number(numbers[-1]) if numbers else None


def normalize_target(text: str) -> str:
    """BBH targets compared loosely: stripped, without a final period and surrounding parentheses."""
    text = text.strip().rstrip(".").strip()
    if len(text) >= 2 and text[0] == "(" and text[-1] == ")":
        text = text[1:-1].strip()
    return text.lower()


def extract_bbh_answer(text: str, chain_of_thought: bool) -> str:
    """With chain of thought the words after the last "the answer is"; else the first line."""
    if chain_of_thought:
        parts = re.split(r"[Tt]he answer is", text)
        if len(parts) > 1:
            return normalize_target(parts[-1].split("\n")[0])
    lines = [line for line in text.strip().split("\n") if line.strip()]
    return normalize_target(lines[0]) if lines else ""
