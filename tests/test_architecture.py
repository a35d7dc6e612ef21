"""The tree keeps the shape its import-linter contracts give it: every package and root module
of observer/ stands in the layers contract, a package whose inner layers are declared has
all its modules in them, and no package imports, however indirectly, one that imports it."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

import observer

ROOT = Path(observer.__file__).parent
PYPROJECT = ROOT.parent / "pyproject.toml"


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads(PYPROJECT.read_text())
    return list(config["tool"]["importlinter"]["contracts"])


def _layered() -> set[str]:
    """Every module a layers contract names."""
    named: set[str] = set()
    for contract in _contracts():
        if contract["type"] == "layers":
            for layer in contract["layers"]:  # type: ignore[attr-defined]
                named |= {m.strip() for part in layer.split("|") for m in part.split(":")}
    return named


def _children(package: Path) -> set[str]:
    """The modules and packages directly inside `package`, by dotted name."""
    dotted = ".".join(package.relative_to(ROOT.parent).parts)
    found = {f"{dotted}.{p.stem}" for p in package.glob("*.py") if p.stem != "__init__"}
    found |= {f"{dotted}.{p.parent.name}" for p in package.glob("*/__init__.py")}
    return found


def _packages() -> Iterator[Path]:
    yield ROOT
    for init in ROOT.rglob("__init__.py"):
        yield init.parent


def test_every_package_and_root_module_stands_in_the_layers_contract():
    assert _children(ROOT) - _layered() == set()


def test_a_package_with_declared_inner_layers_has_every_module_in_them():
    named = _layered()
    for package in _packages():
        children = _children(package)
        if children & named:
            assert children - named == set(), package


def _unit(module: str) -> str:
    """The package a module belongs to, at the depth packages nest (observer.reports.compute),
    or the root module itself (observer.settings)."""
    parts = module.split(".")
    while len(parts) > 2 and not (ROOT.parent.joinpath(*parts) / "__init__.py").exists():
        parts.pop()
    return ".".join(parts)


def _package_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts)
        source = _unit(module.removesuffix(".__init__"))
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                targets = [node.module]
            elif isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                continue
            for target in targets:
                if target.startswith("observer."):
                    unit = _unit(target)
                    # A package and its own subpackages are one another's parts, not peers.
                    if unit != source and not (
                        unit.startswith(source + ".") or source.startswith(unit + ".")
                    ):
                        graph.setdefault(source, set()).add(unit)
                        graph.setdefault(unit, set())
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, as the path around it; None when there is none."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph[node]):
            found = visit(target)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return None


def test_no_package_imports_one_that_imports_it():
    assert _cycle(_package_graph()) is None


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
