"""Benchmarks as questions: the readers' records -> prompts, choices or references, and how each is judged.

A :class:`ChoiceQuestion` is scored by log-likelihood: the choice whose continuation the model finds most
likely after the context is its answer (MMLU, CMMLU, C-Eval, BoolQ, HellaSwag, AGIEval's choice tasks).
An :class:`OpenQuestion` is answered by generation and judged by a function of the text (GSM8K, BBH,
AGIEval's cloze tasks, HumanEval).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

from mindspeed_llm.evaluation import answers, readers
from mindspeed_llm.evaluation.code_execution import human_eval_program, run_program
from mindspeed_llm.evaluation.errors import EvaluationError

FEW_SHOT = 5  # MMLU's (and CMMLU's, C-Eval's) standard number of dev examples
GSM8K_SHOTS = 4
CODE_STOPS = ("\ndef ", "\nclass ", "\nif __name__", "\nprint(", "\n#")


@dataclass
class EvalOptions:
    chain_of_thought: bool = False
    max_eval_samples: int = 0  # 0: every sample
    allow_code_execution: bool = False
    code_timeout: float = 10.0
    language: Optional[str] = None  # mmlu, cmmlu, ceval: "en" or "zh" exam wording (None: the benchmark's own)


@dataclass
class ChoiceQuestion:
    subject: str
    context: str
    choices: List[str]  # continuations scored after the context
    answer: int  # the right choice's index
    per_character: bool = False  # compare log-likelihoods per character of the choice (HellaSwag's acc_norm)


@dataclass
class OpenQuestion:
    subject: str
    prompt: str
    stop: Sequence[str]
    judge: Callable[[str], bool]  # generated text -> correct
    plain: bool = False  # never wrapped in a chat template (code to complete)


Question = Union[ChoiceQuestion, OpenQuestion]


def _first(records: List[Any], options: EvalOptions) -> List[Any]:
    return records[:options.max_eval_samples] if options.max_eval_samples else records


def _choice_block(record: Dict[str, Any], answer_word: str) -> str:
    options = "".join(f"\n{letter}. {text}" for letter, text in zip(readers.LETTERS, record["choices"]))
    return f"{record['question']}{options}\n{answer_word}"


def _exam_questions(subjects: Dict[str, Dict[str, List[Dict[str, Any]]]], options: EvalOptions, header: str,
                    answer_word: str, space: str) -> List[Question]:
    """MMLU-style exams: a header, up to five solved dev questions, the question, the answer letter."""
    questions: List[Question] = []
    for subject, splits in subjects.items():
        shots = "".join(f"{_choice_block(r, answer_word)}{space}{r['answer']}\n\n" for r in splits["dev"][:FEW_SHOT])
        intro = header.format(subject=subject.replace("_", " "))
        for record in _first(splits["test"], options):
            questions.append(ChoiceQuestion(subject, intro + shots + _choice_block(record, answer_word),
                                            [space + letter for letter in "ABCD"], "ABCD".index(record["answer"])))
    return questions


ENGLISH_EXAM = ("The following are multiple choice questions (with answers) about {subject}.\n\n", "Answer:", " ")
# the exams' own wording: (header, answer cue, space before the letter) per language
EXAM_WORDING = {
    "mmlu": {"en": ENGLISH_EXAM, "zh": ("以下是关于{subject}的单项选择题，请直接给出正确答案的选项。\n\n", "答案：", "")},
    "cmmlu": {"en": ENGLISH_EXAM, "zh": ("以下是关于{subject}的单项选择题，请直接给出正确答案的选项。\n\n", "答案：", "")},
    "ceval": {"en": ENGLISH_EXAM, "zh": ("以下是中国关于{subject}考试的单项选择题，请选出其中的正确答案。\n\n", "答案：", "")},
}
NATIVE_LANGUAGE = {"mmlu": "en", "cmmlu": "zh", "ceval": "zh"}


def _exam(name: str, subjects: Dict[str, Dict[str, List[Dict[str, Any]]]], options: EvalOptions) -> List[Question]:
    """An MMLU-style exam in ``--eval-language`` (default: the benchmark's own)."""
    header, cue, space = EXAM_WORDING[name][options.language or NATIVE_LANGUAGE[name]]
    return _exam_questions(subjects, options, header, cue, space)


def mmlu(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    return _exam("mmlu", readers.read_mmlu(paths), options)


def cmmlu(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    return _exam("cmmlu", readers.read_cmmlu(paths), options)


def ceval(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    return _exam("ceval", readers.read_ceval(paths), options)


def boolq(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    return [ChoiceQuestion(subject, f"{r['passage']}\nQuestion: {r['question'].rstrip('?')}?\nAnswer:",
                           [" no", " yes"], int(r["answer"]))
            for subject, records in readers.read_boolq(paths).items() for r in _first(records, options)]


def hellaswag(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    """The context and each ending; the ending most likely per character wins (the usual acc_norm)."""
    def clean(text: str) -> str:
        return text.replace(" [title]", ". ").replace("[header]", "").strip()

    questions: List[Question] = []
    for subject, records in readers.read_hellaswag(paths).items():
        for r in _first(records, options):
            label = f"{r['activity_label']}: " if r.get("activity_label") else ""
            questions.append(ChoiceQuestion(subject, label + clean(r["ctx"]),
                                            [" " + clean(e) for e in r["endings"]], r["label"], per_character=True))
    return questions


def agieval(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    """Single-answer tasks with options by log-likelihood; cloze and multi-answer ones by generation."""
    questions: List[Question] = []
    for subject, records in readers.read_agieval(paths).items():
        for r in _first(records, options):
            passage = f"{r['passage']}\n" if r.get("passage") else ""
            choices = r.get("options") or []
            label = r.get("label")
            if choices and isinstance(label, str) and len(label) == 1 and label in readers.LETTERS[:len(choices)]:
                context = f"{passage}Question: {r['question']}\nChoices: {' '.join(choices)}\nAnswer:"
                questions.append(ChoiceQuestion(subject, context, [" " + c for c in readers.LETTERS[:len(choices)]],
                                                readers.LETTERS.index(label)))
            else:
                listed = f"\nChoices: {' '.join(choices)}" if choices else ""
                prompt = f"{passage}Question: {r['question']}{listed}\nAnswer:"
                questions.append(OpenQuestion(subject, prompt, ("\n",), _agieval_judge(label or r.get("answer"))))
    return questions


def _agieval_judge(reference: Any) -> Callable[[str], bool]:
    if isinstance(reference, list):  # several letters: the set of letters on the first line
        wanted = set(reference)
        return lambda text: {c for c in text.strip().split("\n")[0] if c in readers.LETTERS} == wanted
    wanted_text = str(reference).strip().strip("$").strip().lower()
    return lambda text: text.strip().split("\n")[0].strip().strip("$").strip().rstrip(".").lower() == wanted_text


def gsm8k(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    """Up to four solved train.jsonl problems (when present), then the question."""
    data = readers.read_gsm8k(paths)
    cot = options.chain_of_thought

    def solution(answer: str) -> str:
        return answer.strip() if cot else f"#### {answers.gsm8k_reference(answer)}"

    shots = "".join(f"Question: {r['question']}\nAnswer: {solution(r['answer'])}\n\n"
                    for r in data["train"][:GSM8K_SHOTS])
    cue = " Let's think step by step." if cot else ""
    return [OpenQuestion("gsm8k", f"{shots}Question: {r['question']}\nAnswer:{cue}", ("\n\nQuestion:", "Question:"),
                         _number_judge(answers.gsm8k_reference(r["answer"])))
            for r in _first(data["gsm8k"], options)]


def _number_judge(reference: str) -> Callable[[str], bool]:
    return lambda text: answers.extract_gsm8k_answer(text) == reference


def bbh(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    """Zero-shot ``Q: ... A:``; with --chain-of-thought the published cot-prompts exemplars and a step cue."""
    cot = options.chain_of_thought
    questions: List[Question] = []
    for subject, records in readers.read_bbh(paths).items():
        for r in _first(records, options):
            exemplars = f"{r['cot_prompt']}\n\n" if cot and r["cot_prompt"] else ""
            cue = " Let's think step by step." if cot else ""
            target = answers.normalize_target(r["target"])
            questions.append(OpenQuestion(subject, f"{exemplars}Q: {r['input']}\nA:{cue}", ("\n\nQ:", "Q:"),
                                          lambda text, t=target: answers.extract_bbh_answer(text, cot) == t))
    return questions


def human_eval(paths: Sequence[str], options: EvalOptions) -> List[Question]:
    """The prompt (never chat-wrapped: it is code to complete) is completed; the program (prompt + completion +
    tests) must exit 0 (pass@1, greedy)."""
    if not options.allow_code_execution:
        raise EvaluationError(REFUSE_CODE)
    return [OpenQuestion(subject, task["prompt"], CODE_STOPS, _code_judge(task, options.code_timeout), plain=True)
            for subject, tasks in readers.read_human_eval(paths).items() for task in _first(tasks, options)]


REFUSE_CODE = ("human_eval runs the model's generated code: add --allow-code-execution to allow it (each program "
               "runs in a fresh interpreter without network, with a timeout)")


def _code_judge(task: Dict[str, Any], timeout: float) -> Callable[[str], bool]:
    return lambda completion: run_program(human_eval_program(task, completion), timeout).passed


BUILDERS: Dict[str, Callable[[Sequence[str], EvalOptions], List[Question]]] = {
    "mmlu": mmlu, "cmmlu": cmmlu, "ceval": ceval, "gsm8k": gsm8k, "boolq": boolq, "bbh": bbh,
    "agieval": agieval, "hellaswag": hellaswag, "human_eval": human_eval,
}
