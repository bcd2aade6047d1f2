"""HumanEval's programs run in a fresh interpreter without network access, with a timeout.

Each program (prompt + completion + the task's ``test`` + ``check(entry_point)``) runs as
``python -I -c PRELUDE+program`` in a temporary directory with a minimal environment. The prelude
replaces the socket module's connecting functions with ones that raise, so the code cannot reach the
network; the process is killed after ``timeout`` seconds. A program passes when it exits 0.
This runs untrusted code: evaluation.py only calls it with ``--allow-code-execution``.
"""
from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Dict, Optional

NO_NETWORK_PRELUDE = '''
import socket as _socket
def _no_network(*args, **kwargs):
    raise OSError("network access is disabled during code evaluation")
_socket.socket = _no_network
_socket.create_connection = _no_network
_socket.getaddrinfo = _no_network
_socket.socketpair = _no_network
del _socket
'''


@dataclass
class ExecutionResult:
    passed: bool
    detail: str  # "passed", "timed out", or the last line of stderr


def human_eval_program(task: Dict[str, str], completion: str) -> str:
    """The program that checks ``completion`` against the task's tests: the prompt continued by the
    completion, or, when the completion holds a fenced code block that defines the entry point (an
    instruction-tuned model's answer), the prompt followed by that code (its definition wins)."""
    code = fenced_code(completion)
    if code is not None and f"def {task['entry_point']}(" in code:
        body = f"{task['prompt']}\n    pass\n\n{code}"
    else:
        body = task["prompt"] + completion
    return f"{body}\n\n{task['test']}\n\ncheck({task['entry_point']})\n"


def fenced_code(text: str) -> Optional[str]:
    """The first ```-fenced block of ``text`` (its language tag dropped), or None."""
    match = re.search(r"```[\w+-]*\n(.*?)(?:```|$)", text, re.DOTALL)
    return match.group(1) if match else None


def run_program(program: str, timeout: float = 10.0) -> ExecutionResult:
    """Run ``program`` in a fresh isolated interpreter (no site dirs, no network, a timeout)."""
    with tempfile.TemporaryDirectory() as workdir:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", NO_NETWORK_PRELUDE + program], cwd=workdir,
                                  env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}, capture_output=True,
                                  text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return ExecutionResult(False, "timed out")
    if done.returncode == 0:
        return ExecutionResult(True, "passed")
    lines = done.stderr.strip().splitlines()
    return ExecutionResult(False, lines[-1] if lines else f"exit status {done.returncode}")
