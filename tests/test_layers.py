"""The package's layers: each imports only from the layers below it, and no import cycle joins two modules.

Imports are read from the source, function-level ones included (an import inside a function still ties the two
modules together). ``from pkg import sub`` imports both ``pkg`` (its ``__init__`` runs) and the module ``pkg.sub``;
``from pkg import name`` imports ``pkg``. Nothing is imported to check this, so the test needs neither torch nor a
model.
"""

from __future__ import annotations

import ast
from pathlib import Path

LIB = Path(__file__).resolve().parent.parent / "lib"

# From the bottom up. A package imports only from its own layer or one below it.
LAYERS = (
    "core",         # registry, settings checks, intervals, progress, quiet warnings, threads, atomic files, disk
    "config",       # the parameter schema and each mechanism's settings dataclass with its checks
    "data",         # question rows, the synthetic world, loaders, benchmarks, difficulty labels, tokenized items
    "protocols",    # the four papers' tags, prompts and parsers
    "retrieval",    # the retriever contract, BM25, dense, HTTP and web clients, the service
    "metrics",      # EM / F1 / cover-EM and the papers' scoring variants
    "rollout",      # the search rollout engine and its turn generators
    "models",       # policy models: bundled, any hub id or folder, tiny test models
    "judge",        # LLM-as-judge accuracy (a model reads the answer)
    "rewards",      # reward functions with TRL's signature and the papers' presets
    "trainer",      # SearchGRPOTrainer and its mechanisms
    "evaluation",   # evaluation, baselines, RSTool, per-type and paper-layout tables
    "sft",          # the cold start, including rejection sampling through evaluation's rollout loop
    "runs",         # run folders: status, ownership, provenance, history, checkpoints, slim copies
    "analysis",     # reading finished run folders: seeds, pooled intervals, learning checks, plots
    "experiments",  # what a notebook calls: Experiment, ablations, the eval suite, the runner, headless training
)
TOP = len(LAYERS)  # `searchrl` itself and the command modules kept for `python -m searchrl.<name>`

# Imports that still point upward. The list may only shrink: an edge missing from the code fails the test as surely as
# a new one does. The schema checks the names picked from higher layers' registries without importing them
# (searchrl.config.names), so none is left.
KNOWN_UPWARD: set[tuple[str, str]] = set()


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((LIB / "searchrl").rglob("*.py")):
        name = ".".join(path.relative_to(LIB).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


def _imports(modules: dict[str, Path]) -> dict[str, set[str]]:
    """{module: the searchrl modules it imports anywhere in its source}."""
    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = name.split(".")[: len(name.split(".")) - node.level + (1 if is_package else 0)]
                    base = ".".join([*parts, *([node.module] if node.module else [])])
                # `from pkg import sub` runs pkg/__init__.py as well: both count.
                targets |= {sub for sub in (f"{base}.{alias.name}" for alias in node.names) if sub in modules}
                targets.add(base)
        edges[name] = {t for t in map(owner, (t for t in targets if t.startswith("searchrl"))) if t and t != name}
    return edges


def _layer(module: str) -> int:
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in LAYERS and not module.endswith(".__main__"):
        return LAYERS.index(parts[1])
    return TOP


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root, root_children in edges.items():
        if root in index:
            continue
        work = [(root, iter(sorted(root_children)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_every_package_of_the_library_has_a_layer():
    packages = {path.parent.name for path in (LIB / "searchrl").glob("*/__init__.py")}
    assert packages == set(LAYERS), f"packages without a layer: {packages - set(LAYERS)}; layers without a package: {set(LAYERS) - packages}"


def test_each_layer_imports_only_from_the_layers_below_it():
    edges = _imports(_modules())
    upward = {(m, t) for m, targets in edges.items() for t in targets if _layer(t) > _layer(m)}
    new = sorted(upward - KNOWN_UPWARD)
    assert not new, "imports from a higher layer:\n" + "\n".join(f"  {m} -> {t}" for m, t in new)
    gone = sorted(KNOWN_UPWARD - upward)
    assert not gone, "no longer imported, so drop them from KNOWN_UPWARD:\n" + "\n".join(f"  {m} -> {t}" for m, t in gone)


def test_no_import_cycle_joins_two_modules_below_the_schema_checks():
    edges = _imports(_modules())
    # The known upward edges are the only ones allowed to close a loop, and they are counted apart above.
    without_known = {m: {t for t in targets if (m, t) not in KNOWN_UPWARD} for m, targets in edges.items()}
    cycles = _cycles(without_known)
    assert not cycles, "import cycles:\n" + "\n".join("  " + " <-> ".join(c) for c in cycles)


def test_the_contract_reader_sees_function_level_imports_and_cycles():
    """The reader itself: a function-level import counts, and a loop through one is found."""
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
    modules = _modules()
    edges = _imports(modules)
    # runs.folder imports ownership inside current_run_dir only: the reader must see it.
    assert "searchrl.runs.ownership" in edges["searchrl.runs.folder"]
