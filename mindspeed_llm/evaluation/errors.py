"""The one error type of evaluation: its message is the whole, one-line explanation (with the fix)."""
from __future__ import annotations


class EvaluationError(ValueError):
    """A bad benchmark layout or evaluation setting; evaluation.py prints ``error: <message>`` and exits 2."""
