"""evaluation.py's machinery: benchmark readers, prompts, scoring by log-likelihood or generation, results.

- ``readers.py``: each benchmark's published file layout -> plain records (one-line error on a missing file)
- ``tasks.py``: records -> questions (prompts, choices, references) and the task's way of scoring them
- ``scoring.py``: the ``Scorer`` and ``Generator`` protocols and their implementations over our model
- ``answers.py``: answer extraction (GSM8K ``####`` / ``\\boxed{}`` / last number, BBH targets)
- ``code_execution.py``: HumanEval programs run in a fresh interpreter without network, with a timeout
- ``results.py``: per-subject and overall accuracy, printed and written as JSON
- ``runner.py``: the evaluation entry's task for the trainer's loader, and the run itself
"""
