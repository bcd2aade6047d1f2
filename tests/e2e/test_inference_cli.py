"""``inference.py`` as a user runs it: a tiny Llama with a trained tokenizer, converted from HF, greedy
generation from ``--prompt`` flags and a ``--prompt-file`` into ``--output-file`` (one subprocess); the
token ids equal ``transformers`` ``generate``'s. In-process: ``chat`` over a scripted stdin, and the
one-line refusals (``--top-p`` outside (0, 1], a prompt longer than the context, an unknown task); beam
search equals ``transformers``' with the same beams.

    python -m pytest tests/e2e/test_inference_cli.py -q
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import List

import pytest
import torch
import transformers

import inference
from tests.models.test_hf_parity import convert
from tests.unit.test_tokenizers import corpus_lines
from tools import train_tokenizer

REPO = Path(__file__).resolve().parents[2]
PROMPTS = ["the quick brown", "a lazy dog while models", "fox"]
NEW_TOKENS = 6


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(tokenizer dir, HF model, converted checkpoint dir) of a tiny random Llama."""
    root = tmp_path_factory.mktemp("inference")
    (root / "corpus.txt").write_text("\n".join(corpus_lines()) + "\n")
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        assert train_tokenizer.main(["--input", str(root / "corpus.txt"), "--vocab-size", "320",
                                     "--output-dir", str(root / "tok")]) == 0
        vocab = len(transformers.AutoTokenizer.from_pretrained(str(root / "tok")))
        config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                          num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                                          max_position_embeddings=64, dtype="float32")
        torch.manual_seed(0)
        model = transformers.LlamaForCausalLM(config).eval()
        with torch.no_grad():
            for param in model.parameters():
                param.add_(torch.randn_like(param) * 0.05)
        model.save_pretrained(str(root / "hf"))
        convert(str(root / "hf"), str(root / "mg"), "llama2", 1)
    return str(root / "tok"), model, str(root / "mg")


def _flags(tok: str, mg: str) -> List[str]:
    return ["--load", mg, "--use-checkpoint-args", "--tokenizer-type", "PretrainedFromHF",
            "--tokenizer-name-or-path", tok, "--max-new-tokens", str(NEW_TOKENS)]


def _hf_continuation(model, tokenizer, text: str) -> List[int]:
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if tokenizer.bos_token_id is not None and tokenizer("a")["input_ids"][0] == tokenizer.bos_token_id:
        ids = [tokenizer.bos_token_id] + ids
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=0)
    return out[0, len(ids):].tolist()


def test_greedy_prompts_to_output_file(tiny, tmp_path) -> None:
    tok, model, mg = tiny
    prompt_file, output = tmp_path / "prompts.jsonl", tmp_path / "out.jsonl"
    prompt_file.write_text(json.dumps({"prompt": PROMPTS[2]}) + "\n")
    command = [sys.executable, "inference.py", "--task", "greedy", *_flags(tok, mg), "--prompt", PROMPTS[0],
               "--prompt", PROMPTS[1], "--prompt-file", str(prompt_file), "--output-file", str(output)]
    run = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    records = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["prompt"] for r in records] == PROMPTS
    tokenizer = transformers.AutoTokenizer.from_pretrained(tok)
    for record in records:
        assert record["token_ids"] == _hf_continuation(model, tokenizer, record["prompt"])
    assert run.stdout.startswith(f"[prompt 0] {PROMPTS[0]}\n[response 0] {records[0]['response']}")
    assert f"[response 2] {records[2]['response']}" in run.stdout


def test_beam_search_task(tiny, tmp_path, capsys) -> None:
    tok, model, mg = tiny
    output = tmp_path / "beams.jsonl"
    assert inference.main(["--task", "beam_search", "--num-beams", "3", *_flags(tok, mg), "--prompt", PROMPTS[1],
                           "--output-file", str(output)]) == 0
    record = json.loads(output.read_text())
    tokenizer = transformers.AutoTokenizer.from_pretrained(tok)
    ids = tokenizer(PROMPTS[1], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=NEW_TOKENS, num_beams=3, do_sample=False,
                             eos_token_id=tokenizer.eos_token_id, pad_token_id=0)
    assert record["token_ids"] == out[0, len(ids):].tolist()
    assert record["response"] in capsys.readouterr().out


@pytest.mark.parametrize("flags, prompt_type", [(["--prompt-type", "chatml"], "chatml"),
                                                 (["--hf-chat-template"], "hf")])
def test_chat_templates_wrap_the_prompt(tiny, tmp_path, flags, prompt_type) -> None:
    """A named template or the tokenizer's own: the model continues the template's encoding of the prompt."""
    from mindspeed_llm.data.templates import ChatEncoder
    from mindspeed_llm.tokenizer import PretrainedFromHF
    tok, model, mg = tiny
    output = tmp_path / "templated.jsonl"
    assert inference.main(["--task", "greedy", *flags, *_flags(tok, mg), "--prompt", PROMPTS[0],
                           "--output-file", str(output)]) == 0
    record = json.loads(output.read_text())
    ids = ChatEncoder(PretrainedFromHF(tok), prompt_type).encode_prompt(None, [], PROMPTS[0])
    assert len(ids) > len(PROMPTS[0].split()) + 2  # the template's tokens are there
    eos = transformers.AutoTokenizer.from_pretrained(tok).eos_token_id
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                             eos_token_id=eos, pad_token_id=0)
    assert record["token_ids"] == out[0, len(ids):].tolist()


def test_chat_reads_turns_from_stdin(tiny, monkeypatch, capsys) -> None:
    tok, _, mg = tiny
    monkeypatch.setattr(sys, "stdin", io.StringIO("the quick\nbrown fox\nexit\n"))
    assert inference.main(["--task", "chat", *_flags(tok, mg), "--history-turns", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("User: ") == 3 and out.count("Assistant: ") == 2


@pytest.mark.parametrize("extra, message, parser_exit", [
    (["--task", "do_sample", "--top-p", "1.5", "--prompt", "x"], "error: --top-p 1.5 is outside (0, 1]", True),
    (["--task", "sample", "--prompt", "x"], "error: --task sample is not one of greedy, do_sample", True),
    (["--task", "greedy", "--prompt", "the " * 80], "error: prompt 0 has", False),
    (["--task", "greedy"], "error: --task greedy needs --prompt TEXT or --prompt-file FILE", False),
    (["--task", "greedy", "--prompt-type", "alpaca", "--prompt", "x"], "error: prompt 0 has", False),  # its system text
    (["--task", "greedy", "--lora-target-modules", "linear_qkv", "--prompt", "x"],  # a training entry's flag
     "error: unrecognized arguments: --lora-target-modules linear_qkv (--lora-target-modules is a flag of "
     "pretrain_gpt.py, posttrain.py)", True),
    (["--task", "greedy", "--lr", "0.1", "--dpo-beta", "0.2", "--prompt", "x"],
     "error: unrecognized arguments: --dpo-beta 0.2 (--dpo-beta is a flag of posttrain.py --stage dpo)", True),
])
def test_bad_input_one_line(tiny, capsys, extra, message, parser_exit) -> None:
    tok, _, mg = tiny
    with pytest.raises(SystemExit) if parser_exit else contextlib.nullcontext():  # the parser exits with 2
        assert inference.main([*_flags(tok, mg), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message), err
