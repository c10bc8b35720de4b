"""The reference pages, rendered from the code: ``docs/reference/scenario-keys.md`` (every scenario key:
type, default, range, meaning) and ``docs/reference/tables.md`` (every table of the registry: its stage,
keys and columns with their types and meanings).

What a key or a column *is* comes from the code: the scenario's dataclasses (types, defaults, and the
rule of each field's metadata) and the table registry (:data:`rocketsim.tables.schemas.REGISTRY`: Arrow
types and nullability). What it *means* is the comment where it is declared: the comment lines right
above the field, and the comment at the end of its line(s); a section's meaning is its class docstring.
For a group of columns declared together (``*_LATENCY_PERCENTILES``), the group's comment, else its
definition's. ``python -m rocketsim.present.reference --write`` writes the pages; ``--check`` (and
``tests/test_reference.py``) fails when the committed pages differ from the code.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import io
import sys
import tokenize
import types
import typing
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from rocketsim import scenario as scenario_module
from rocketsim.scenario import Scenario
from rocketsim.tables import schemas

PAGES = ("scenario-keys.md", "tables.md")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "reference"


# ---- comments where things are declared ---------------------------------------------------------------


def comments_by_line(source: str) -> dict[int, str]:
    """Every comment of ``source`` by its line (1-based), without the ``#``."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if not text.startswith(("noqa", "type:", "fmt:")):
                out[tok.start[0]] = text
    return out


def _code_lines(source: str) -> set[int]:
    """Lines that hold code (a token other than a comment or a line end)."""
    skip = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT}
    lines: set[int] = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type not in skip:
            lines.update(range(tok.start[0], tok.end[0] + 1))
    return lines


@dataclass(frozen=True)
class Comments:
    """The comments of one source text, to read the meaning of a node declared in it."""

    source: str

    @functools.cached_property
    def by_line(self) -> dict[int, str]:
        return comments_by_line(self.source)

    @functools.cached_property
    def code(self) -> set[int]:
        return _code_lines(self.source)

    def above(self, node: ast.AST) -> str:
        """The comment block right above ``node`` (comment-only lines, up to code or a blank line)."""
        by_line, code = self.by_line, self.code
        lines: list[str] = []
        line = node.lineno - 1  # type: ignore[attr-defined]
        while line in by_line and line not in code:
            lines.insert(0, by_line[line])
            line -= 1
        return " ".join(lines)

    def meaning(self, node: ast.AST) -> str:
        """The comment block right above ``node`` and the comments on its lines, joined."""
        first, last = node.lineno, node.end_lineno or node.lineno  # type: ignore[attr-defined]
        own = [self.by_line[n] for n in range(first, last + 1) if n in self.by_line]
        return " ".join(part for part in [self.above(node), *own] if part)


def _join(*parts: str) -> str:
    return "; ".join(p.strip() for p in parts if p.strip())


# ---- the scenario keys ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Key:
    """One key of a scenario file."""

    path: str
    type: str
    default: str
    rule: str
    meaning: str


def _field_meanings(cls: type) -> dict[str, str]:
    """Each field of a dataclass -> the comments where it is declared."""
    source = inspect.getsource(cls)
    comments = Comments(source)
    body = ast.parse(source).body[0]
    return {
        node.target.id: comments.meaning(node)
        for node in body.body  # type: ignore[attr-defined]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }


def _docstring(cls: type) -> str:
    """A class's own docstring as one line ("" for the signature dataclass writes when it has none)."""
    doc = inspect.getdoc(cls) or ""
    return "" if doc.startswith(f"{cls.__name__}(") else " ".join(doc.split())


def _type_name(tp: object) -> str:
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is types.UnionType and type(None) in args:
        (inner,) = (a for a in args if a is not type(None))
        return f"{_type_name(inner)} (optional)"
    if origin is tuple:
        return f"list of {_type_name(args[0])}"
    if origin in (Mapping, dict):
        return f"table of {_type_name(args[1])}"
    return {int: "integer", float: "number", str: "string", bool: "boolean"}.get(
        tp, getattr(tp, "__name__", str(tp))
    )  # type: ignore[call-overload]


def _default(f: dataclasses.Field) -> object:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _shown(value: object) -> str:
    if value is dataclasses.MISSING:
        return "(required)"
    if value is None:
        return "(the version's)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, tuple):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_shown(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and value.is_integer():
        return f"{value:.1f}"
    return str(value)


def _rule(meta: Mapping) -> str:
    if "rule" in meta:
        return str(meta["rule"])
    if "keys" in meta:
        what = "weights" if meta.get("weights") else "fractions adding up to at most 1"
        return f"keys {', '.join(meta['keys'])}; {what}"
    return ""


# the file's name of a field where it differs (the brokers table holds the coupling beside the sections)
_FILE_PATH = {"broker_coupling": "brokers.coupling"}
_SKIPPED = ("source_text",)  # not a key: the file's own text


def scenario_keys(cls: type = Scenario, prefix: str = "") -> Iterator[Key | tuple[str, str]]:
    """Every key of the scenario file, depth first; a ``(section path, its meaning)`` before the keys
    of each section (nested dataclasses, ``brokers.<name>``, ``[[faults]]``)."""
    hints = typing.get_type_hints(cls)
    meanings = _field_meanings(cls)
    for f in dataclasses.fields(cls):
        if f.name in _SKIPPED:
            continue
        tp, path = hints[f.name], _FILE_PATH.get(f.name, f"{prefix}{f.name}")
        inner = _section(tp)
        if inner is not None:
            label, sub = inner
            section = f"{path}{label}"
            yield section, _join(meanings.get(f.name, ""), _docstring(sub))
            yield from scenario_keys(sub, f"{section}.")
            continue
        default = _default(f)
        shown = f"({f.metadata['unset']})" if default is None and "unset" in f.metadata else _shown(default)
        yield Key(path, _type_name(tp), shown, _rule(f.metadata), meanings.get(f.name, ""))


def _section(tp: object) -> tuple[str, type] | None:
    """A field that is a section: ("", its class), (".<name>", ...) for a table of them, ("[]", ...)
    for an array of them."""
    if dataclasses.is_dataclass(tp):
        return "", tp  # type: ignore[return-value]
    args = typing.get_args(tp)
    if typing.get_origin(tp) is tuple and dataclasses.is_dataclass(args[0]):
        return "[]", args[0]
    if typing.get_origin(tp) in (Mapping, dict) and dataclasses.is_dataclass(args[1]):
        return ".<name>", args[1]
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ") or "—"


def render_scenario_keys() -> str:
    """The scenario keys page."""
    lines = [
        "# Scenario keys",
        "",
        "<!-- Generated from rocketsim/scenario (the dataclasses, their fields' metadata and the",
        "     comments where each field is declared) by `python -m rocketsim.present.reference --write`.",
        "     Do not edit. -->",
        "",
        _cell((inspect.getdoc(scenario_module) or "").split("\n")[0]),
        "Keys are dotted paths in the TOML file (`producers.count`); `--set key=value` takes the same paths",
        "(an entry of an array of tables by its index: `faults.0.factor`, listed here as `faults[].factor`).",
        "",
        "| key | type | default | range | meaning |",
        "|---|---|---|---|---|",
    ]
    for item in scenario_keys():
        if isinstance(item, tuple):
            path, meaning = item
            header = f"[[{path[:-2]}]]" if path.endswith("[]") else f"[{path}]"
            lines.append(f"| **`{header}`** | section | | | {_cell(meaning)} |")
            continue
        cells = [
            f"`{item.path}`",
            item.type,
            f"`{_cell(item.default)}`",
            _cell(item.rule),
            _cell(item.meaning),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---- the tables ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    nullable: bool
    meaning: str


def _module_assignments(tree: ast.Module) -> dict[str, ast.Assign | ast.AnnAssign]:
    out: dict[str, ast.Assign | ast.AnnAssign] = {}
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign)
            else []
        )
        for t in targets:
            if isinstance(t, ast.Name):
                out[t.id] = node  # type: ignore[assignment]
    return out


class SchemaSource:
    """schemas.py read back: each table's columns with the comments where they are declared."""

    def __init__(self) -> None:
        self.source = inspect.getsource(schemas)
        self.tree = ast.parse(self.source)
        self.comments = Comments(self.source)
        self.defs = _module_assignments(self.tree)
        self.columns: dict[str, dict[str, str]] = {}  # schema constant -> column -> meaning

    def definition_meaning(self, name: str, depth: int = 0) -> str:
        """The comments of a module-level name's definition, else of the names it is made of."""
        node = self.defs.get(name)
        if node is None:
            return ""
        own = self.comments.meaning(node)
        if own or depth > 1:
            return own
        names = [n.id for n in ast.walk(node.value) if isinstance(n, ast.Name) and n.id in self.defs]  # type: ignore[union-attr]
        return next((m for n in names if (m := self.definition_meaning(n, depth + 1))), "")

    def table_columns(self, constant: str) -> dict[str, str]:
        """Column -> meaning of a ``pa.schema([...])`` constant."""
        if constant in self.columns:
            return self.columns[constant]
        node = self.defs[constant]
        call = node.value
        out: dict[str, str] = {}
        for element in call.args[0].elts:  # type: ignore[union-attr]
            out.update(self._element(element))
        self.columns[constant] = out
        return out

    def _element(self, element: ast.expr) -> dict[str, str]:
        line = self.source.splitlines()[element.lineno - 1]
        if line[: element.col_offset].strip():  # shares its line: only that line's comment is its own
            own = self.comments.by_line.get(element.lineno, "")
        else:
            own = self.comments.meaning(element)
        if isinstance(element, ast.Call) and element.args and isinstance(element.args[0], ast.Constant):
            return {element.args[0].value: own}
        value = element.value if isinstance(element, ast.Starred) else element
        fields = eval(compile(ast.Expression(value), "schemas.py", "eval"), vars(schemas))  # noqa: S307
        fields = [fields] if isinstance(fields, pa.Field) else list(fields)
        referenced = [n.id for n in ast.walk(value) if isinstance(n, ast.Name) and n.id in self.defs]
        inherited: dict[str, str] = {}
        for name in referenced:
            if isinstance(getattr(schemas, name, None), pa.Schema):
                inherited.update(self.table_columns(name))
        group = next((m for n in referenced if (m := self.definition_meaning(n))), "")
        return {f.name: inherited.get(f.name) or _join(group, own) for f in fields}


def _arrow_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"list<{_arrow_type(t.value_type)}>"
    return str(t)


def table_columns(spec: schemas.TableSpec, source: SchemaSource) -> list[Column]:
    constant = next(name for name, value in vars(schemas).items() if value is spec.schema)
    meanings = source.table_columns(constant)
    return [Column(f.name, _arrow_type(f.type), f.nullable, meanings.get(f.name, "")) for f in spec.schema]


def render_tables() -> str:
    """The tables page."""
    source = SchemaSource()
    lines = [
        "# Tables",
        "",
        "<!-- Generated from rocketsim/tables/schemas.py (the table registry, its Arrow schemas and",
        "     the comments where each column is declared) by",
        "     `python -m rocketsim.present.reference --write`. Do not edit. -->",
        "",
        "Every table is a Delta table at `<warehouse>/<name>`, partitioned by `run_id` (and by the",
        "`write_id` of the write a run holds, which readers leave out). Keys identify a row within a run.",
        "",
        "| table | written by | keys |",
        "|---|---|---|",
    ]
    for spec in schemas.REGISTRY:
        lines.append(
            f"| [`{spec.name}`](#{spec.name}) | {spec.stage} | {', '.join(spec.keys) or '(one row)'} |"
        )
    for spec in schemas.REGISTRY:
        constant = next(name for name, value in vars(schemas).items() if value is spec.schema)
        about = source.comments.above(source.defs[constant])
        lines += ["", f"## {spec.name}", ""]
        if about:
            lines += [about, ""]
        lines.append(
            f"Written by the `{spec.stage}` stage; keys: {', '.join(spec.keys) or '(one row per run)'}."
        )
        if spec.wall_clock:
            lines.append(f"Wall-clock columns (a rerun changes them): {', '.join(spec.wall_clock)}.")
        lines += ["", "| column | type | null | meaning |", "|---|---|---|---|"]
        for c in table_columns(spec, source):
            lines.append(f"| `{c.name}` | {c.type} | {'yes' if c.nullable else 'no'} | {_cell(c.meaning)} |")
    return "\n".join(lines) + "\n"


# ---- the command ---------------------------------------------------------------------------------------


def rendered() -> dict[str, str]:
    return {"scenario-keys.md": render_scenario_keys(), "tables.md": render_tables()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m rocketsim.present.reference", description=__doc__.splitlines()[0]
    )
    p.add_argument("--write", action="store_true", help="write the pages into docs/reference/")
    p.add_argument("--check", action="store_true", help="exit 1 if a committed page differs from the code")
    p.add_argument("--docs", default=str(DOCS), help="the folder of the pages (docs/reference)")
    ns = p.parse_args(argv)
    docs = Path(ns.docs)
    stale = []
    for name, text in rendered().items():
        path = docs / name
        if ns.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
        elif not path.is_file() or path.read_text(encoding="utf-8") != text:
            stale.append(str(path))
    if stale:
        print(
            f"out of date (run python -m rocketsim.present.reference --write): {', '.join(stale)}",
            file=sys.stderr,
        )
        return 1
    if not ns.write and not ns.check:
        sys.stdout.write(rendered()["scenario-keys.md"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
