"""The readable code stays readable (docs/design.md §2, the house rules): no function over 80 lines, no module
over 800 lines, no module docstring over 15 lines (what and why; long explanations and measurements
belong in ``docs/``). Read off the source with ``ast``; nothing is imported or run.

Exempt: ``rocketsim/engine/compiled.py``, the numba twin of the readable engine
(``rocketsim/engine/reference.py`` and ``rocketsim/client/send/`` are the code to read). Its event loop's
steps are compiled and cached as one module, some of them inlined at numba's level into ``run_loop`` for
speed (docs/benchmarks.md, "The compiled engine's loop"), so its functions and its length follow the
kernel's needs, not the reader's; its docstring is held to the bound like every other.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*(ROOT / "rocketsim").rglob("*.py"), *(ROOT / "jobs").rglob("*.py")])
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 800
MAX_DOCSTRING_LINES = 15
# module -> why its functions and length are not bounded
EXEMPT = {"rocketsim/engine/compiled.py": "the numba kernel, mirrored by the readable reference engine"}


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1  # type: ignore[attr-defined, operator]


def long_functions(tree: ast.Module, limit: int) -> list[tuple[str, int, int]]:
    """(name, first line, length) of every function (nested ones too) longer than ``limit`` lines, from its
    ``def`` to its last line (decorators not counted, its docstring counted)."""
    return [
        (node.name, node.lineno, _lines(node))
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _lines(node) > limit
    ]


def docstring_lines(tree: ast.Module) -> int:
    """The lines the module's docstring takes in the source (0: none)."""
    if ast.get_docstring(tree, clean=False) is None:
        return 0
    return _lines(tree.body[0])


def test_the_bounds_catch_what_they_bound() -> None:
    long = "def f():\n" + "    x = 1\n" * 80 + "\n\ndef g():\n    return 1\n"
    assert long_functions(ast.parse(long), MAX_FUNCTION_LINES) == [("f", 1, 81)]
    doc = '"""' + "line\n" * 15 + '"""\n'
    assert docstring_lines(ast.parse(doc)) == 16
    assert docstring_lines(ast.parse("x = 1\n")) == 0


def test_the_exempt_modules_exist() -> None:
    for rel in EXEMPT:
        assert (ROOT / rel).is_file(), rel


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_no_function_over_80_lines(path: Path) -> None:
    if _rel(path) in EXEMPT:
        return
    long = long_functions(_tree(path), MAX_FUNCTION_LINES)
    assert not long, "\n".join(f"{_rel(path)}:{line} {name} has {n} lines" for name, line, n in long)


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_no_module_over_800_lines(path: Path) -> None:
    if _rel(path) in EXEMPT:
        return
    n = len(path.read_text(encoding="utf-8").splitlines())
    assert n <= MAX_MODULE_LINES, f"{_rel(path)} has {n} lines: split it along its sections"


@pytest.mark.parametrize("path", SOURCES, ids=_rel)
def test_module_docstrings_are_short(path: Path) -> None:
    n = docstring_lines(_tree(path))
    assert n <= MAX_DOCSTRING_LINES, (
        f"{_rel(path)}'s docstring has {n} lines: keep what and why, move the rest to docs/"
    )
