"""evaluation.py: benchmark readers, scoring rules, answer extraction, code execution and the whole run.

Each benchmark's fixture is written by the test in its published layout and parsed; stub scorers and
generators with known behaviour give known accuracies (a model that always answers "A" on MMLU); GSM8K
answers are extracted from ``####``, ``\\boxed{}`` and the last number; HumanEval runs a correct and a wrong
completion with --allow-code-execution and refuses without it. End to end, a tiny random Llama converted
with tools/convert_ckpt.py is evaluated by ``evaluation.py`` in this process: the JSON it writes agrees with
the choices transformers' model makes by the same log-likelihood rule, and the greedy generator's tokens
equal transformers' ``generate``. A missing benchmark file is one line naming it.

    python -m pytest tests/unit/test_evaluation.py -q
"""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

import pytest
import torch
import transformers

import evaluation
from mindspeed_llm.evaluation import answers, readers, tasks
from mindspeed_llm.evaluation.code_execution import human_eval_program, run_program
from mindspeed_llm.evaluation.errors import EvaluationError
from mindspeed_llm.evaluation.results import accuracy_report
from mindspeed_llm.evaluation.runner import judge
from mindspeed_llm.inference.loading import setup_inference
from mindspeed_llm.evaluation.scoring import GreedyGenerator, ModelForward, ModelScorer

MMLU_ANSWERS = {"astronomy": "ABAC", "virology": "DAB"}  # always "A": 2/4 and 1/3


# ---------------------------------------------------------------------------------------------- fixtures

def write_csv(path: Path, rows: Sequence[Sequence[str]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)


def write_jsonl(path: Path, records: Sequence[Dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def mmlu_layout(root: Path) -> Path:
    """MMLU's data/{test,dev}/{subject}_{split}.csv, no header."""
    for subject, letters in MMLU_ANSWERS.items():
        write_csv(root / "test" / f"{subject}_test.csv",
                  [[f"{subject} question {i}?", "one", "two", "three", "four", a] for i, a in enumerate(letters)])
        write_csv(root / "dev" / f"{subject}_dev.csv", [[f"{subject} example?", "w", "x", "y", "z", "B"]])
    return root / "test"


def cmmlu_layout(root: Path) -> Path:
    header = ["", "Question", "A", "B", "C", "D", "Answer"]
    write_csv(root / "test" / "anatomy.csv", [header, ["0", "问题一", "甲", "乙", "丙", "丁", "C"],
                                              ["1", "问题二", "甲", "乙", "丙", "丁", "A"]])
    write_csv(root / "dev" / "anatomy.csv", [header, ["0", "例题", "甲", "乙", "丙", "丁", "B"]])
    return root / "test"


def ceval_layout(root: Path) -> Path:
    write_csv(root / "val" / "law_val.csv", [["id", "question", "A", "B", "C", "D", "answer"],
                                             ["0", "法律问题", "一", "二", "三", "四", "D"]])
    write_csv(root / "dev" / "law_dev.csv", [["id", "question", "A", "B", "C", "D", "answer", "explanation"],
                                             ["0", "例题", "一", "二", "三", "四", "A", "因为"]])
    return root / "val"


def gsm8k_layout(root: Path) -> Path:
    write_jsonl(root / "test.jsonl", [{"question": "Tom has 3 apples and buys 4. How many?",
                                       "answer": "3 + 4 = <<3+4=7>>7\n#### 7"},
                                      {"question": "A box holds 1,200 pens; 200 are sold. How many remain?",
                                       "answer": "1200 - 200 = 1000\n#### 1,000"}])
    write_jsonl(root / "train.jsonl", [{"question": "What is 2 + 2?", "answer": "2 + 2 = 4\n#### 4"}])
    return root


def boolq_layout(root: Path) -> Path:
    write_jsonl(root / "dev.jsonl", [{"question": "is the sky blue", "passage": "The sky is blue.", "answer": True},
                                     {"question": "is fire cold", "passage": "Fire is hot.", "answer": False}])
    return root


def bbh_layout(root: Path) -> Path:
    (root / "bbh").mkdir(parents=True)
    (root / "bbh" / "boolean_expressions.json").write_text(json.dumps(
        {"examples": [{"input": "not True and True is", "target": "False"},
                      {"input": "True or False is", "target": "True"}]}))
    (root / "cot-prompts").mkdir()
    (root / "cot-prompts" / "boolean_expressions.txt").write_text(
        "Evaluate boolean expressions.\n\n-----\nQ: True is\nA: Let's think step by step. So the answer is True.")
    return root / "bbh"


def agieval_layout(root: Path) -> Path:
    write_jsonl(root / "lsat-ar.jsonl", [{"passage": "Five people sit.", "question": "Who sits first?",
                                          "options": ["(A)Ann", "(B)Bob", "(C)Cy", "(D)Di", "(E)Ed"], "label": "B",
                                          "answer": None}])
    write_jsonl(root / "math.jsonl", [{"passage": None, "question": "What is 6 times 7?", "options": None,
                                       "label": None, "answer": "42"}])
    return root


def hellaswag_layout(root: Path) -> Path:
    write_jsonl(root / "hellaswag_val.jsonl", [{"activity_label": "Cooking", "ctx": "A man cracks an egg",
                                                "endings": ["into a bowl.", "on the moon.", "with a song.",
                                                            "in a car."], "label": 0},
                                               {"activity_label": "Running", "ctx": "She ties her shoes",
                                                "endings": ["and sleeps.", "and runs off.", "and sings.",
                                                            "and eats."], "label": "1"}])
    return root


HUMAN_EVAL_TASKS = [
    {"task_id": "HumanEval/0", "prompt": "def add(a, b):\n    \"\"\"Sum of a and b.\"\"\"\n",
     "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "entry_point": "add"},
    {"task_id": "HumanEval/1", "prompt": "def negate(x):\n",
     "test": "def check(candidate):\n    assert candidate(4) == -4\n", "entry_point": "negate"},
]


def human_eval_layout(root: Path) -> Path:
    write_jsonl(root / "HumanEval.jsonl", HUMAN_EVAL_TASKS)
    return root


LAYOUTS = {"mmlu": mmlu_layout, "cmmlu": cmmlu_layout, "ceval": ceval_layout, "gsm8k": gsm8k_layout,
           "boolq": boolq_layout, "bbh": bbh_layout, "agieval": agieval_layout, "hellaswag": hellaswag_layout,
           "human_eval": human_eval_layout}


# ---------------------------------------------------------------------------------------------- readers

def test_readers_parse_each_published_layout(tmp_path: Path) -> None:
    mmlu = readers.read_mmlu([str(mmlu_layout(tmp_path / "mmlu"))])
    assert list(mmlu) == ["astronomy", "virology"]
    assert mmlu["virology"]["test"][0] == {"question": "virology question 0?",
                                           "choices": ["one", "two", "three", "four"], "answer": "D"}
    assert mmlu["astronomy"]["dev"][0]["answer"] == "B"
    assert list(readers.read_mmlu([str(tmp_path / "mmlu")])) == ["astronomy", "virology"]  # data/ also works
    cmmlu = readers.read_cmmlu([str(cmmlu_layout(tmp_path / "cmmlu"))])
    assert [r["answer"] for r in cmmlu["anatomy"]["test"]] == ["C", "A"] and len(cmmlu["anatomy"]["dev"]) == 1
    ceval = readers.read_ceval([str(ceval_layout(tmp_path / "ceval"))])
    assert ceval["law"]["test"][0]["choices"] == ["一", "二", "三", "四"] and ceval["law"]["dev"][0]["answer"] == "A"
    gsm8k = readers.read_gsm8k([str(gsm8k_layout(tmp_path / "gsm8k"))])
    assert len(gsm8k["gsm8k"]) == 2 and len(gsm8k["train"]) == 1
    assert [r["answer"] for r in readers.read_boolq([str(boolq_layout(tmp_path / "boolq"))])["dev"]] == [True, False]
    bbh = readers.read_bbh([str(bbh_layout(tmp_path / "bbh"))])
    assert bbh["boolean_expressions"][1]["target"] == "True"
    assert bbh["boolean_expressions"][0]["cot_prompt"].startswith("Q: True is")
    assert readers.read_bbh([str(tmp_path / "bbh")]) == bbh  # the repository's root
    agi = readers.read_agieval([str(agieval_layout(tmp_path / "agi"))])
    assert agi["lsat-ar"][0]["label"] == "B" and agi["math"][0]["answer"] == "42"
    assert [r["label"] for r in readers.read_hellaswag([str(hellaswag_layout(tmp_path / "hs"))])["hellaswag_val"]] \
        == [0, 1]
    assert readers.read_human_eval([str(human_eval_layout(tmp_path / "he"))])["HumanEval"][1]["entry_point"] \
        == "negate"


@pytest.mark.parametrize("task,expected", [
    ("mmlu", "{subject}_test.csv"), ("cmmlu", "{subject}.csv"), ("ceval", "{subject}_val.csv"),
    ("gsm8k", "test.jsonl"), ("boolq", "dev.jsonl"), ("bbh", "{task}.json"), ("agieval", "{task}.jsonl"),
    ("hellaswag", "hellaswag_val.jsonl"), ("human_eval", "HumanEval.jsonl")])
def test_a_missing_file_is_one_line_naming_it(tmp_path: Path, task: str, expected: str) -> None:
    options = tasks.EvalOptions(allow_code_execution=True)
    with pytest.raises(EvaluationError) as error:
        tasks.BUILDERS[task]([str(tmp_path)], options)
    message = str(error.value)
    assert expected in message and str(tmp_path) in message and "\n" not in message


def test_a_malformed_row_is_refused_naming_the_file(tmp_path: Path) -> None:
    write_csv(tmp_path / "x_test.csv", [["question", "A", "B", "C", "D", "Z"]])
    with pytest.raises(EvaluationError, match="x_test.csv"):
        readers.read_mmlu([str(tmp_path)])


# ---------------------------------------------------------------------------------------------- scoring rules

class PreferScorer:
    """Log-likelihood 0 for continuations ``prefer`` accepts, -1 otherwise; records the requests."""

    def __init__(self, prefer) -> None:
        self.prefer, self.requests = prefer, []

    def loglikelihoods(self, requests: Sequence[Tuple[str, str]]) -> List[float]:
        self.requests += list(requests)
        return [0.0 if self.prefer(context, continuation) else -1.0 for context, continuation in requests]


class CannedGenerator:
    """Returns ``answer(prompt)`` for each prompt."""

    def __init__(self, answer) -> None:
        self.answer, self.calls = answer, []

    def generate(self, prompts: Sequence[str], max_new_tokens: int, stop: Sequence[str]) -> List[str]:
        self.calls.append((list(prompts), max_new_tokens, tuple(stop)))
        return [self.answer(p) for p in prompts]


def test_always_answering_a_gets_the_share_of_a_answers_on_mmlu(tmp_path: Path) -> None:
    questions = tasks.mmlu([str(mmlu_layout(tmp_path))], tasks.EvalOptions())
    report = accuracy_report("mmlu", judge(questions, PreferScorer(lambda _, c: c.strip() == "A"), None, 1))
    assert report["subjects"]["astronomy"] == {"total": 4, "correct": 2, "accuracy": 0.5}
    assert report["subjects"]["virology"]["correct"] == 1 and report["subjects"]["virology"]["total"] == 3
    assert report["overall"] == {"total": 7, "correct": 3, "accuracy": 3 / 7}
    # the dev example leads each prompt (few-shot), the question ends it
    assert "virology example?\nA. w\nB. x\nC. y\nD. z\nAnswer: B\n\n" in questions[4].context
    assert questions[4].context.endswith("virology question 0?\nA. one\nB. two\nC. three\nD. four\nAnswer:")
    capped = tasks.mmlu([str(tmp_path / "test")], tasks.EvalOptions(max_eval_samples=1))
    assert len(capped) == 2  # --max-eval-samples: per subject


@pytest.mark.parametrize("task", ["mmlu", "cmmlu", "ceval", "boolq", "hellaswag"])
def test_choice_tasks_score_their_known_answers(tmp_path: Path, task: str) -> None:
    """An oracle scorer that prefers the right continuation gets everything right, its opposite nothing."""
    questions = tasks.BUILDERS[task]([str(LAYOUTS[task](tmp_path))], tasks.EvalOptions())
    gold = {(q.context, q.choices[q.answer]) for q in questions}
    right = accuracy_report(task, judge(questions, PreferScorer(lambda c, x: (c, x) in gold), None, 1))
    wrong = accuracy_report(task, judge(questions, PreferScorer(lambda c, x: (c, x) not in gold), None, 1))
    assert right["overall"]["accuracy"] == 1.0 and wrong["overall"]["accuracy"] == 0.0
    assert right["overall"]["total"] == len(questions) > 0


def test_hellaswag_compares_endings_per_character(tmp_path: Path) -> None:
    """-1 nat per character for the right ending, -1.2 for the others: the shortest wrong ending has the largest
    total (what a raw sum would choose), the right one the largest per character."""
    questions = tasks.hellaswag([str(hellaswag_layout(tmp_path))], tasks.EvalOptions())
    gold = {(q.context, q.choices[q.answer]) for q in questions}
    scorer = CannedScorer(lambda c, x: -len(x) * (1.0 if (c, x) in gold else 1.2))
    assert accuracy_report("hellaswag", judge(questions, scorer, None, 1))["overall"]["accuracy"] == 1.0
    for q in questions:
        q.per_character = False
    assert accuracy_report("hellaswag", judge(questions, scorer, None, 1))["overall"]["accuracy"] == 0.0


class CannedScorer:
    def __init__(self, score) -> None:
        self.score = score

    def loglikelihoods(self, requests: Sequence[Tuple[str, str]]) -> List[float]:
        return [self.score(c, x) for c, x in requests]


def test_agieval_scores_choices_by_likelihood_and_cloze_by_generation(tmp_path: Path) -> None:
    questions = tasks.agieval([str(agieval_layout(tmp_path))], tasks.EvalOptions())
    scorer = PreferScorer(lambda _, c: c.strip() == "B")
    report = accuracy_report("agieval", judge(questions, scorer, CannedGenerator(lambda p: " 42\nmore"), 1))
    assert report["subjects"]["lsat-ar"]["accuracy"] == 1.0 and report["subjects"]["math"]["accuracy"] == 1.0
    assert [c for _, c in scorer.requests] == [" A", " B", " C", " D", " E"]
    report = accuracy_report("agieval", judge(questions, scorer, CannedGenerator(lambda p: " 41"), 1))
    assert report["subjects"]["math"]["accuracy"] == 0.0


def test_gsm8k_and_bbh_judge_generated_answers(tmp_path: Path) -> None:
    questions = tasks.gsm8k([str(gsm8k_layout(tmp_path / "g"))], tasks.EvalOptions(chain_of_thought=True))
    assert questions[0].prompt.startswith("Question: What is 2 + 2?\nAnswer: 2 + 2 = 4\n#### 4\n\nQuestion: Tom")
    assert questions[0].prompt.endswith("Answer: Let's think step by step.")
    generator = CannedGenerator(lambda p: "3 + 4 = 7. The answer is 7." if "Tom" in p else "So \\boxed{999}")
    report = accuracy_report("gsm8k", judge(questions, None, generator, 17))
    assert report["overall"] == {"total": 2, "correct": 1, "accuracy": 0.5}
    assert generator.calls[0][1] == 17 and "Question:" in generator.calls[0][2]
    one_thousand = CannedGenerator(lambda p: "1,000" if "pens" in p else "7")
    assert accuracy_report("gsm8k", judge(questions, None, one_thousand, 5))["overall"]["accuracy"] == 1.0

    plain = tasks.bbh([str(bbh_layout(tmp_path / "b"))], tasks.EvalOptions())
    assert plain[0].prompt == "Q: not True and True is\nA:"
    report = accuracy_report("bbh", judge(plain, None, CannedGenerator(lambda p: " False\nQ: x"), 5))
    assert report["subjects"]["boolean_expressions"] == {"total": 2, "correct": 1, "accuracy": 0.5}
    cot = tasks.bbh([str(tmp_path / "b" / "bbh")], tasks.EvalOptions(chain_of_thought=True))
    assert cot[0].prompt.startswith("Q: True is\nA: Let's think step by step. So the answer is True.\n\nQ: not")
    answer = CannedGenerator(lambda p: " not True is False. So the answer is False.")
    assert accuracy_report("bbh", judge(cot, None, answer, 5))["overall"]["correct"] == 1


def test_gsm8k_answer_extraction() -> None:
    assert answers.extract_gsm8k_answer("3 + 4 = 7 so\n#### 1,234") == "1234"
    assert answers.extract_gsm8k_answer("first 5, then \\boxed{\\frac{1}{2}} and finally \\boxed{42}.") == "42"
    assert answers.extract_gsm8k_answer("Then 12 apples, and 30.0 left") == "30"
    assert answers.extract_gsm8k_answer("The answer is 18. Then 5 more pages.") == "18"
    assert answers.extract_gsm8k_answer("no digits here") is None
    assert answers.gsm8k_reference("She pays 2 * 36 = 72\n#### 72") == "72"
    assert answers.gsm8k_reference("#### -3.50") == "-3.5"


# ---------------------------------------------------------------------------------------------- human_eval

def test_human_eval_runs_code_only_when_allowed(tmp_path: Path) -> None:
    assert run_program(human_eval_program(HUMAN_EVAL_TASKS[0], "    return a + b\n")).passed
    wrong = run_program(human_eval_program(HUMAN_EVAL_TASKS[0], "    return a - b\n"))
    assert not wrong.passed and "AssertionError" in wrong.detail
    assert run_program("while True:\n    pass\n", timeout=1.0).detail == "timed out"
    fenced = "Here it is:\n```python\ndef add(a, b):\n    return b + a\n```\nDone."  # an instruct model's answer
    assert run_program(human_eval_program(HUMAN_EVAL_TASKS[0], fenced)).passed
    network = run_program("import socket\nsocket.create_connection(('127.0.0.1', 9))\n")
    assert not network.passed and "network access is disabled" in network.detail
    marker = tmp_path / "written"
    guarded = {  # each is refused in the child, and the parent's file system is untouched
        "writing files": f"open({str(marker)!r}, 'w').write('x')\n",
        "creating processes": "import subprocess\nsubprocess.run(['true'])\n",
        "creating or signalling processes": "import os\nos.system('true')\n",
        "changing the file system": f"import os\nos.remove({str(tmp_path / 'keep')!r})\n",
    }
    (tmp_path / "keep").write_text("kept")
    for what, program in guarded.items():
        result = run_program(program)
        assert not result.passed and f"{what} is disabled" in result.detail, (what, result)
    assert not marker.exists() and (tmp_path / "keep").read_text() == "kept"
    reading = run_program(f"assert open({str(tmp_path / 'keep')!r}).read() == 'kept'\nimport math\n")
    assert reading.passed, reading.detail  # reading and importing still work
    low_level = run_program(f"import os\nfd = os.open({str(marker)!r}, os.O_WRONLY | os.O_CREAT)\n"
                            "os.write(fd, b'x' * 10)\n")
    assert not low_level.passed and (not marker.exists() or marker.stat().st_size == 0)  # RLIMIT_FSIZE

    layout = [str(human_eval_layout(tmp_path))]
    questions = tasks.human_eval(layout, tasks.EvalOptions(allow_code_execution=True))
    completions = {"add": "    return a + b\n", "negate": "    return x\n"}  # the second one is wrong
    generator = CannedGenerator(lambda p: completions["add" if "def add" in p else "negate"])
    report = accuracy_report("human_eval", judge(questions, None, generator, 64))
    assert report["metric"] == "pass@1" and report["subjects"]["HumanEval"] == {"total": 2, "correct": 1,
                                                                                "accuracy": 0.5}
    with pytest.raises(EvaluationError, match="--allow-code-execution"):
        tasks.human_eval(layout, tasks.EvalOptions())


# ---------------------------------------------------------------------------------------------- end to end

WORDS = ("the quick brown fox jumps over a lazy dog question answer one two three four apples how many "
         "astronomy virology example Tom has buys box pens sold remain").split()
HF = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
          vocab_size=320, max_position_embeddings=512, rms_norm_eps=1e-6, rope_theta=10000.0, tie_word_embeddings=False)


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory) -> Dict[str, str]:
    """A tiny random Llama (transformers), its BPE tokenizer, and the model converted to ours (TP 1)."""
    from tools import train_tokenizer
    from tools.convert_ckpt import main as convert_main

    root = tmp_path_factory.mktemp("eval_model")
    texts = [" ".join(WORDS[(i * 5 + j * 3) % len(WORDS)] for j in range(12)) + f" {i} ?" for i in range(300)]
    tokenizer = train_tokenizer.train_bpe(iter(texts), vocab_size=300, min_frequency=1)
    train_tokenizer.save_for_transformers(tokenizer, str(root / "tok"))
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(**HF, dtype="float32")).save_pretrained(root / "hf")
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", str(root / "hf"),
                         "--save-dir", str(root / "mg"), "--target-tensor-parallel-size", "1"]) == 0
    return {"hf": str(root / "hf"), "tok": str(root / "tok"), "mg": str(root / "mg")}


def model_argv(dirs: Dict[str, str]) -> List[str]:
    return ["--load", dirs["mg"], "--use-checkpoint-args", "--tokenizer-type", "PretrainedFromHF",
            "--tokenizer-name-or-path", dirs["tok"], "--device", "cpu", "--no-chat-template"]


def hf_loglikelihood(model, tokenizer, context: str, continuation: str) -> float:
    head = tokenizer.encode(context, add_special_tokens=False)
    tail = tokenizer.encode(continuation, add_special_tokens=False)
    with torch.no_grad():
        log_probs = torch.log_softmax(model(torch.tensor([head + tail])).logits[0].float(), dim=-1)  # [s, v]
    return float(sum(log_probs[len(head) - 1 + i, token] for i, token in enumerate(tail)))


def test_evaluation_py_end_to_end_writes_the_json(tmp_path: Path, model_dirs: Dict[str, str],
                                                  capsys: pytest.CaptureFixture) -> None:
    """MMLU on the tiny model: the JSON's per-subject counts are those of transformers' model choosing by
    the same log-likelihood rule (batched, right-padded rows of different lengths)."""
    data = mmlu_layout(tmp_path / "mmlu")
    (tmp_path / "results").mkdir()
    out = tmp_path / "results" / "mmlu.json"  # --output-file DIR writes DIR/{task}.json
    assert evaluation.main(["--task", "mmlu", "--task-data-path", str(data), "--evaluation-batch-size", "3",
                            "--output-file", str(tmp_path / "results")] + model_argv(model_dirs)) == 0
    report = json.loads(out.read_text())
    assert report["task"] == "mmlu" and set(report["subjects"]) == set(MMLU_ANSWERS)
    assert "evaluation results:" in capsys.readouterr().out

    model = transformers.AutoModelForCausalLM.from_pretrained(model_dirs["hf"], dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dirs["tok"])
    expected: Dict[str, int] = {}
    for question in tasks.mmlu([str(data)], tasks.EvalOptions()):
        scores = [hf_loglikelihood(model, tokenizer, question.context, c) for c in question.choices]
        expected[question.subject] = expected.get(question.subject, 0) + int(
            max(range(4), key=scores.__getitem__) == question.answer)
    assert {name: entry["correct"] for name, entry in report["subjects"].items()} == expected
    assert report["overall"]["total"] == 7 and sum(expected.values()) == report["overall"]["correct"] > 0


def test_greedy_generator_equals_transformers_generate(tmp_path: Path, model_dirs: Dict[str, str]) -> None:
    """Two prompts of different lengths in one batch: the same new tokens as transformers' greedy generate;
    gsm8k runs end to end through evaluation.py."""
    argv = ["--task", "gsm8k", "--task-data-path", str(gsm8k_layout(tmp_path / "g")),
            "--evaluation-batch-size", "2"] + model_argv(model_dirs)
    loaded = setup_inference(argv, entry="evaluation.py")  # evaluation.py's flags
    from mindspeed_llm.tokenizer import build_tokenizer
    ours = build_tokenizer(loaded.args)
    forward = ModelForward(loaded.model, loaded.state, loaded.args.vocab_size, 512, 0, torch.device("cpu"))
    generated: List[List[int]] = []
    generator = GreedyGenerator(forward, ours.tokenize, lambda ids: generated.append(list(ids)) or "", None, 2)
    prompts = ["the quick brown fox", "Tom has 3 apples and buys 4 . how many apples ?"]
    generator.generate(prompts, 6, ())
    assert len(generated) == 2 and all(len(ids) == 6 for ids in generated)
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dirs["hf"], dtype=torch.float32).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(model_dirs["tok"])
    for prompt, new in zip(prompts, generated):
        ids = tokenizer.encode(prompt, add_special_tokens=False)
        reference = model.generate(torch.tensor([ids]), max_new_tokens=6, do_sample=False, eos_token_id=None,
                                   pad_token_id=0)[0, len(ids):].tolist()
        assert new == reference
    scorer = ModelScorer(forward, ours.tokenize, ours.tokenize, 3)
    requests = [("the quick brown fox", " jumps"), ("Tom has 3 apples", " and buys 4 ."), ("a lazy", " dog"),
                ("a lazy", " fox")]  # the last two share a row
    expected = [hf_loglikelihood(model, tokenizer, context, continuation) for context, continuation in requests]
    assert scorer.loglikelihoods(requests) == pytest.approx(expected, abs=1e-4)  # one right-padded batch
    assert evaluation.main(argv + ["--max-new-tokens", "4", "--output-file", str(tmp_path / "g.json"),
                                   "--prompt-type", "chatml"]) == 0
    assert json.loads((tmp_path / "g.json").read_text())["overall"]["total"] == 2


def exit_code(argv: List[str]) -> int:
    """evaluation.py's exit status (flag errors exit 2 from the parser, benchmark errors return 2)."""
    try:
        return evaluation.main(argv)
    except SystemExit as stop:
        return int(stop.code)


def test_evaluation_py_refusals_are_one_line(tmp_path: Path, model_dirs: Dict[str, str],
                                             capsys: pytest.CaptureFixture) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert exit_code(["--task", "mmlu", "--task-data-path", str(empty)] + model_argv(model_dirs)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "{subject}_test.csv" in err and str(empty) in err
    assert exit_code(["--task", "human_eval", "--task-data-path", str(human_eval_layout(tmp_path / "he"))]
                     + model_argv(model_dirs)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--allow-code-execution" in err
    assert exit_code(["--task", "squad", "--task-data-path", str(empty)] + model_argv(model_dirs)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--task squad" in err and "mmlu" in err
    assert exit_code(["--task", "mmlu", "--task-data-path", str(empty), "--evaluation-batch-size", "0"]
                     + model_argv(model_dirs)) == 2
    assert "--evaluation-batch-size must be at least 1" in capsys.readouterr().err
    for flag, task in (("--chain-of-thought", "mmlu"), ("--allow-code-execution", "gsm8k"),
                       ("--eval-language zh", "boolq")):  # a benchmark flag the task would ignore
        layout = {"mmlu": mmlu_layout, "gsm8k": gsm8k_layout, "boolq": boolq_layout}[task](tmp_path / task)
        assert exit_code(["--task", task, "--task-data-path", str(layout), *flag.split()]
                         + model_argv(model_dirs)) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and f"{flag.split()[0]} applies to --task" in err, err


def test_eval_language_sets_the_exam_wording(tmp_path: Path) -> None:
    english = tasks.mmlu([str(mmlu_layout(tmp_path / "m"))], tasks.EvalOptions())
    chinese = tasks.mmlu([str(mmlu_layout(tmp_path / "m"))], tasks.EvalOptions(language="zh"))
    assert english[0].context.startswith("The following are") and english[0].context.endswith("Answer:")
    assert chinese[0].context.startswith("以下是关于") and chinese[0].context.endswith("答案：")
    assert english[0].choices == [" A", " B", " C", " D"] and chinese[0].choices == ["A", "B", "C", "D"]
    ceval = tasks.ceval([str(ceval_layout(tmp_path / "c"))], tasks.EvalOptions(language="en"))
    assert ceval[0].context.startswith("The following are") and ceval[0].choices[0] == " A"
    native = tasks.ceval([str(ceval_layout(tmp_path / "c"))], tasks.EvalOptions())
    assert native[0].context.startswith("以下是中国关于")


def test_templated_choices_start_the_turn_and_code_prompts_stay_plain(tmp_path: Path) -> None:
    questions = tasks.boolq([str(boolq_layout(tmp_path / "b"))], tasks.EvalOptions())
    scorer = PreferScorer(lambda _, c: c == "yes")
    assert accuracy_report("boolq", judge(questions, scorer, None, 1, strip_continuations=True))["overall"][
        "correct"] == 1
    assert [x for _, x in scorer.requests[:2]] == ["no", "yes"]
    mixed = tasks.human_eval([str(human_eval_layout(tmp_path / "h"))], tasks.EvalOptions(allow_code_execution=True))
    mixed += tasks.gsm8k([str(gsm8k_layout(tmp_path / "g"))], tasks.EvalOptions())
    templated, plain = CannedGenerator(lambda p: "#### 7"), CannedGenerator(lambda p: "    return a + b\n")
    report = accuracy_report("mixed", judge(mixed, None, templated, 8, plain_generator=plain))
    assert [len(prompts) for prompts, _, _ in plain.calls] == [2] and len(templated.calls[0][0]) == 2
    assert report["subjects"]["HumanEval"]["correct"] == 1 and report["subjects"]["gsm8k"]["correct"] == 1


def test_prompt_template_choice(model_dirs: Dict[str, str]) -> None:
    """--prompt-type NAME, else the tokenizer's chat template unless --no-chat-template, else plain text."""
    import argparse
    from mindspeed_llm.evaluation.runner import _encoders, prompt_encoder
    from mindspeed_llm.tokenizer import PretrainedFromHF

    tokenizer = PretrainedFromHF(model_dirs["tok"])
    assert tokenizer.has_chat_template

    def args(prompt_type=None, no_chat_template=False) -> argparse.Namespace:
        return argparse.Namespace(prompt_type=prompt_type, no_chat_template=no_chat_template)

    assert prompt_encoder(args(no_chat_template=True), tokenizer) is None
    assert prompt_encoder(args(), tokenizer).template is None  # the tokenizer's own (hf)
    chatml = prompt_encoder(args("chatml", no_chat_template=True), tokenizer)
    encode, plain = _encoders(tokenizer, chatml)
    assert encode("hi") == tokenizer.tokenize("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert plain("hi") == tokenizer.tokenize("hi")
    tokenizer.tokenizer.chat_template = None
    with pytest.raises(EvaluationError, match="--prompt-type hf"):
        prompt_encoder(args("hf"), tokenizer)


def evaluation_report(argv: List[str]) -> Dict:
    from mindspeed_llm.evaluation.runner import evaluate
    return evaluate(argv)


def tp2_worker(rank: int, world_size: int, runs: List[List[str]]) -> List[Dict]:
    return [evaluation_report(argv) for argv in runs]


def test_tp2_and_sequence_parallel_give_the_tp1_report(tmp_path: Path, model_dirs: Dict[str, str]) -> None:
    """The model converted at TP 2 evaluates MMLU (with and without sequence parallelism) and GSM8K to the
    TP-1 reports, chat template on (one 2-process launch)."""
    from core.launcher import run_distributed
    from tools.convert_ckpt import main as convert_main

    tp2 = str(tmp_path / "mg_tp2")
    assert convert_main(["--load-model-type", "hf", "--save-model-type", "mg", "--load-dir", model_dirs["hf"],
                         "--save-dir", tp2, "--target-tensor-parallel-size", "2"]) == 0
    common = ["--evaluation-batch-size", "2", "--max-new-tokens", "3", "--tokenizer-type", "PretrainedFromHF",
              "--tokenizer-name-or-path", model_dirs["tok"], "--device", "cpu", "--use-checkpoint-args"]
    mmlu = ["--task", "mmlu", "--task-data-path", str(mmlu_layout(tmp_path / "mmlu"))] + common
    gsm8k = ["--task", "gsm8k", "--task-data-path", str(gsm8k_layout(tmp_path / "gsm8k"))] + common
    expected = [evaluation_report(argv + ["--load", model_dirs["mg"]]) for argv in (mmlu, mmlu, gsm8k)]
    at_tp2 = ["--load", tp2, "--tensor-model-parallel-size", "2"]
    runs = [mmlu + at_tp2, mmlu + at_tp2 + ["--sequence-parallel"], gsm8k + at_tp2]
    for reports in run_distributed(2, tp2_worker, runs):
        assert reports == expected
