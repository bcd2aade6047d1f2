"""Tokenizers: PretrainedFromHF over a tokenizer trained by tools/train_tokenizer.py, SentencePiece, GPT-2 BPE
files, null; the package's modules import one another without cycles."""
import argparse
import ast
import io
import json
import os
from pathlib import Path

import pytest

from mindspeed_llm.tokenizer import (GPT2BPETokenizer, NullTokenizer, PretrainedFromHF, SentencePieceTokenizer,
                                     build_tokenizer)
from tools import train_tokenizer

WORDS = "the quick brown fox jumps over a lazy dog while models train on tokens and data".split()


def corpus_lines(n: int = 400):
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(10)) for i in range(n)]


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tok")
    (root / "a.txt").write_text("\n".join(corpus_lines()) + "\n")
    (root / "b.jsonl").write_text('{"text": "hello world"}\n{"conversations": [{"from": "human", "value": "hi"}]}\n')
    out = root / "out"
    assert train_tokenizer.main(["--input", str(root / "a.txt"), str(root / "*.jsonl"),
                                 "--vocab-size", "320", "--output-dir", str(out)]) == 0
    return str(out)


@pytest.fixture(scope="module")
def sp_model(tmp_path_factory):
    import sentencepiece
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(sentence_iterator=iter(corpus_lines()), model_writer=model,
                                             vocab_size=60, model_type="bpe", pad_id=3)
    path = tmp_path_factory.mktemp("sp") / "tok.model"
    path.write_bytes(model.getvalue())
    return str(path)


def test_train_tokenizer_writes_transformers_directory(hf_dir):
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        assert os.path.isfile(os.path.join(hf_dir, name))
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(hf_dir)
    assert tok.eos_token == "<|endoftext|>" and tok.pad_token == "<|pad|>"
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|pad|>", "<|im_start|>", "<|im_end|>"]) == [0, 1, 2, 3]
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_pretrained_from_hf(hf_dir):
    tok = build_tokenizer(argparse.Namespace(tokenizer_type="PretrainedFromHF", tokenizer_name_or_path=hf_dir))
    assert isinstance(tok, PretrainedFromHF)
    from transformers import AutoTokenizer
    ref = AutoTokenizer.from_pretrained(hf_dir)
    assert tok.vocab_size == len(ref) and tok.eod == ref.eos_token_id == 0 and tok.pad == 1
    text = "the lazy fox  jumps\nover <|im_end|> dog"
    assert tok.tokenize(text) == ref.encode(text, add_special_tokens=False)
    assert tok.detokenize(tok.tokenize(text)) == text
    assert tok.add_bos is False and tok.has_chat_template
    assert tok.apply_chat_template([{"role": "user", "content": "x"}]) == "<|im_start|>user\nx<|im_end|>\n"


def test_pad_falls_back_to_eod(hf_dir, tmp_path):
    from transformers import AutoTokenizer
    ref = AutoTokenizer.from_pretrained(hf_dir)
    ref.pad_token = None
    ref.save_pretrained(tmp_path)
    tok = PretrainedFromHF(str(tmp_path))
    assert tok.pad == tok.eod == 0


def test_sentencepiece(sp_model):
    import sentencepiece
    ref = sentencepiece.SentencePieceProcessor(model_file=sp_model)
    tok = build_tokenizer(argparse.Namespace(tokenizer_type="SentencePieceTokenizer", tokenizer_model=sp_model))
    assert isinstance(tok, SentencePieceTokenizer)
    assert tok.vocab_size == 60 and tok.eod == ref.eos_id() and tok.bos == ref.bos_id() and tok.pad == 3
    assert tok.tokenize("the quick dog") == ref.encode("the quick dog")
    assert tok.detokenize(tok.tokenize("the quick dog")) == "the quick dog"
    assert not tok.has_chat_template


def test_null_tokenizer_unchanged():
    tok = build_tokenizer(argparse.Namespace(tokenizer_type="NullTokenizer", vocab_size=10))
    assert isinstance(tok, NullTokenizer)
    assert (tok.eod, tok.pad, tok.vocab_size) == (9, 9, 10)
    assert (tok.tokenize("1 2 3"), tok.detokenize([4, 5])) == ([1, 2, 3], "4 5")
    assert isinstance(build_tokenizer(argparse.Namespace(tokenizer_type=None, vocab_size=5)), NullTokenizer)


@pytest.mark.parametrize("namespace, match", [
    (dict(tokenizer_type="PretrainedFromHF", tokenizer_name_or_path="/no/such/dir"), "no such directory"),
    (dict(tokenizer_type="PretrainedFromHF", tokenizer_name_or_path=None), "needs --tokenizer-name-or-path"),
    (dict(tokenizer_type="SentencePieceTokenizer", tokenizer_model="/no/such.model"), "no such file"),
    (dict(tokenizer_type="SentencePieceTokenizer", tokenizer_model=None), "needs --tokenizer-model"),
    (dict(tokenizer_type="NullTokenizer", vocab_size=None), "--vocab-size"),
])
def test_clear_errors(namespace, match):
    with pytest.raises((FileNotFoundError, ValueError), match=match):
        build_tokenizer(argparse.Namespace(**namespace))


def test_train_tokenizer_errors(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        train_tokenizer.main(["--input", str(tmp_path / "missing"), "--output-dir", str(tmp_path / "o")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().startswith("error: --input")


@pytest.mark.parametrize("name, content", [("blank.txt", "\n  \n\n"), ("records.jsonl", '{"other": "text"}\n')])
def test_train_tokenizer_refuses_an_input_without_text(tmp_path, capsys, name: str, content: str) -> None:
    """An empty corpus is an error naming the file, not a tokenizer of the 256 bytes alone."""
    (tmp_path / name).write_text(content)
    with pytest.raises(SystemExit) as exit_info:
        train_tokenizer.main(["--input", str(tmp_path / name), "--output-dir", str(tmp_path / "o"),
                              "--vocab-size", "300"])
    assert exit_info.value.code == 2
    assert f"error: no text in {tmp_path / name}" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------------------- GPT-2 BPE files

def _byte_symbols():
    """GPT-2's printable stand-ins for the 256 bytes (its published byte-to-unicode table)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    extra = iter(range(256, 512))
    return {b: chr(b) if b in printable else chr(next(extra)) for b in range(256)}


@pytest.fixture(scope="module")
def gpt2_files(tmp_path_factory):
    """vocab.json (bytes, two merges, <|endoftext|>) and merges.txt in GPT-2's format."""
    root = tmp_path_factory.mktemp("gpt2")
    vocab = {symbol: i for i, symbol in enumerate(_byte_symbols().values())}
    for token in ("he", "hel", "<|endoftext|>"):
        vocab[token] = len(vocab)
    (root / "vocab.json").write_text(json.dumps(vocab))
    (root / "merges.txt").write_text("#version: 0.2\nh e\nhe l\n")
    return str(root / "vocab.json"), str(root / "merges.txt")


def test_gpt2_bpe_from_vocab_and_merges(gpt2_files):
    vocab_file, merge_file = gpt2_files
    tok = build_tokenizer(argparse.Namespace(tokenizer_type="GPT2BPETokenizer", vocab_file=vocab_file,
                                             merge_file=merge_file))
    assert isinstance(tok, GPT2BPETokenizer)
    vocab = json.loads(Path(vocab_file).read_text())
    ids = tok.tokenize("hello world")
    space = _byte_symbols()[ord(" ")]
    assert ids == [vocab[t] for t in ["hel", "l", "o", space, "w", "o", "r", "l", "d"]]  # both merges applied
    assert tok.detokenize(ids) == "hello world"
    assert tok.tokenize("é") == [vocab[_byte_symbols()[b]] for b in "é".encode()]  # bytes, never unknown
    assert tok.vocab_size == len(vocab) and tok.eod == tok.pad == vocab["<|endoftext|>"]
    assert not tok.add_bos and not tok.has_chat_template


def test_gpt2_bpe_errors(gpt2_files, tmp_path):
    vocab_file, merge_file = gpt2_files
    with pytest.raises(FileNotFoundError, match="^--merge-file .*: no such file"):
        GPT2BPETokenizer(vocab_file, str(tmp_path / "none.txt"))
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not a GPT-2 BPE vocabulary and merge list"):
        GPT2BPETokenizer(str(bad), merge_file)


def test_tokenizer_modules_import_without_cycles():
    """No module of mindspeed_llm/tokenizer imports (even inside a function) one that imports it back."""
    package = Path(__file__).resolve().parents[2] / "mindspeed_llm" / "tokenizer"
    imports = {}
    for path in package.glob("*.py"):
        if path.name == "__init__.py":
            continue
        names = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("mindspeed_llm.tokenizer."):
                names.add(node.module.rsplit(".", 1)[1])
        imports[path.stem] = names

    def reaches(start, target, seen=()):
        return any(name == target or (name not in seen and reaches(name, target, seen + (name,)))
                   for name in imports.get(start, ()))

    assert imports["tokenizer"] >= {"null_tokenizer", "hf_tokenizer"}  # the scan sees the imports
    assert [name for name in imports if reaches(name, name)] == []
