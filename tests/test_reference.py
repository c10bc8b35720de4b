"""The reference pages (docs/reference/) are rendered from the code: they must not drift from it, and every
scenario key and table column must say what it means where it is declared."""

from __future__ import annotations

from pathlib import Path

from rocketsim.present import reference
from rocketsim.scenario import Scenario, scenario_from_mapping
from rocketsim.tables import schemas

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reference"


def test_the_committed_pages_are_the_code_rendered() -> None:
    for name, text in reference.rendered().items():
        committed = (DOCS / name).read_text(encoding="utf-8")
        assert committed == text, (
            f"docs/reference/{name} is out of date: python -m rocketsim.present.reference --write"
        )


def test_every_scenario_key_has_a_type_a_default_and_a_meaning() -> None:
    keys = [k for k in reference.scenario_keys() if isinstance(k, reference.Key)]
    assert not [k.path for k in keys if not k.meaning], "add a comment where the field is declared"
    paths = {k.path for k in keys}
    # every leaf of a default scenario is listed, under its file path
    assert {"producers.send_msg_timeout_ms", "brokers.coupling", "brokers.<name>.latency.median_ms",
            "faults[].factor", "consumers.groups[].count", "workload.body_size.sigma"} <= paths  # fmt: skip
    sc = scenario_from_mapping(
        {"faults": [{"broker": "broker-a", "kind": "slowdown", "start_s": 1, "end_s": 2}]}
    )
    assert isinstance(sc, Scenario)
    section = {k.path: k for k in keys}
    assert section["producers.send_msg_timeout_ms"].default == "3000"
    assert section["producers.send_msg_timeout_ms"].rule == "must be > 0"
    assert section["faults[].kind"].rule.startswith("must be one of outage, hang, slowdown")


def test_every_column_of_every_table_has_a_meaning() -> None:
    source = reference.SchemaSource()
    for spec in schemas.REGISTRY:
        columns = reference.table_columns(spec, source)
        assert [c.name for c in columns] == spec.schema.names
        missing = [c.name for c in columns if not c.meaning]
        assert not missing, f"{spec.name}: add a comment where {missing} are declared"


def test_check_fails_on_a_stale_page(tmp_path: Path, capsys) -> None:  # noqa: ANN001
    assert reference.main(["--write", "--docs", str(tmp_path)]) == 0
    assert reference.main(["--check", "--docs", str(tmp_path)]) == 0
    page = tmp_path / "tables.md"
    page.write_text(page.read_text().replace("| `seq` |", "| `sequence` |", 1))
    assert reference.main(["--check", "--docs", str(tmp_path)]) == 1
    assert "tables.md" in capsys.readouterr().err
