"""The project's own documentation holds together: every relative link of the README and of ``docs/``
resolves (the file, and the heading of a ``#anchor``), every "design §N" reference anywhere in the
repository names a section of ``docs/design.md``, and the README stays a short front door.

Plain text only (nothing is imported or run); anchors are GitHub's heading slugs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
README_MAX_LINES = 250
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
# where references to the design may be written (tests/data holds upstream's vectors, not ours)
SOURCES = ("rocketsim", "jobs", "tests", "docs", "conf", "notebooks")
TOP_FILES = ("README.md", "Makefile", "spark-submit.sh", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".ipynb", ".sh", ".conf", ".properties", ".txt"}
SKIPPED = (ROOT / "tests" / "data",)

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# "design §4", "design.md §4, §7", "docs/design.md §10" (and "Design §6")
REFERENCE = re.compile(r"\bdesign(?:\.md)?\s*(§\s*\d+(?:\s*(?:,|and)\s*§\s*\d+)*)", re.IGNORECASE)
SECTION = re.compile(r"^## (\d+)\. \S")


def _outside_fences(text: str) -> Iterator[tuple[int, str]]:
    """(line number, line) of the lines that are not inside a fenced code block."""
    fenced = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield n, line


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: the rendered text, lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link renders as its text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _outside_fences(page.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> Iterator[tuple[int, str]]:
    for n, line in _outside_fences(page.read_text(encoding="utf-8")):
        for m in LINK.finditer(line):
            yield n, m.group(1)


def _relative(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)  # http:, https:, mailto:, ...


def design_sections() -> dict[int, str]:
    sections = {}
    for _, line in _outside_fences(DESIGN.read_text(encoding="utf-8")):
        m = SECTION.match(line)
        if m:
            sections[int(m.group(1))] = line[3:]
    return sections


def repository_texts() -> Iterator[Path]:
    for name in TOP_FILES:
        if (ROOT / name).is_file():
            yield ROOT / name
    for folder in SOURCES:
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix in SUFFIXES and path.is_file() and not any(s in path.parents for s in SKIPPED):
                yield path


def test_the_pages_exist() -> None:
    assert DESIGN.is_file()
    assert (ROOT / "docs" / "README.md").is_file()
    assert len(PAGES) > 3


def test_the_readme_is_a_short_front_door() -> None:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) < README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page: Path) -> None:
    bad = []
    for n, target in links(page):
        if not _relative(target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        where = f"{page.relative_to(ROOT)}:{n}: {target}"
        if not dest.exists():
            bad.append(f"{where} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{where} (no heading with that anchor in {dest.name})")
    assert not bad, "\n".join(bad)


def test_the_design_sections_are_numbered_one_by_one() -> None:
    numbers = list(design_sections())
    assert numbers == list(range(1, len(numbers) + 1)), numbers
    assert len(numbers) >= 10


def test_every_design_reference_names_a_section_that_exists() -> None:
    sections = design_sections()
    bad, found = [], 0
    for path in repository_texts():
        text = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            for m in REFERENCE.finditer(line):
                for number in re.findall(r"\d+", m.group(1)):
                    found += 1
                    if int(number) not in sections:
                        bad.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)!r} (no section {number})")
    assert not bad, "\n".join(bad)
    assert found > 10  # the references are there to be checked (the pattern still matches them)


def test_the_design_is_named_by_its_path_outside_docs() -> None:
    """Outside ``docs/`` (whose pages link it relatively) the design is ``docs/design.md``: a bare
    ``design.md`` would send a reader looking for a file that is not there."""
    bad = []
    for path in repository_texts():
        if ROOT / "docs" in path.parents or path == Path(__file__).resolve():
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            for m in re.finditer(r"(?<![\w/.-])(?:[\w./-]*/)?design\.md", line):
                if m.group(0) != "docs/design.md":
                    bad.append(f"{path.relative_to(ROOT)}:{n}: {m.group(0)}")
    assert not bad, "\n".join(bad)


def test_the_slugs_follow_github() -> None:
    assert slug("6. The Spark pipeline and tables") == "6-the-spark-pipeline-and-tables"
    assert slug("Load around capacity (`capacity_steady.toml`)") == "load-around-capacity-capacity_steadytoml"
    expected = "async-sends-the-clients-threads-and-uniq_key"
    assert slug("ASYNC sends, the client's threads and UNIQ_KEY") == expected
