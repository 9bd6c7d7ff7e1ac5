"""The package's layers (issue #22): imports point down the layers of the import-linter contracts
in pyproject.toml (the package's, and validation/'s parts among themselves, issue #43), and what
those contracts do not check: no import circles between modules, no private name imported from
another module, at most 8 modules directly under quantgraph/."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "quantgraph"
MAX_TOP_LEVEL_MODULES = 8
# The command line's modules until they are the cli/ package (issue #22 item 3).
CLI_MODULES_FOLDED_LATER = "cli_"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement that can run, at any depth (a function's lazy import too); the
    bodies of ``if TYPE_CHECKING:`` never run and are skipped."""
    for node in ast.iter_child_nodes(tree):
        yield from _runtime_imports_of(node)


def _runtime_imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
        for inner in node.orelse:
            yield from _runtime_imports_of(inner)
        return
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    yield from runtime_imports(node)


def imported(
    module: str, node: ast.Import | ast.ImportFrom, is_package: bool = False
) -> Iterator[tuple[str, str | None]]:
    """(module imported, name taken from it or None) of one statement in ``module`` (a package's
    ``__init__`` when ``is_package``)."""
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, None
        return
    package = module if is_package else module.rpartition(".")[0]
    if node.level:
        base = package.split(".")
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    for alias in node.names:
        if f"{source}.{alias.name}" in MODULES:
            yield f"{source}.{alias.name}", None  # a module object
        else:
            yield source, alias.name


def edges() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {module: set() for module in MODULES}
    for module, path in MODULES.items():
        for node in runtime_imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target, _ in imported(module, node, path.name == "__init__.py"):
                if target in MODULES and target != module:
                    graph[module].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            following = next(pending, None)
            if following is None:
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
            elif following not in index:
                index[following] = low[following] = len(index)
                stack.append(following)
                on_stack.add(following)
                work.append((following, iter(sorted(graph[following]))))
            elif following in on_stack:
                low[node] = min(low[node], index[following])
    return found


def test_imports_point_down_the_layers() -> None:
    tool = Path(sys.executable).parent / "lint-imports"
    command = str(tool) if tool.exists() else shutil.which("lint-imports")
    if command is None:
        pytest.fail("lint-imports is not installed (pip install -e '.[dev]')")
    result = subprocess.run(
        [command, "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_import_circles_between_modules() -> None:
    found = circles(edges())
    assert not found, "import circles (TYPE_CHECKING blocks aside): " + "; ".join(
        " <-> ".join(component) for component in found
    )


def test_no_private_name_is_imported_from_another_module() -> None:
    found = []
    for folder in (PACKAGE, ROOT / "tools", ROOT / "benchmarks"):
        for path in sorted(folder.rglob("*.py")):
            module = module_name(path)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, (ast.Import, ast.ImportFrom)):
                    continue
                for target, name in imported(module, node, path.name == "__init__.py"):
                    last = name if name is not None else target.rpartition(".")[2]
                    private = last.startswith("_") and not last.startswith("__")
                    if private and target.startswith("quantgraph") and target != module:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {target} {name}")
    assert not found, "private names imported from another module:\n" + "\n".join(found)


def test_few_modules_directly_under_the_package() -> None:
    top = sorted(
        path.name
        for path in PACKAGE.glob("*.py")
        if not path.name.startswith(CLI_MODULES_FOLDED_LATER)
    )
    assert len(top) <= MAX_TOP_LEVEL_MODULES, f"{len(top)} modules in quantgraph/: {top}"


def test_the_checks_see_what_they_are_meant_to_see() -> None:
    # Made up: a circle, imports that run and one that does not, a private name.
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    source = "if TYPE_CHECKING:\n    import x\nelse:\n    import y\ndef f():\n    import z\n"
    found = [n.names[0].name for n in runtime_imports(ast.parse(source))]
    assert found == ["y", "z"]
    statement = ast.parse("from .timing import _x").body[0]
    assert isinstance(statement, ast.ImportFrom)
    names = list(imported("quantgraph.bench.kernels", statement))
    assert names == [("quantgraph.bench.timing", "_x")]
