"""Handlers and templates: exact token ids and label masks, computed here from the tokenizer itself."""
import numpy as np
import pytest

from mindspeed_llm.data import (IGNORE_INDEX, BadRecord, build_emitter, build_handler, greedy_pack,
                                output_files)
from mindspeed_llm.tokenizer import PretrainedFromHF
from tools import train_tokenizer

M = IGNORE_INDEX
ALPACA_SYSTEM = ("Below is an instruction that describes a task. "
                 "Write a response that appropriately completes the request.")


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    words = "what is two plus three five hello hi there how are you fine thanks name bot".split()
    lines = [" ".join(words[(i * 5 + j) % len(words)] for j in range(8)) for i in range(300)]
    tokenizer = train_tokenizer.train_bpe(iter(lines), vocab_size=300, min_frequency=1)
    out = tmp_path_factory.mktemp("tok")
    train_tokenizer.save_for_transformers(tokenizer, str(out))
    return PretrainedFromHF(str(out))


def enc(tok, text):
    return tok.tokenize(text)


def as_lists(sample):
    return {k: v.tolist() for k, v in sample.items()}


def test_pretrain_handler(tok):
    handler = build_handler("GeneralPretrainHandler", tok, json_keys=["text", "title"], append_eod=True)
    sample = as_lists(handler.encode({"text": "hello there", "title": "hi"}))
    assert sample == {"text": enc(tok, "hello there") + [tok.eod], "title": enc(tok, "hi") + [tok.eod]}
    plain = build_handler("GeneralPretrainHandler", tok)
    assert plain.encode({"text": "hi"})["text"].tolist() == enc(tok, "hi")
    with pytest.raises(BadRecord, match="missing key 'text'") as info:
        plain.encode({"body": "x"})
    assert info.value.reason == "missing_key"
    with pytest.raises(BadRecord) as info:
        plain.encode({"text": "  \n"})
    assert info.value.reason == "empty"


def test_alpaca_with_history_and_map_keys(tok):
    handler = build_handler("AlpacaStyleInstructionHandler", tok, prompt_type="alpaca",
                            map_keys='{"prompt":"q","query":"ctx","response":"a"}')
    record = {"q": "what is two plus three", "ctx": "hi", "a": "five",
              "history": [["hello", "hi there"]]}
    p1 = enc(tok, f"{ALPACA_SYSTEM}\n\n### Instruction:\nhello\n\n### Response:\n")
    r1 = enc(tok, "hi there") + [tok.eod]
    p2 = enc(tok, "\n\n### Instruction:\nwhat is two plus three\nhi\n\n### Response:\n")
    r2 = enc(tok, "five") + [tok.eod]
    assert as_lists(handler.encode(record)) == {
        "input_ids": p1 + r1 + p2 + r2,
        "labels": [M] * len(p1) + r1 + [M] * len(p2) + r2}


def test_alpaca_empty_template_and_system(tok):
    handler = build_handler("AlpacaStyleInstructionHandler", tok, prompt_type="empty")
    sample = as_lists(handler.encode({"instruction": "hi", "input": "", "output": "fine", "system": "bot"}))
    prompt = enc(tok, "bothi")
    assert sample == {"input_ids": prompt + enc(tok, "fine") + [tok.eod],
                      "labels": [M] * len(prompt) + enc(tok, "fine") + [tok.eod]}


def test_sharegpt_multi_turn_chatml(tok):
    handler = build_handler("SharegptStyleInstructionHandler", tok, prompt_type="chatml")
    record = {"conversations": [
        {"from": "system", "value": "you are a bot"},
        {"from": "human", "value": "hello"}, {"from": "gpt", "value": "hi there"},
        {"from": "human", "value": "how are you"}, {"from": "gpt", "value": "fine thanks"}]}
    im_start, im_end = 2, 3
    nl = enc(tok, "\n")
    p1 = ([im_start] + enc(tok, "system\nyou are a bot") + [im_end] + nl + [im_start] + enc(tok, "user\nhello")
          + [im_end] + nl + [im_start] + enc(tok, "assistant\n"))
    r1 = enc(tok, "hi there") + [im_end] + nl
    p2 = [im_start] + enc(tok, "user\nhow are you") + [im_end] + nl + [im_start] + enc(tok, "assistant\n")
    r2 = enc(tok, "fine thanks") + [im_end] + nl
    expected = {"input_ids": p1 + r1 + p2 + r2, "labels": [M] * len(p1) + r1 + [M] * len(p2) + r2}
    assert as_lists(handler.encode(record)) == expected
    # the tokenizer's own (ChatML) template gives the same ids and masks
    own = build_handler("SharegptStyleInstructionHandler", tok, prompt_type="tokenizer")
    assert as_lists(own.encode(record)) == expected


def test_sharegpt_openai_style_keys(tok):
    handler = build_handler("SharegptStyleInstructionHandler", tok, prompt_type="empty",
                            map_keys='{"messages":"messages","role_tag":"role","content_tag":"content",'
                                     '"user_tag":"user","assistant_tag":"assistant"}')
    sample = as_lists(handler.encode({"messages": [{"role": "user", "content": "hi"},
                                                   {"role": "assistant", "content": "hello"}]}))
    assert sample["input_ids"] == enc(tok, "hi") + enc(tok, "hello") + [tok.eod]
    assert sample["labels"] == [M] * len(enc(tok, "hi")) + enc(tok, "hello") + [tok.eod]


@pytest.mark.parametrize("turns", [
    [("human", "hi")],                                   # no assistant reply
    [("gpt", "hi"), ("human", "x")],                     # starts with the assistant
    [("human", "a"), ("human", "b")],                    # not alternating
    [("human", "a"), ("tool", "b")],                     # unknown role
])
def test_sharegpt_invalid_conversations(tok, turns):
    handler = build_handler("SharegptStyleInstructionHandler", tok, prompt_type="empty")
    with pytest.raises(BadRecord) as info:
        handler.encode({"conversations": [{"from": r, "value": v} for r, v in turns]})
    assert info.value.reason == "invalid_conversation"


def test_llama_templates_use_bos_and_eos_ids(tok):
    handler = build_handler("AlpacaStyleInstructionHandler", tok, prompt_type="llama2")
    sample = as_lists(handler.encode({"instruction": "hi", "output": "hello", "system": "bot"}))
    prompt = [tok.bos] + enc(tok, "[INST] <<SYS>>\nbot\n<</SYS>>\n\nhi [/INST]")
    reply = enc(tok, " hello ") + [tok.eod]
    assert sample == {"input_ids": prompt + reply, "labels": [M] * len(prompt) + reply}
    llama3 = build_handler("AlpacaStyleInstructionHandler", tok, prompt_type="llama3")
    ids = llama3.encode({"instruction": "hi", "output": "hello"})["input_ids"].tolist()
    assert ids[0] == tok.bos and ids[1:] == enc(tok, "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
                                               "<|start_header_id|>assistant<|end_header_id|>\n\n") \
        + enc(tok, "hello<|eot_id|>")


def test_user_text_is_not_a_template_marker(tok):
    handler = build_handler("AlpacaStyleInstructionHandler", tok, prompt_type="empty")
    ids = handler.encode({"instruction": "{eos}{content}", "output": "x"})["input_ids"].tolist()
    assert ids == enc(tok, "{eos}{content}") + enc(tok, "x") + [tok.eod]


def test_pairwise_handlers(tok):
    alpaca = build_handler("AlpacaStylePairwiseHandler", tok, prompt_type="empty")
    sample = as_lists(alpaca.encode({"instruction": "hi", "chosen": "hello there", "rejected": "no",
                                     "history": [["a", "b"]]}))
    history = enc(tok, "a") + enc(tok, "b") + [tok.eod]
    prompt = history + enc(tok, "hi")
    chosen, rejected = enc(tok, "hello there") + [tok.eod], enc(tok, "no") + [tok.eod]
    assert sample == {"chosen_input_ids": prompt + chosen, "chosen_labels": [M] * len(prompt) + chosen,
                      "rejected_input_ids": prompt + rejected, "rejected_labels": [M] * len(prompt) + rejected}
    sharegpt = build_handler("SharegptStylePairwiseHandler", tok, prompt_type="empty")
    same = sharegpt.encode({"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"},
                                              {"from": "human", "value": "hi"}],
                            "chosen": {"from": "gpt", "value": "hello there"}, "rejected": "no"})
    assert as_lists(same) == sample


def test_map_keys_errors(tok):
    with pytest.raises(ValueError, match="unknown key"):
        build_handler("AlpacaStyleInstructionHandler", tok, map_keys='{"instr": "x"}')
    with pytest.raises(ValueError, match="not valid JSON"):
        build_handler("AlpacaStyleInstructionHandler", tok, map_keys="{prompt")
    with pytest.raises(ValueError, match="--prompt-type nope"):
        build_handler("AlpacaStyleInstructionHandler", tok, prompt_type="nope")
    with pytest.raises(ValueError, match="--handler-name"):
        build_handler("NoSuchHandler", tok)


class ListSink:
    def __init__(self):
        self.items, self.docs = {}, {}

    def add_item(self, name, array):
        self.items.setdefault(name, []).append(np.asarray(array).tolist())

    def end_document(self, name):
        self.docs[name] = self.docs.get(name, 0) + 1


def instruction_sample(n, start):
    ids = np.arange(start, start + n, dtype=np.int32)
    return {"input_ids": ids, "labels": np.where(ids % 2 == 0, ids, M).astype(np.int32)}


def test_greedy_pack():
    assert greedy_pack([3, 4, 2, 5, 1, 1], 6) == [[0], [1, 2], [3, 4], [5]]
    assert greedy_pack([], 4) == []
    assert greedy_pack([9], 4) == [[0]]


def test_instruction_emitter_truncates_and_packs():
    sink = ListSink()
    emitter = build_emitter("instruction", sink, seq_length=6, pack=True, seed=0)
    samples = [instruction_sample(n, 10 * k) for k, n in enumerate([3, 8, 2, 4])]
    for sample in samples:
        emitter.add(sample)
    emitter.finish()
    lengths = [min(len(s["input_ids"]), 6) for s in samples]
    order = np.random.default_rng(0).permutation(4)
    groups = greedy_pack([lengths[i] for i in order], 6)
    assert len(sink.items["packed_input_ids"]) == len(groups) == emitter.stats["sequences"]
    assert emitter.stats["truncated"] == 1 and emitter.stats["tokens"] == sum(lengths)
    for group, ids, mask, labels in zip(groups, sink.items["packed_input_ids"],
                                        sink.items["packed_attention_mask"], sink.items["packed_labels"]):
        members = [samples[order[i]] for i in group]
        assert ids == sum((s["input_ids"][:6].tolist() for s in members), [])
        assert labels == sum((s["labels"][:6].tolist() for s in members), [])
        assert mask == sum(([k + 1] * min(len(s["input_ids"]), 6) for k, s in enumerate(members)), [])
        assert len(ids) <= 6
    assert sink.docs == {name: len(groups) for name in sink.items}


def test_instruction_emitter_unpacked():
    sink = ListSink()
    emitter = build_emitter("instruction", sink, seq_length=None)
    emitter.add(instruction_sample(3, 4))
    emitter.finish()
    assert sink.items == {"packed_input_ids": [[4, 5, 6]], "packed_attention_mask": [[1, 1, 1]],
                          "packed_labels": [[4, M, 6]]}


def test_emitter_errors_and_output_names():
    with pytest.raises(ValueError, match="--pack needs --seq-length"):
        build_emitter("instruction", ListSink(), seq_length=None, pack=True)
    with pytest.raises(ValueError, match="--pack applies to instruction"):
        build_emitter("pretrain", ListSink(), seq_length=8, pack=True)
    assert output_files("pretrain", ["text", "t2"]) == ("text", "t2")
    assert output_files("instruction") == ("packed_input_ids", "packed_attention_mask", "packed_labels")
    assert output_files("pairwise") == ("packed_chosen_input_ids", "packed_chosen_labels",
                                        "packed_rejected_input_ids", "packed_rejected_labels")


def test_pretrain_handler_prepends_bos_when_the_tokenizer_does(tmp_path):
    from tokenizers import processors
    tokenizer = train_tokenizer.train_bpe(iter(["hello there", "hi there"] * 20), vocab_size=280, min_frequency=1)
    tokenizer.post_processor = processors.TemplateProcessing(single="<|endoftext|> $A",
                                                             special_tokens=[("<|endoftext|>", 0)])
    train_tokenizer.save_for_transformers(tokenizer, str(tmp_path))
    tok = PretrainedFromHF(str(tmp_path))
    assert tok.add_bos and tok.bos == 0
    handler = build_handler("GeneralPretrainHandler", tok, append_eod=True)
    assert handler.encode({"text": "hello"})["text"].tolist() == [0] + tok.tokenize("hello") + [tok.eod]
