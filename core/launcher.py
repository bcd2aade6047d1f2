"""The process launcher that tests and benches share.

Run a function on N gloo processes on the CPU and collect what each returns.

    results = run_distributed(4, my_module.worker, arg1, arg2)

``worker(rank, world_size, *args)`` must be a module-level function (it is
imported in the child processes). The children are forked from one
``forkserver`` process that has imported torch and the first launch's worker
module (with what it imports, which is most of the suite) once: a child then
starts in a fraction of a second instead of importing everything again. Each
child starts with the launching process's environment variables and working
directory as they are at the launch, as a spawned one would. Each process has
``torch.distributed`` initialised with gloo and one intra-op thread. The return values (CPU tensors, numbers, dicts) come back in rank
order; an exception in any rank is re-raised here with its traceback. A rank
that dies without one (a C++ abort, a segfault) is reported with the tail of
its stderr, where the C++ message and faulthandler's Python stack land; each
rank's stderr is copied to this process's stderr once the launch ends.
Launch once per test module or world size and check many things per launch:
each launch costs seconds.
"""
from __future__ import annotations

import faulthandler
import io
import multiprocessing
import os
import queue
import socket
import sys
import tempfile
import time
import traceback
from typing import Any, Callable, Dict, List

import torch
import torch.multiprocessing as mp


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _to_bytes(value: Any) -> bytes:
    """Serialise with torch.save: tensors travel by value, not as shared memory that dies with the child."""
    buffer = io.BytesIO()
    torch.save(value, buffer)
    return buffer.getvalue()


def _capture_stderr(path: str) -> None:
    """Send this process's fd 2 (Python and C++ alike) to ``path``; dump the Python stack there on a fatal signal."""
    sys.stderr.flush()
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    faulthandler.enable(file=sys.stderr, all_threads=True)


def _child(rank: int, world_size: int, port: int, fn: Callable, args: tuple, results: Any,
           stderr_path: str, environment: Dict[str, str]) -> None:
    import torch.distributed as dist

    _capture_stderr(stderr_path)
    os.environ.clear()  # the launcher's environment now, not the forkserver's from its start
    os.environ.update(environment)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world_size), LOCAL_RANK="0")
    torch.set_num_threads(1)
    # A spawned child inherits the "spawn" start method; a torchrun rank starts with the platform
    # default. Restore it, so DataLoader workers (--num-workers) start as they do under torchrun.
    multiprocessing.set_start_method(multiprocessing.get_all_start_methods()[0], force=True)
    try:
        dist.init_process_group("gloo", rank=rank, world_size=world_size)
        value = fn(rank, world_size, *args)
        results.put((rank, True, _to_bytes(value)))
    except BaseException:  # report every failure to the parent
        results.put((rank, False, traceback.format_exc()))
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def _stderr_tail(path: str, lines: int = 40) -> str:
    try:
        with open(path, errors="replace") as handle:
            return "".join(handle.readlines()[-lines:])
    except OSError:
        return ""


def _collect(procs: list, results: Any, world_size: int, timeout: float, collected: dict, failures: list,
             stderr_paths: List[str]) -> None:
    """Wait for every rank's result; stop at the first failure or at a child that died silently."""
    deadline = time.monotonic() + timeout
    while len(collected) < world_size and time.monotonic() < deadline:
        try:
            rank, ok, value = results.get(timeout=1.0)
        except queue.Empty:
            dead = [r for r, p in enumerate(procs) if p.exitcode not in (None, 0) and r not in collected]
            if dead:
                failures.append(f"rank(s) {dead} exited with code(s) {[procs[r].exitcode for r in dead]}")
                time.sleep(1.0)  # let a dying rank's last words reach its stderr file
                failures.extend(f"--- rank {r} stderr (last lines) ---\n{_stderr_tail(stderr_paths[r])}" for r in dead)
                return
            continue
        if not ok:
            failures.append(f"rank {rank} failed:\n{value}")
            return
        collected[rank] = torch.load(io.BytesIO(value), weights_only=False)
    if len(collected) < world_size:
        failures.append(f"timed out after {timeout}s waiting for {world_size - len(collected)} rank(s)")


def _replay(path: str) -> None:
    """Copy a rank's stderr file to this process's stderr (where pytest or the terminal shows it)."""
    try:
        with open(path, errors="replace") as handle:
            sys.stderr.write(handle.read())
    except OSError:
        pass


def _forkserver_context(fn: Callable) -> Any:
    """The forkserver context; the server, started at the first launch, preloads torch and ``fn``'s module."""
    ctx = mp.get_context("forkserver")
    preload = ["torch", "torch.distributed"]
    if fn.__module__ != "__main__":  # a script's own module is imported by its name in the children
        preload.append(fn.__module__)
    ctx.set_forkserver_preload(preload)  # no effect once the server runs
    return ctx


def run_distributed(world_size: int, fn: Callable, *args: Any, timeout: float = 600.0) -> List[Any]:
    """Run ``fn(rank, world_size, *args)`` on ``world_size`` processes; return the values by rank."""
    ctx = _forkserver_context(fn)
    results = ctx.Queue()
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="launch_stderr_") as logs:
        stderr_paths = [os.path.join(logs, f"rank{r}.stderr") for r in range(world_size)]
        environment = dict(os.environ)
        procs = [ctx.Process(target=_child,
                             args=(r, world_size, port, fn, args, results, stderr_paths[r], environment))
                 for r in range(world_size)]
        for proc in procs:
            proc.start()
        collected, failures = {}, []
        try:
            _collect(procs, results, world_size, timeout, collected, failures, stderr_paths)
        finally:
            for proc in procs:
                proc.join(timeout=5 if failures else 60)
                if proc.is_alive():
                    proc.terminate()
            for path in stderr_paths:
                _replay(path)
    if failures:
        raise RuntimeError("\n".join(failures))
    return [collected[r] for r in range(world_size)]
