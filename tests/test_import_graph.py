"""The package's imports point one way: no circle, ``TYPE_CHECKING`` imports included.

Read from the source (``ast``), not from ``sys.modules``: an import under
``if TYPE_CHECKING:`` or inside a function counts like any other, because a
circle there is still two modules that each need the other to be understood.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "grelmicro" / "jwt"


def modules() -> dict[str, Path]:
    """``grelmicro.jwt...`` module name -> file."""
    found: dict[str, Path] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent.parent).with_suffix("").parts
        name = ".".join(parts)
        found[name.removesuffix(".__init__")] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules that module ``name`` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            for alias in node.names:
                full = f"{target}.{alias.name}"
                found.add(full if full in known else target)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {module for module in found if module in known and module != name}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every circle a depth-first walk meets (empty: the graph is acyclic)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def walk(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges[module]):
            if state.get(target) == 1:
                found.append([*stack[stack.index(target) :], target])
            elif target not in state:
                walk(target)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            walk(module)
    return found


def test_the_package_has_no_import_circle() -> None:
    known = modules()
    edges = {name: imports(name, path, known) for name, path in known.items()}
    assert circles(edges) == []


def test_the_circle_finder_finds_a_circle() -> None:
    # The check above must be able to fail.
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_otel_sits_below_the_verifier() -> None:
    known = modules()
    assert "grelmicro.jwt._verifier" not in imports(
        "grelmicro.jwt.otel", known["grelmicro.jwt.otel"], known
    )
