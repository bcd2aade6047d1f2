"""Print the max-abs logit difference against transformers at TP1 and TP2 for every parity case."""
import os, sys, tempfile
sys.path.insert(0, os.getcwd())
import torch
from core.launcher import run_distributed
from core.models.gpt_model import layout_state
from core.parallel_state import initialize
from tests.models.test_hf_parity import our_logits
from tests.models import test_hf_parity as hfp
from tests.models.test_zoo_parity import CASES, load_ours, prepare


def worker(rank, world, jobs):
    state = initialize(tp=world)
    return {name: our_logits(load_ours(mg, state), ids) for name, mg, ids in jobs}


if __name__ == "__main__":
    root = tempfile.mkdtemp()
    rows, jobs, expected = {}, [], {}
    for name in sorted(CASES):
        mg1, ids, exp = prepare(name, root, 1)
        rows[name] = [(our_logits(load_ours(mg1, layout_state(1)), ids) - exp).abs().max().item()]
        mg2, ids2, _ = prepare(name, root, 2)
        jobs.append((name, mg2, ids2)); expected[name] = exp
    res = run_distributed(2, worker, jobs)[0]
    for name in sorted(rows):
        rows[name].append((res[name] - expected[name]).abs().max().item())
        print(f"| {name} | {rows[name][0]:.1e} | {rows[name][1]:.1e} |")
