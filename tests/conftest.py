"""How the suite is spread over pytest-xdist workers (``scripts/test.sh``: ``pytest -n 2 --dist loadgroup``).

The tests of one file share a worker, so a module-scoped fixture (one launch per world size, one trained
model) runs once. The files in :data:`SPREAD_FILES` hold many independent tests with nothing expensive to
share (each recipe check is its own subprocess): each of their tests may go to any worker. The files in
:data:`LONG_FILES` are collected first, then the end-to-end recipe runs of the spread files, so that none
of them starts last and runs alone at the end.
Without xdist (``-n 0``, or plain ``pytest``) the marks do nothing and only the order changes.
"""
from __future__ import annotations

from typing import Dict, List

import pytest

SPREAD_FILES = ("tests/e2e/test_recipes.py",)
# the files of several minutes on 2 cores, longest first
LONG_FILES = ("tests/e2e/test_posttrain_walkthrough.py", "tests/unit/test_benches.py",
              "tests/models/test_zoo_training.py", "tests/models/test_generation.py", "tests/e2e/test_quickstart.py",
              "tests/distributed/test_dist_checkpoint.py", "tests/distributed/test_context_parallel.py",
              "tests/e2e/test_grpo_walkthrough.py", "tests/models/test_zoo_parity.py",
              "tests/distributed/test_recurrent_context_parallel.py", "tests/models/test_zoo_roundtrip.py",
              "tests/distributed/test_pipeline_equivalence.py")


def _file(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the groups into the node ids
def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    for item in items:
        group = item.nodeid if _file(item) in SPREAD_FILES else _file(item)
        item.add_marker(pytest.mark.xdist_group(group))
    rank = {name: position for position, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: _rank(item, rank))  # stable: each file keeps its order


def _rank(item: pytest.Item, rank: Dict[str, int]) -> float:
    """LONG_FILES by their position, then a spread file's end-to-end runs (its ``test_smoke_*_recipe_*``
    tests, each a training or conversion of seconds), then the rest, so no slow test is left for the end."""
    if _file(item) in SPREAD_FILES and item.name.startswith("test_smoke_") and "_recipe_" in item.name:
        return len(LONG_FILES) - 0.5
    return rank.get(_file(item), len(LONG_FILES))
