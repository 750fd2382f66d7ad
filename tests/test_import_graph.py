"""The package's imports point one way: no circle, ``TYPE_CHECKING`` imports included.

Read from the source (``ast``), not from ``sys.modules``: an import under
``if TYPE_CHECKING:`` or inside a function counts like any other, because a
circle there is still two modules that each need the other to be understood.

The core's crate is held to the same rule: its top-level modules' ``crate::``
paths (``use`` or inline) point one way too. Rust compiles a circle, so only
this test sees one; test code is left out (a module's tests may build what
sits above it).
"""

from __future__ import annotations

import ast
import re
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


# --- the Rust crate (grelmicro-core/src) -------------------------------------

CRATE = Path(__file__).resolve().parent.parent / "grelmicro-core" / "src"

#: Comments, string and char literals: cut before reading paths and braces.
_NOISE = re.compile(
    r"//[^\n]*|/\*.*?\*/|r(#*)\".*?\"\1|b?\"(?:\\.|[^\"\\])*\"|b?'(?:\\[^']*|[^\\'])'",
    re.DOTALL,
)
_CFG_TEST = re.compile(r"#\[cfg\(test\)\]")
_TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")
_CRATE_PATH = re.compile(r"\bcrate::(?:(\w+)|\{)")


def crate_files() -> dict[Path, str]:
    """Every source file of the crate but test-only ones -> its name in the graph.

    The graph's nodes are the crate's top-level modules (``key`` stands for
    ``key/*.rs``); a file a ``#[cfg(test)] mod name;`` declares is test code.
    """
    tests: set[Path] = set()
    for path in CRATE.rglob("*.rs"):
        home = path.parent if path.name in ("mod.rs", "lib.rs") else path.with_suffix("")
        for name in _TEST_MOD.findall(path.read_text(encoding="utf-8")):
            tests |= {home / f"{name}.rs", home / name / "mod.rs"}
    return {
        path: path.relative_to(CRATE).parts[0].removesuffix(".rs")
        for path in CRATE.rglob("*.rs")
        if path not in tests and path.name != "lib.rs"
    }


def without_tests(code: str) -> str:
    """``code`` without comments, literals and ``#[cfg(test)]`` items."""
    code = _NOISE.sub('""', code)
    while (attribute := _CFG_TEST.search(code)) is not None:
        end = attribute.end()
        semicolon, brace = code.find(";", end), code.find("{", end)
        if semicolon != -1 and (brace == -1 or semicolon < brace):
            code = code[: attribute.start()] + code[semicolon + 1 :]
            continue
        code = code[: attribute.start()] + code[closing(code, brace) + 1 :]
    return code


def closing(code: str, brace: int) -> int:
    """Where the brace opened at ``code[brace]`` closes (the end if never)."""
    depth = 0
    for at in range(brace, len(code)):
        depth += {"{": 1, "}": -1}.get(code[at], 0)
        if depth == 0:
            return at
    return len(code)


def crate_uses(code: str, modules: set[str], reexports: dict[str, str]) -> set[str]:
    """The crate modules ``code`` names through ``crate::`` (``use`` or inline paths)."""
    found: set[str] = set()
    for match in _CRATE_PATH.finditer(code):
        if match.group(1) is not None:
            names = [match.group(1)]
        else:  # crate::{a, b::c, d::{e, f}}: the first name of each top-level item
            group = code[match.end() : closing(code, match.end() - 1)]
            items = re.sub(r"\{[^{}]*\}", "", group).split(",")
            names = [head.group(1) for item in items if (head := re.match(r"\s*(\w+)", item))]
        found |= {reexports.get(name, name) for name in names}
    return found & modules


def crate_edges() -> dict[str, set[str]]:
    """Top-level module -> the other top-level modules its non-test code uses."""
    files = crate_files()
    modules = set(files.values())
    # `crate::Result` is error's, re-exported by lib.rs: `pub use error::{...}`.
    reexports: dict[str, str] = {}
    lib = _NOISE.sub('""', (CRATE / "lib.rs").read_text(encoding="utf-8"))
    for module, names in re.findall(r"pub use (\w+)::\{?([\w\s,]*)\}?;", lib):
        reexports |= dict.fromkeys(re.findall(r"\w+", names), module)
    edges: dict[str, set[str]] = {module: set() for module in modules}
    for path, module in files.items():
        code = without_tests(path.read_text(encoding="utf-8"))
        edges[module] |= crate_uses(code, modules, reexports) - {module}
    return edges


def test_the_crate_has_no_module_circle() -> None:
    assert circles(crate_edges()) == []


def test_the_crate_graph_is_read() -> None:
    # The check above must see the edges it is meant to judge.
    edges = crate_edges()
    assert {"algorithm", "error", "key", "keyset", "verifier", "python"} <= set(edges)
    assert edges["error"] == set()
    assert {"error", "digest"} <= edges["algorithm"]
    assert {"key", "keyset", "claims", "header"} <= edges["verifier"]
    assert "error" in edges["python"]  # crate::Result, a re-export, counts as error
    assert "keyset" not in edges["key"]  # only key's tests use keyset


def test_the_crate_reader_sees_through_groups_and_skips_tests() -> None:
    code = without_tests(
        "use crate::{digest, header::{self, Header}, json};\n"
        '// use crate::cache;\nlet s = "crate::peek";\n'
        "let d = crate::token::decode(x);\n"
        "#[cfg(test)]\nmod tests { use crate::verifier; fn f() { if x { } } }\n"
        "#[cfg(test)]\nmod more;\nuse crate::Result;\n"
    )
    modules = {"digest", "header", "json", "cache", "peek", "token", "verifier", "error"}
    assert crate_uses(code, modules, {"Result": "error"}) == {
        "digest",
        "header",
        "json",
        "token",
        "error",
    }
