"""HumanEval's programs run in a fresh interpreter without network, new processes or file writes, with a timeout.

Each program (prompt + completion + the task's ``test`` + ``check(entry_point)``) runs as
``python -I -c PRELUDE+program`` in a temporary directory with a minimal environment. Before the program:

- operating-system limits (POSIX ``setrlimit`` in the child): no file may grow past 0 bytes
  (``RLIMIT_FSIZE``), CPU seconds and address space are capped (``RLIMIT_CPU`` = the timeout,
  ``RLIMIT_AS`` = ``MEMORY_LIMIT_BYTES``), no core dumps;
- the prelude replaces, with functions that raise ``PermissionError``: the socket module's connecting
  functions (no network), process creation and signalling (``os.system``, ``os.popen``, ``os.fork``,
  ``os.exec*``, ``os.spawn*``, ``os.kill``, ``subprocess.Popen``, ...), file-system changes (``os.remove``,
  ``os.rename``, ``os.mkdir``, ``os.chmod``, ``shutil.rmtree``, ...) and ``open`` in any mode but reading.

The process is killed after ``timeout`` seconds. A program passes when it exits 0. These guards stop a model's
accidents (a stray ``rm``, a write, a fork bomb), not an adversary: Python code can undo its own patches
(``ctypes``, ``importlib.reload``). This runs untrusted code: evaluation.py only calls it with
``--allow-code-execution``; run it in a container when the model is not yours.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from typing import Dict, Optional

MEMORY_LIMIT_BYTES = 4 << 30
GUARD_PRELUDE = '''
def _install_guards():
    import builtins, os, shutil, socket, subprocess

    def refuse(what):
        def refused(*args, **kwargs):
            raise PermissionError(f"{what} is disabled during code evaluation")
        return refused

    for name in ("socket", "create_connection", "getaddrinfo", "socketpair"):
        setattr(socket, name, refuse("network access"))
    for name in ("system", "popen", "fork", "forkpty", "kill", "killpg", "execv", "execve", "execl", "execle",
                 "execlp", "execlpe", "execvp", "execvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe", "spawnv",
                 "spawnve", "spawnvp", "spawnvpe", "posix_spawn", "posix_spawnp"):
        if hasattr(os, name):
            setattr(os, name, refuse("creating or signalling processes"))
    for name in ("Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput"):
        setattr(subprocess, name, refuse("creating processes"))
    for name in ("remove", "unlink", "rmdir", "removedirs", "rename", "renames", "replace", "mkdir", "makedirs",
                 "chmod", "chown", "lchown", "truncate", "ftruncate", "link", "symlink", "chdir", "putenv"):
        if hasattr(os, name):
            setattr(os, name, refuse("changing the file system"))
    for name in ("rmtree", "move", "copy", "copy2", "copyfile", "copytree", "chown"):
        setattr(shutil, name, refuse("changing the file system"))
    read_only = builtins.open

    def open_for_reading(file, mode="r", *args, **kwargs):
        if any(flag in mode for flag in "wax+"):
            raise PermissionError("writing files is disabled during code evaluation")
        return read_only(file, mode, *args, **kwargs)

    builtins.open = open_for_reading


_install_guards()
del _install_guards
'''


def _limit_resources(timeout: float) -> None:
    """In the child, before it runs: no file writes, capped CPU time and memory, no core files."""
    import resource

    seconds = max(int(timeout) + 1, 1)
    for limit, value in ((resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_CPU, seconds),
                         (resource.RLIMIT_AS, MEMORY_LIMIT_BYTES), (resource.RLIMIT_CORE, 0)):
        try:
            resource.setrlimit(limit, (value, value))
        except (ValueError, OSError):  # a limit this system will not lower keeps its value
            pass


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
    """Run ``program`` in a fresh isolated interpreter (no site dirs, the guards above, a timeout)."""
    with tempfile.TemporaryDirectory() as workdir:
        try:
            done = subprocess.run([sys.executable, "-I", "-c", GUARD_PRELUDE + program], cwd=workdir,
                                  env={"PATH": "/usr/bin:/bin", "PYTHONHASHSEED": "0"}, capture_output=True,
                                  text=True, timeout=timeout,
                                  preexec_fn=(lambda: _limit_resources(timeout)) if os.name == "posix" else None)
        except subprocess.TimeoutExpired:
            return ExecutionResult(False, "timed out")
    if done.returncode == 0:
        return ExecutionResult(True, "passed")
    lines = done.stderr.strip().splitlines()
    return ExecutionResult(False, lines[-1] if lines else f"exit status {done.returncode}")
