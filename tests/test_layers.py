"""The house rules of docs/design.md §2, read off the source with ``ast`` (nothing is imported or run).

* Five layers, each importing only the layers above it: core (every module but the four below and
  ``bench/``) < ``warehouse/`` < ``present/`` < ``spark/`` < ``command/`` (the ``rocketsim`` command, and
  ``rocketsim/__main__.py``, its ``python -m rocketsim``); ``jobs/``, ``bench/`` and another package's
  ``__main__`` (a ``python -m`` entry point, as a job is: ``python -m rocketsim.validation``) may use any
  of them.
* The package's own code imports modules where they are, never by a public name that maps elsewhere
  (:data:`rocketsim.PUBLIC_MODULES`: those are for users).
* No import cycle among the package's modules (imports under ``if TYPE_CHECKING:`` do not count: they
  are types, not dependencies at run time).
* No module takes another module's ``_private`` names (``from x import _y`` or ``x._y``).
* pyspark only in ``spark/`` (and ``jobs/``, ``bench/``); matplotlib only in ``present/``; no deltalake,
  Parquet, file-system or file-writing calls in the core (reading its inputs is allowed where named
  below).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "rocketsim"
LAYERS = ("core", "warehouse", "present", "spark", "command")  # each may import the ones before it
ENTRY = {"rocketsim.__main__": "command"}  # entry points outside their layer's folder
FREE = ("bench", "entry")  # rocketsim/bench (a developer tool) and other ``__main__`` entry points: anything
# modules of the core that read their own inputs from files (docs/design.md §2: the conformance vectors,
# the scenario file, which a job names on its command line, and the package's own sources, which stamp
# numba's cache of the compiled engine)
CORE_READERS = {"rocketsim.conformance", "rocketsim.scenario", "rocketsim.engine.numba_cache"}
CORE_READER_PACKAGES = ("rocketsim.vectors",)
FORBIDDEN_IN_CORE = ("deltalake", "pyarrow.parquet", "pyarrow.fs", "pyarrow.dataset", "shutil", "tempfile")
WRITING_CALLS = frozenset(
    {"write_text", "write_bytes", "mkdir", "makedirs", "unlink", "remove", "rename", "replace", "rmtree"}
)


@dataclass(frozen=True)
class Import:
    module: str  # the importing module
    target: str  # the module imported (for ``from x import y``: x, or x.y when x.y is a module)
    names: tuple[str, ...]
    line: int
    type_only: bool


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def layer(module: str) -> str:
    if module in ENTRY:
        return ENTRY[module]
    parts = module.split(".")
    if parts[-1] == "__main__":
        return "entry"
    if len(parts) > 1 and parts[1] in (*LAYERS[1:], *FREE):
        return parts[1]
    return "core"


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(module: str, path: Path, known: set[str]) -> Iterator[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def walk(node: ast.AST, type_only: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _type_checking(child):
                yield from walk(child, True)
                continue
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, alias.name, (), child.lineno, type_only)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    up = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    base = ".".join([*up, base] if base else up)
                names = tuple(a.name for a in child.names)
                for name in names:
                    full = f"{base}.{name}"
                    if full in known:  # ``from rocketsim import store``: a module
                        yield Import(module, full, (), child.lineno, type_only)
                rest = tuple(n for n in names if f"{base}.{n}" not in known)
                if rest:
                    yield Import(module, base, rest, child.lineno, type_only)
            yield from walk(child, type_only)

    yield from walk(tree, False)


@pytest.fixture(scope="module")
def graph() -> dict[str, list[Import]]:
    mods = modules()
    known = set(mods)
    return {m: list(imports(m, p, known)) for m, p in mods.items()}


def _internal(target: str, known: set[str]) -> str | None:
    """The package module an import names (``rocketsim.x.y`` -> the longest known prefix)."""
    parts = target.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in known:
            return name
    return None


def test_the_package_has_its_layers() -> None:
    for name in ("warehouse", "present", "spark", "command", "engine"):
        assert (PACKAGE / name / "__init__.py").is_file(), name


def test_the_package_imports_modules_where_they_are(graph: dict[str, list[Import]]) -> None:
    from rocketsim import PUBLIC_MODULES

    bad = [
        f"{m}:{i.line} imports {i.target}"
        for m, edges in graph.items()
        for i in edges
        if any(i.target == old or i.target.startswith(old + ".") for old in PUBLIC_MODULES)
    ]
    assert not bad, "\n".join(bad)


def test_the_public_module_names_give_the_modules_themselves() -> None:
    import importlib

    from rocketsim import PUBLIC_MODULES

    for public, actual in PUBLIC_MODULES.items():
        assert importlib.import_module(public) is importlib.import_module(actual), public


def test_each_layer_imports_only_the_layers_above_it(graph: dict[str, list[Import]]) -> None:
    known = set(graph)
    bad = []
    for module, edges in graph.items():
        mine = layer(module)
        if mine in FREE:
            continue
        for imp in edges:
            target = _internal(imp.target, known)
            if target is None or imp.type_only:
                continue
            theirs = layer(target)
            if theirs in FREE or LAYERS.index(theirs) > LAYERS.index(mine):
                bad.append(f"{module}:{imp.line} ({mine}) imports {target} ({theirs})")
    assert not bad, "\n".join(bad)


def test_no_import_cycles(graph: dict[str, list[Import]]) -> None:
    known = set(graph)
    edges = {
        m: sorted({t for i in imps if not i.type_only and (t := _internal(i.target, known)) and t != m})
        for m, imps in graph.items()
    }
    # a package's __init__ importing its own submodules is how a package faces the world: not a cycle
    for m in edges:
        edges[m] = [t for t in edges[m] if not t.startswith(m + ".")]
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for t in edges[m]:
            if state.get(t) == 1:
                cycles.append(" -> ".join([*stack[stack.index(t) :], t]))
            elif t not in state:
                visit(t)
        stack.pop()
        state[m] = 2

    for m in sorted(edges):
        if m not in state:
            visit(m)
    assert not cycles, "\n".join(cycles)


def test_no_module_takes_another_modules_private_names(graph: dict[str, list[Import]]) -> None:
    known = set(graph)
    bad = []
    for module, edges in graph.items():
        aliases: dict[str, str] = {}
        for imp in edges:
            target = _internal(imp.target, known)
            if target is None or target == module:
                continue
            bad += [
                f"{module}:{imp.line} imports {target}.{n}"
                for n in imp.names
                if n.startswith("_") and not n.startswith("__")
            ]
        tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom | ast.Import):
                for alias in node.names:
                    base = node.module if isinstance(node, ast.ImportFrom) else None
                    full = f"{base}.{alias.name}" if base else alias.name
                    if full in known:
                        aliases[alias.asname or alias.name.split(".")[-1]] = full
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and aliases[node.value.id] != module
            ):
                bad.append(f"{module}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    assert not bad, "\n".join(bad)


def _third_party(graph: dict[str, list[Import]], prefix: str) -> list[str]:
    return [
        f"{m}:{i.line} imports {i.target}"
        for m, edges in graph.items()
        for i in edges
        if i.target == prefix or i.target.startswith(prefix + ".")
    ]


def test_pyspark_only_in_the_spark_layer(graph: dict[str, list[Import]]) -> None:
    bad = [b for b in _third_party(graph, "pyspark") if layer(b.split(":")[0]) not in ("spark", *FREE)]
    assert not bad, "\n".join(bad)
    for job in sorted((ROOT / "jobs").glob("*.py")):  # jobs may use Spark: they are its entry points
        ast.parse(job.read_text(encoding="utf-8"))


def test_matplotlib_only_in_the_present_layer(graph: dict[str, list[Import]]) -> None:
    bad = [b for b in _third_party(graph, "matplotlib") if layer(b.split(":")[0]) != "present"]
    assert not bad, "\n".join(bad)


def test_the_core_writes_no_files(graph: dict[str, list[Import]]) -> None:
    bad = []
    for module, edges in graph.items():
        if layer(module) != "core":
            continue
        bad += [
            f"{module}:{i.line} imports {i.target}"
            for i in edges
            if any(i.target == f or i.target.startswith(f + ".") for f in FORBIDDEN_IN_CORE)
        ]
        reader = module in CORE_READERS or module.startswith(CORE_READER_PACKAGES)
        tree = ast.parse(modules()[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in WRITING_CALLS and isinstance(func, ast.Attribute):
                owner = func.value
                if isinstance(owner, ast.Name) and owner.id in ("os", "shutil", "Path", "pathlib"):
                    bad.append(f"{module}:{node.lineno} calls {owner.id}.{name}")
                elif name in ("write_text", "write_bytes", "mkdir", "unlink"):
                    bad.append(f"{module}:{node.lineno} calls .{name}()")
            if (name == "open" or name in ("read_text", "read_bytes")) and not reader:
                bad.append(f"{module}:{node.lineno} opens a file")
    assert not bad, "\n".join(bad)
