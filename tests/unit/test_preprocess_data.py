"""tools/preprocess_data.py end to end: outputs read back with IndexedDataset equal the tokenizer's ids."""
import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from core.datasets.indexed_dataset import IndexedDataset
from mindspeed_llm.data import IGNORE_INDEX, build_handler
from mindspeed_llm.tokenizer import PretrainedFromHF
from tools import train_tokenizer
from tools.preprocess_data import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
WORDS = "what is two plus three five hello hi there how are you fine thanks name bot the cat".split()


def sentence(i, n=None):
    n = n or 1 + (i * 7) % 13
    return " ".join(WORDS[(i * 3 + j * 5) % len(WORDS)] for j in range(n))


@pytest.fixture(scope="module")
def tok_dir(tmp_path_factory):
    tokenizer = train_tokenizer.train_bpe(iter(sentence(i) for i in range(300)), vocab_size=300, min_frequency=1)
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer.save_for_transformers(tokenizer, str(out))
    return str(out)


@pytest.fixture(scope="module")
def tok(tok_dir):
    return PretrainedFromHF(tok_dir)


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def preprocess(tok_dir, *flags):
    return main(["--tokenizer-type", "PretrainedFromHF", "--tokenizer-name-or-path", tok_dir, *map(str, flags)])


def read(prefix):
    ds = IndexedDataset(prefix)
    return [ds[i].tolist() for i in range(len(ds))], ds


def test_pretrain_directory_of_jsonl_and_json_gz(tmp_path, tok_dir, tok, capsys):
    data = tmp_path / "data"
    data.mkdir()
    first = [{"text": sentence(i), "title": sentence(i, 2)} for i in range(5)]
    second = [{"text": sentence(i + 10), "title": sentence(i, 3)} for i in range(4)]
    write_jsonl(data / "a.jsonl", first)
    with gzip.open(data / "b.json.gz", "wt") as handle:
        json.dump(second, handle)
    prefix = tmp_path / "out" / "corpus"
    assert preprocess(tok_dir, "--input", data, "--json-keys", "text", "title", "--append-eod",
                      "--output-prefix", prefix) == 0
    assert "done: 9 documents" in capsys.readouterr().out
    for key in ("text", "title"):
        items, ds = read(f"{prefix}_{key}_document")
        assert items == [tok.tokenize(r[key]) + [tok.eod] for r in first + second]
        assert ds.dtype == np.uint16 and ds.document_indices.tolist() == list(range(10))


def test_txt_is_one_document_per_line_and_empty_lines_are_counted(tmp_path, tok_dir, tok, capsys):
    (tmp_path / "c.txt").write_text("hello there\n\nthe cat\n")
    prefix = tmp_path / "t"
    assert preprocess(tok_dir, "--input", tmp_path / "c.txt", "--output-prefix", prefix) == 0
    assert "skipped 1 (empty: 1)" in capsys.readouterr().out
    assert read(f"{prefix}_text_document")[0] == [tok.tokenize("hello there"), tok.tokenize("the cat")]


def test_workers_give_identical_bytes(tmp_path, tok_dir):
    src = write_jsonl(tmp_path / "d.jsonl", [{"instruction": sentence(i), "output": sentence(i + 1)}
                                             for i in range(1100)])
    outputs = {}
    for workers in (1, 2):
        for kind, flags in (("pre", ["--json-keys", "output", "--append-eod"]),
                            ("sft", ["--handler-name", "AlpacaStyleInstructionHandler", "--prompt-type", "alpaca",
                                     "--seq-length", "64", "--pack"])):
            prefix = tmp_path / f"{kind}{workers}"
            assert preprocess(tok_dir, "--input", src, "--workers", workers, "--output-prefix", prefix, *flags) == 0
            for name in sorted(os.listdir(tmp_path)):
                if name.startswith(f"{kind}{workers}_"):
                    outputs.setdefault((kind, name[len(kind) + 1:]), []).append((tmp_path / name).read_bytes())
    assert len(outputs) == 2 + 6 + 1  # .bin/.idx per file, and the instruction set's settings record
    for key, (one, two) in outputs.items():
        assert one == two, key


def test_alpaca_packed(tmp_path, tok_dir, tok, capsys):
    records = [{"instruction": sentence(i), "input": "", "output": sentence(i + 2)} for i in range(40)]
    records.append({"instruction": sentence(1, 40), "output": sentence(2, 40)})  # longer than --seq-length
    src = write_jsonl(tmp_path / "a.jsonl", records)
    prefix = tmp_path / "sft"
    assert preprocess(tok_dir, "--input", src, "--handler-name", "AlpacaStyleInstructionHandler",
                      "--prompt-type", "empty", "--seq-length", 48, "--pack", "--seed", 3,
                      "--output-prefix", prefix) == 0
    assert "1 truncated" in capsys.readouterr().out
    ids, _ = read(f"{prefix}_packed_input_ids_document")
    masks, _ = read(f"{prefix}_packed_attention_mask_document")
    labels, ds = read(f"{prefix}_packed_labels_document")
    assert ds.dtype == np.int32 and len(ids) == len(masks) == len(labels) < len(records)
    handler = build_handler("AlpacaStyleInstructionHandler", tok, prompt_type="empty")
    expected = [handler.encode(r) for r in records]
    expected = [(s["input_ids"][:48].tolist(), s["labels"][:48].tolist()) for s in expected]
    order = np.random.default_rng(3).permutation(len(records))
    unpacked = []
    for seq_ids, seq_mask, seq_labels in zip(ids, masks, labels):
        assert len(seq_ids) <= 48 and seq_mask[0] == 1 and seq_mask == sorted(seq_mask)
        for doc in range(1, seq_mask[-1] + 1):
            where = [k for k, m in enumerate(seq_mask) if m == doc]
            unpacked.append(([seq_ids[k] for k in where], [seq_labels[k] for k in where]))
    assert unpacked == [expected[i] for i in order]
    assert any(lab == IGNORE_INDEX for _, labs in unpacked for lab in labs)


def test_sharegpt_pairwise_outputs(tmp_path, tok_dir, tok):
    records = [{"conversations": [{"from": "human", "value": sentence(i)}],
                "chosen": {"from": "gpt", "value": sentence(i + 1)}, "rejected": {"from": "gpt", "value": "no"}}
               for i in range(5)]
    src = write_jsonl(tmp_path / "p.jsonl", records)
    prefix = tmp_path / "dpo"
    assert preprocess(tok_dir, "--input", src, "--handler-name", "SharegptStylePairwiseHandler",
                      "--prompt-type", "chatml", "--output-prefix", prefix) == 0
    handler = build_handler("SharegptStylePairwiseHandler", tok, prompt_type="chatml")
    for name in ("chosen_input_ids", "chosen_labels", "rejected_input_ids", "rejected_labels"):
        items, _ = read(f"{prefix}_packed_{name}_document")
        assert items == [handler.encode(r)[name].tolist() for r in records]


def test_subprocess_entry_point(tmp_path, tok_dir, tok):
    src = write_jsonl(tmp_path / "s.jsonl", [{"text": "hello there"}, {"text": "the cat"}])
    proc = subprocess.run([sys.executable, "preprocess_data.py", "--input", src, "--tokenizer-type",
                           "PretrainedFromHF", "--tokenizer-name-or-path", tok_dir, "--output-prefix",
                           str(tmp_path / "s"), "--workers", "2"], cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "done: 2 documents" in proc.stdout
    assert read(str(tmp_path / "s_text_document"))[0] == [tok.tokenize("hello there"), tok.tokenize("the cat")]


BAD_LINES = {
    "malformed": (b'{"text": "a"}\n{"text": "b"}\n{"text": \n', "bad.jsonl:3: malformed JSON", "malformed_json"),
    "missing_key": (b'{"text": "a"}\n{"body": "b"}\n', "bad.jsonl:2: missing key 'text'", "missing_key"),
    "utf8": (b'{"text": "a"}\n{"text": "\xff\xfe"}\n', "bad.jsonl:2: invalid UTF-8", "invalid_utf8"),
    "not_object": (b'{"text": "a"}\n[1, 2]\n', "bad.jsonl:2: record is a JSON list", "bad_type"),
}


@pytest.mark.parametrize("case", sorted(BAD_LINES))
def test_bad_records_stop_or_are_skipped(tmp_path, tok_dir, capsys, case):
    content, message, reason = BAD_LINES[case]
    (tmp_path / "bad.jsonl").write_bytes(content)
    prefix = tmp_path / "out" / "bad"
    assert preprocess(tok_dir, "--input", tmp_path / "bad.jsonl", "--output-prefix", prefix) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message in err and "\n" not in err
    assert os.listdir(tmp_path / "out") == []  # nothing partial: no .bin, .idx or temporary file
    assert preprocess(tok_dir, "--input", tmp_path / "bad.jsonl", "--output-prefix", prefix,
                      "--skip-bad-records") == 0
    assert f"skipped 1 ({reason}: 1)" in capsys.readouterr().out
    assert sorted(os.listdir(tmp_path / "out")) == ["bad_text_document.bin", "bad_text_document.idx"]


def test_bad_json_list_names_the_line(tmp_path, tok_dir, capsys):
    (tmp_path / "x.json").write_text('[{"text": "a"},\n {"text": }]')
    assert preprocess(tok_dir, "--input", tmp_path / "x.json", "--output-prefix", tmp_path / "o") == 2
    assert "x.json:2: malformed JSON" in capsys.readouterr().err


def test_only_empty_documents_is_an_error(tmp_path, tok_dir, capsys):
    src = write_jsonl(tmp_path / "e.jsonl", [{"text": ""}, {"text": "  "}])
    assert preprocess(tok_dir, "--input", src, "--output-prefix", tmp_path / "o") == 2
    assert "no usable documents (skipped: {'empty': 2})" in capsys.readouterr().err
    assert not any(name.endswith((".idx", ".bin")) for name in os.listdir(tmp_path))


@pytest.mark.parametrize("flags, message", [
    (["--input", "{tmp}/nope.jsonl"], "--input {tmp}/nope.jsonl: no such file"),
    (["--input", "{src}", "--output-prefix", "{src}/sub/x"], "--output-prefix {src}/sub/x: cannot write"),
    (["--input", "{src}", "--pack"], "--pack needs --seq-length"),
    (["--input", "{src}", "--seq-length", "8"], "--seq-length applies to instruction"),
    (["--input", "{src}", "--handler-name", "Nope"], "argument --handler-name: invalid choice"),
    (["--input", "{src}", "--map-keys", "{{", "--handler-name", "AlpacaStyleInstructionHandler"],
     "--map-keys is not valid JSON"),
    (["--input", "{src}", "--prompt-type", "tokenizer", "--handler-name", "AlpacaStyleInstructionHandler",
      "--tokenizer-type", "NullTokenizer", "--vocab-size", "10"], "needs a tokenizer with a chat template"),
    (["--input", "{src}", "--tokenizer-name-or-path", "{tmp}/none"], "no such directory"),
    (["--input", "{tmp}/in.txt", "--handler-name", "AlpacaStyleInstructionHandler"], "needs .jsonl/.json/.parquet"),
    (["--input", "{tmp}/in.txt", "--json-keys", "a", "b"], "--json-keys names 2 keys"),
    (["--input", "{tmp}", "--workers", "0"], "--workers must be at least 1"),
])
def test_flag_and_path_errors(tmp_path, tok_dir, capsys, flags, message):
    src = write_jsonl(tmp_path / "in.jsonl", [{"text": "a"}])
    (tmp_path / "in.txt").write_text("a\n")
    fill = {"tmp": tmp_path, "src": src}
    flags = [f.format(**fill) for f in flags]
    if "--output-prefix" not in flags:
        flags += ["--output-prefix", str(tmp_path / "out")]
    assert preprocess(tok_dir, *flags) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and message.format(**fill) in err and "\n" not in err


def test_parquet_needs_pyarrow(tmp_path, tok_dir, capsys):
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        (tmp_path / "x.parquet").write_bytes(b"")
        assert preprocess(tok_dir, "--input", tmp_path / "x.parquet", "--output-prefix", tmp_path / "o") == 2
        assert "needs pyarrow" in capsys.readouterr().err
        return
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"text": ["hello there", "the cat"]}), tmp_path / "x.parquet")
    assert preprocess(tok_dir, "--input", tmp_path / "x.parquet", "--output-prefix", tmp_path / "o") == 0
    assert len(IndexedDataset(str(tmp_path / "o_text_document"))) == 2


def test_a_directory_takes_only_corpus_files_and_says_which(tmp_path, tok_dir, tok, capsys):
    """A directory input skips hidden files, non-corpus formats and this suite's own outputs (an index
    cache's description .txt, an instruction dataset's settings .json), and lists what it took and skipped."""
    data = tmp_path / "data"
    (data / "sub").mkdir(parents=True)
    (data / "cache" / "GPTDataset_indices").mkdir(parents=True)
    (data / ".git").mkdir()
    corpus = {"a.jsonl": [sentence(i) for i in range(3)], "sub/b.jsonl": [sentence(i + 5) for i in range(2)]}
    for name, texts in corpus.items():
        write_jsonl(data / name, [{"text": t} for t in texts])
    (data / "c.txt").write_text(sentence(9) + "\n")
    not_corpus = {".notes.jsonl": '{"text": "hidden"}\n', ".git/HEAD.json": '[{"text": "git"}]',
                  "cache/GPTDataset_indices/0123456789abcdef0123456789abcdef-GPTDataset-train-description.txt":
                      '{"class": "GPTDataset"}\n',
                  "alpaca_packed_settings.json": '{"pack": true}', "corpus_text_document.idx": "x",
                  "corpus_text_document.bin": "x", "cache/GPTDataset_indices/doc_idx.npy": "x", "README.md": "x"}
    for name, text in not_corpus.items():
        (data / name).write_text(text)
    prefix = tmp_path / "out" / "corpus"
    assert preprocess(tok_dir, "--input", data, "--output-prefix", prefix) == 0
    out = capsys.readouterr().out
    taken = [line for line in out.splitlines() if line.startswith("input: 3 file(s)")]
    assert taken == [f"input: 3 file(s) from {data}: a.jsonl, c.txt, {os.path.join('sub', 'b.jsonl')}"], out
    skipped = next(line for line in out.splitlines() if line.startswith("input: skipped"))
    assert skipped.startswith(f"input: skipped {len(not_corpus)} file(s) that are not corpus input")
    assert all(os.path.normpath(name) in skipped for name in not_corpus)
    texts = corpus["a.jsonl"] + [sentence(9)] + corpus["sub/b.jsonl"]
    assert read(f"{prefix}_text_document")[0] == [tok.tokenize(t) for t in texts]


def test_a_directory_or_glob_without_corpus_files_names_what_it_skipped(tmp_path, tok_dir, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x_packed_settings.json").write_text("{}")
    (tmp_path / "d" / "x.idx").write_text("x")
    assert preprocess(tok_dir, "--input", tmp_path / "d", "--output-prefix", tmp_path / "o") == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: --input {tmp_path / 'd'}: no corpus files there (skipped 2: x.idx, "
                          "x_packed_settings.json)") and "\n" not in err, err
    assert preprocess(tok_dir, "--input", f"{tmp_path}/d/*", "--output-prefix", tmp_path / "o") == 2
    assert "no corpus files there (skipped 2:" in capsys.readouterr().err


def test_a_utf8_byte_order_mark_is_not_text(tmp_path, tok_dir, tok):
    """A file saved with a BOM (Windows editors) read as the same file without it, instead of a
    malformed first JSON line (.jsonl) or a BOM tokenized into the first document (.txt)."""
    bom = b"\xef\xbb\xbf"
    texts = [sentence(1), sentence(2)]
    files = {"a.jsonl": "".join(json.dumps({"text": t}) + "\n" for t in texts),
             "b.json": json.dumps([{"text": t} for t in texts]), "c.txt": "".join(t + "\n" for t in texts)}
    for name, content in files.items():
        (tmp_path / name).write_bytes(bom + content.encode("utf-8"))
        prefix = tmp_path / name.replace(".", "_")
        assert preprocess(tok_dir, "--input", tmp_path / name, "--output-prefix", prefix) == 0
        assert read(f"{prefix}_text_document")[0] == [tok.tokenize(t) for t in texts], name


# ------------------------------------------------------------------ the batched, threaded path


@pytest.fixture(scope="module")
def bos_tok_dir(tmp_path_factory):
    """A fast tokenizer whose own __call__ prepends a BOS (distinct from its EOS), as Llama's does."""
    from tokenizers.processors import TemplateProcessing
    from transformers import PreTrainedTokenizerFast
    tokenizer = train_tokenizer.train_bpe(iter(sentence(i) for i in range(300)), vocab_size=300, min_frequency=1)
    bos = train_tokenizer.IM_START
    tokenizer.post_processor = TemplateProcessing(single=f"{bos} $A",
                                                  special_tokens=[(bos, tokenizer.token_to_id(bos))])
    out = tmp_path_factory.mktemp("bos_tok")
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=bos,
                            eos_token=train_tokenizer.EOS).save_pretrained(str(out))
    return str(out)


def corpus_with_bad_records(count):
    """JSONL lines: good two-key records, with a bad record of every kind every few lines (and blank lines)."""
    bad = [b'{"text": 3, "title": "a"}', b'{"text": "\xff\xfe", "title": "a"}', b'{"text": ', b'[1, 2]',
           b'{"text": "hi there"}', b'{"text": " ", "title": "the cat"}', b'']
    lines = []
    for i in range(count):
        lines.append(json.dumps({"text": sentence(i), "title": sentence(i + 3, 1 + i % 4)}).encode())
        if i % 6 == 2:
            lines.append(bad[(i // 6) % len(bad)])
        if i == 2:  # the first error the handler finds comes before one found in decoding, in the same chunk
            lines.append(bad[2])
    return b"\n".join(lines) + b"\n"


def outputs_of(tmp_path, prefix):
    return {name[len(prefix) + 1:]: (tmp_path / name).read_bytes()
            for name in sorted(os.listdir(tmp_path)) if name.startswith(prefix + "_")}


@pytest.mark.parametrize("bos, eod, keys", [(False, True, ["text", "title"]), (True, True, ["text"]),
                                            (True, False, ["text", "title"]), (False, False, ["text"])])
def test_batched_path_writes_the_bytes_of_the_record_by_record_path(tmp_path, tok_dir, bos_tok_dir, capsys,
                                                                    monkeypatch, bos, eod, keys):
    """encode_batch at 1 worker and in 2 threads vs encode() per record (the path it replaces), over chunk
    boundaries every 5 records, with bad records of every kind in the middle: same .bin/.idx bytes, same
    skip counts with --skip-bad-records, same error line without it."""
    from mindspeed_llm.data.handlers import GeneralPretrainHandler
    from tools import preprocess_data
    monkeypatch.setattr(preprocess_data, "CHUNK_RECORDS", 5)
    (tmp_path / "c.jsonl").write_bytes(corpus_with_bad_records(60))
    flags = ["--input", tmp_path / "c.jsonl", "--json-keys", *keys] + (["--append-eod"] if eod else [])
    tokenizer = bos_tok_dir if bos else tok_dir

    def run(name, workers, *extra):
        code = preprocess(tokenizer, *flags, "--workers", workers, "--output-prefix", tmp_path / name, *extra)
        out, err = capsys.readouterr()
        return code, (out.split("; skipped")[-1].splitlines()[0] if code == 0 else err), outputs_of(tmp_path, name)

    with monkeypatch.context() as patch:
        patch.delattr(GeneralPretrainHandler, "encode_batch")
        reference = run("ref", 1, "--skip-bad-records")
        reference_error = run("referr", 1)
    assert reference[0] == 0 and len(reference[2]) == 2 * len(keys) and "bad_type: 3" in reference[1]
    assert ("missing_key: 1" in reference[1]) == (len(keys) == 2)  # the record without "title"
    assert reference_error[0] == 2 and reference_error[1].startswith("error: ") and not reference_error[2]
    for workers in (1, 2):
        assert run(f"w{workers}", workers, "--skip-bad-records") == reference
        assert run(f"e{workers}", workers) == reference_error
    items, _ = read(f"{tmp_path}/w2_{keys[0]}_document")
    assert all(item[-1] == PretrainedFromHF(tokenizer).eod for item in items) == eod
    assert all(item[0] == PretrainedFromHF(tokenizer).bos for item in items) == bos


def test_fast_tokenizer_pretraining_runs_encode_batch_in_threads(tmp_path, tok_dir, monkeypatch):
    """Which path runs: with a fast tokenizer and --workers 2, encode_batch in threads of this process with
    TOKENIZERS_PARALLELISM=false (restored afterwards); never encode() per record, never a process pool."""
    import threading
    from mindspeed_llm.data.handlers import GeneralPretrainHandler
    from tools import preprocess_data
    calls = []
    batch = GeneralPretrainHandler.encode_batch

    def spy(self, records):
        calls.append((threading.current_thread() is threading.main_thread(),
                      os.environ.get("TOKENIZERS_PARALLELISM"), len(records)))
        return batch(self, records)

    def refuse(*args, **kwargs):
        raise AssertionError("the per-record path or a process pool ran")

    monkeypatch.setattr(GeneralPretrainHandler, "encode_batch", spy)
    monkeypatch.setattr(GeneralPretrainHandler, "encode", refuse)
    monkeypatch.setattr(preprocess_data.multiprocessing, "Pool", refuse)
    monkeypatch.setattr(preprocess_data, "CHUNK_RECORDS", 4)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    src = write_jsonl(tmp_path / "t.jsonl", [{"text": sentence(i)} for i in range(30)])
    assert preprocess(tok_dir, "--input", src, "--workers", 2, "--output-prefix", tmp_path / "t") == 0
    assert [n for _, _, n in calls] == [4] * 7 + [2]
    assert all(not in_main and env == "false" for in_main, env, _ in calls), calls
    assert "TOKENIZERS_PARALLELISM" not in os.environ


def test_a_tokenizer_error_in_a_batch_is_reported_record_by_record(tmp_path, capsys, monkeypatch):
    """NullTokenizer refuses an id out of range: the batch raises, the chunk is encoded record by record, and
    the record is reported (or skipped and counted) as before."""
    from mindspeed_llm.data.handlers import GeneralPretrainHandler
    batches = []
    batch = GeneralPretrainHandler.encode_batch
    monkeypatch.setattr(GeneralPretrainHandler, "encode_batch",
                        lambda self, records: batches.append(len(records)) or batch(self, records))
    src = write_jsonl(tmp_path / "n.jsonl", [{"text": "1 2 3"}, {"text": "4 99"}, {"text": "5"}])
    flags = ["--input", src, "--tokenizer-type", "NullTokenizer", "--vocab-size", "10", "--output-prefix",
             str(tmp_path / "n")]
    assert main(flags) == 2
    assert "n.jsonl:2: tokenizer: NullTokenizer: id 99 is outside [0, 10)" in capsys.readouterr().err
    assert main(flags + ["--skip-bad-records"]) == 0
    assert "skipped 1 (tokenizer_error: 1)" in capsys.readouterr().out
    assert read(str(tmp_path / "n_text_document"))[0] == [[1, 2, 3], [5]] and batches == [3, 3]
