"""The autoload package's modules import one way: each only imports modules below it, also inside functions, so
that no import order (the one inside `import torch` included) can find a module half-initialised. `_loader` is the
composition root that wires the ones below it together."""

from __future__ import annotations

import ast
from pathlib import Path

import openreg

PACKAGE = Path(openreg.__file__).parent
# Lowest first; a module may import only modules of a lower rank.
RANKS = [
    {"_version"},  # written at build time
    {"_layers", "_arguments"},  # what is known without importing anything of openreg
    {"_state"},  # whether the layers are loaded
    {"_compile"},  # torch.compile's hook and options
    {"_torch_patches", "_distributed"},  # every change to torch internals; naming orccl to torch.distributed
    {"_loader"},  # the composition root
    {"doctor", "demo", "bench.harness", "bench.plot"},
    {"bench.runtime", "bench.eager", "bench.compile", "bench.latency", "bench.graphs",
     "bench.distributed"},  # the benchmark suites
    {"bench.sanitizer"},  # the eager suite again, with the stream sanitizer on and off
    {"bench"},
    {"cli"},
    {"__main__", "__init__"},
]
RANK = {name: rank for rank, names in enumerate(RANKS) for name in names}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return "bench" if parts == ("bench", "__init__") else ".".join(parts)


def _imported(tree: ast.AST, name: str) -> set[str]:
    """openreg modules that module `name` imports, wherever in it the import is."""
    package = ["bench"] if name == "bench" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            if node.module is None or not module:  # `from . import x`: x is a module (or a name of the root)
                found.update(".".join([*base, alias.name]) if ".".join([*base, alias.name]) in RANK else "__init__"
                             for alias in node.names)
            else:
                found.add(module)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found.update(n.removeprefix("openreg.") or "__init__" for n in names if n == "openreg" or
                         n.startswith("openreg."))
    return found


def test_every_module_has_a_rank():
    modules = {_module_name(p) for p in PACKAGE.rglob("*.py")}
    assert modules <= RANK.keys(), f"give {sorted(modules - RANK.keys())} a rank in RANKS"


def test_imports_point_down_only():
    upward = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        for target in _imported(ast.parse(path.read_text()), name):
            if RANK.get(target, -1) >= RANK[name] and target != name:
                upward.append(f"{name} imports {target}")
    assert upward == []


def test_the_check_sees_an_import_inside_a_function():
    tree = ast.parse("def f():\n    from . import _loader\n")
    assert _imported(tree, "_compile") == {"_loader"}
