"""The import structure of ``core/`` and ``mindspeed_llm/``, read statically, and where devices are named.

Every ``import`` is read with ``ast``, also those inside functions and under ``if TYPE_CHECKING``: a deferred
import hides a dependency from the reader, it does not remove it. ``from pkg import name`` depends on the
submodule ``pkg.name`` when there is one, else on ``pkg``; importing ``a.b.c`` also runs the package
``a.b`` (its ``__init__``), except where the importer sits inside that package already.

The tests fail on

- an import cycle between modules;
- a folder loop: two of the units below importing each other, directly or around a longer loop. A unit is
  a folder directly under ``core/`` or ``mindspeed_llm/`` (with its subfolders) or a module there;
- an upward import inside core: a unit imports only units of a lower layer of :data:`CORE_LAYERS`;
- a device name (``"cuda"``, ``"npu"``, ``torch.cuda``, ``torch_npu``) outside ``core/device.py``.

Core's layers, lowest first: leaves that know nothing of the others (the device, timers, the fused-kernel
dispatch, the launcher); the memory probe (which asks the device for its allocator); the process groups; tensor parallelism (mappings, parallel layers, the loss);
what builds on those without knowing a model (pipeline schedules, datasets, the layout-independent
checkpoint format, NF4 quantisation); checkpoint files; the transformer's layers and block; the models;
data-parallel wrapping (DDP buckets, FSDP); the optimizers that step those wrappers; and on top the object
a trainer holds, models with their optimizer and checkpoint state (``core/data_parallel.py``).
"""
from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from collections import defaultdict
from typing import Dict, Iterator, List, Set, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGES = ("core", "mindspeed_llm")

CORE_LAYERS: Tuple[Tuple[str, ...], ...] = (
    ("core", "core.device", "core.timers", "core.fused", "core.launcher"),
    ("core.memory_probe",),
    ("core.parallel_state",),
    ("core.tensor_parallel",),
    ("core.pipeline_parallel", "core.datasets", "core.dist_checkpointing", "core.quantization"),
    ("core.checkpointing",),
    ("core.transformer",),
    ("core.models",),
    ("core.distributed",),
    ("core.optimizer",),
    ("core.data_parallel",),
)

# No allowance is left: every import follows the layers (an entry here would name one edge and its reason).
ALLOWED_IMPORTS: Set[Tuple[str, str]] = set()

Graph = Dict[str, Set[str]]


def module_files(root: str = REPO) -> Dict[str, str]:
    """Dotted module name -> file, for every ``.py`` under the packages (a package is its ``__init__``)."""
    found = {}
    for package in PACKAGES:
        for directory, _, files in os.walk(os.path.join(root, package)):
            for name in files:
                if name.endswith(".py"):
                    path = os.path.join(directory, name)
                    dotted = os.path.relpath(path, root)[:-3].replace(os.sep, ".")
                    found[dotted[:-len(".__init__")] if dotted.endswith(".__init__") else dotted] = path
    return found


def _known(name: str, modules: Dict[str, str]) -> str:
    """The longest prefix of ``name`` that is one of ``modules`` ('' when none: outside the packages)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def imported_names(module: str, path: str) -> Iterator[str]:
    """Every dotted name ``module`` imports (``from a import b`` gives ``a.b``; relative imports resolved)."""
    with open(path, encoding="utf-8") as source:
        tree = ast.parse(source.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}" if base else package
            yield base
            yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(modules: Dict[str, str]) -> Graph:
    """Module -> the modules it imports, with the packages whose ``__init__`` those imports run."""
    graph: Graph = defaultdict(set)
    for module, path in modules.items():
        for name in imported_names(module, path):
            target = _known(name, modules)
            parts = target.split(".")
            for depth in range(1, len(parts) + 1):
                step = ".".join(parts[:depth])
                if step in modules and step != module and not module.startswith(step + "."):
                    graph[module].add(step)
    for module in list(graph):
        graph[module] = {target for target in graph[module] if (module, target) not in ALLOWED_IMPORTS}
    return graph


def loops(graph: Graph) -> List[List[str]]:
    """The strongly connected parts of ``graph`` with more than one node (Tarjan's algorithm, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    for start in sorted(set(graph) | {t for targets in graph.values() for t in targets}):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    part = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        part.append(member)
                        if member == node:
                            break
                    if len(part) > 1:
                        found.append(sorted(part))
            elif target not in index:
                index[target] = low[target] = len(index)
                stack.append(target)
                on_stack.add(target)
                work.append((target, iter(sorted(graph.get(target, ())))))
            elif target in on_stack:
                low[node] = min(low[node], index[target])
    return found


def unit(module: str) -> str:
    """The folder (or top-level module) of ``module``: ``core.transformer.moe.router`` -> ``core.transformer``."""
    return ".".join(module.split(".")[:2])


def unit_graph(graph: Graph) -> Graph:
    units: Graph = defaultdict(set)
    for module, targets in graph.items():
        units[unit(module)].update(unit(t) for t in targets if unit(t) != unit(module))
    return units


def _edges_between(graph: Graph, part: List[str]) -> List[str]:
    return sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                  if unit(m) in part and unit(t) in part and unit(m) != unit(t))


def test_no_import_cycle():
    graph = import_graph(module_files())
    cycles = loops(graph)
    assert not cycles, "import cycles between modules:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_no_folder_loop():
    graph = import_graph(module_files())
    found = loops(unit_graph(graph))
    assert not found, "folders that import each other: " + "; ".join(
        f"{' <-> '.join(part)} through {_edges_between(graph, part)}" for part in found)


def core_layer(name: str) -> int:
    for level, names in enumerate(CORE_LAYERS):
        if name in names:
            return level
    raise AssertionError(f"{name} is in no layer of CORE_LAYERS (tests/unit/test_layering.py): place it there")


def upward_imports(graph: Graph) -> List[str]:
    """``a -> b`` inside core where ``b``'s unit is not in a lower layer than ``a``'s; core -> the suite."""
    found = []
    for module, targets in sorted(graph.items()):
        if not module.startswith("core"):
            continue
        explicit = [t for t in sorted(targets) if not any(other.startswith(t + ".") for other in targets)]
        for target in explicit:  # a package whose __init__ runs only on the way to its module is not listed
            if not target.startswith("core"):
                found.append(f"{module} -> {target} (core imports nothing of the suite)")
            elif unit(target) != unit(module) and core_layer(unit(target)) >= core_layer(unit(module)):
                found.append(f"{module} -> {target}")
    return found


def test_every_core_folder_has_a_layer():
    for module in module_files():
        if module.startswith("core"):
            core_layer(unit(module))


def test_core_imports_only_downward():
    found = upward_imports(import_graph(module_files()))
    assert not found, "imports against core's layer order (CORE_LAYERS):\n" + "\n".join(found)


# Device names in code and strings (comments are free): the words cuda / npu (also as parts of a name, as in
# ``_npu_kernel``), torch.cuda and torch_npu. Prose may name the hardware (CUDA, NPU, Ascend).
DEVICE_NAME = re.compile(r"(?<![A-Za-z0-9])(cuda|npu)(?![A-Za-z0-9])|torch_npu|torch\.cuda|torch\.npu")
DEVICE_MODULE = os.path.join("core", "device.py")


def device_names(path: str) -> List[Tuple[int, str]]:
    """``(line, text)`` of each device name in ``path``'s code and strings (comments skipped)."""
    with open(path, encoding="utf-8") as source:
        tokens = list(tokenize.generate_tokens(io.StringIO(source.read()).readline))
    hits = []
    for token in tokens:
        if token.type == tokenize.COMMENT:
            continue
        for offset, line in enumerate(token.string.splitlines()):
            if DEVICE_NAME.search(line):
                hits.append((token.start[0] + offset, line.strip()[:100]))
    return hits


def device_name_hits(root: str = REPO) -> List[str]:
    found = []
    for module, path in sorted(module_files(root).items()):
        if os.path.relpath(path, root) == DEVICE_MODULE:
            continue
        found.extend(f"{os.path.relpath(path, root)}:{line}: {text}" for line, text in device_names(path))
    return found


def test_devices_are_named_only_in_core_device():
    found = device_name_hits()
    assert not found, "device names outside core/device.py (ask core.device instead):\n" + "\n".join(found)


def test_the_checks_see_what_they_look_for(tmp_path):
    """A planted cycle, upward import and device name are found (the walk reads deferred imports too)."""
    for folder in ("core/tensor_parallel", "core/transformer", "mindspeed_llm"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "core" / "__init__.py").write_text("")
    (tmp_path / "core/tensor_parallel/low.py").write_text("def f():\n    from core.transformer import high\n")
    (tmp_path / "core/transformer/high.py").write_text("import core.tensor_parallel.low\nx = 'npu'\n")
    modules = module_files(str(tmp_path))
    graph = import_graph(modules)
    assert loops(graph) == [["core.tensor_parallel.low", "core.transformer.high"]]
    assert loops(unit_graph(graph)) == [["core.tensor_parallel", "core.transformer"]]
    assert upward_imports(graph) == ["core.tensor_parallel.low -> core.transformer.high"]
    assert device_name_hits(str(tmp_path)) == ["core/transformer/high.py:2: 'npu'"]
