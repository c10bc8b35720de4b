"""The HTML report in a real browser: Debian's chromium, headless, lays the page out at a laptop's width
(1280 px) and a script added to a copy of the page writes what it measured into the DOM, which chromium
dumps: the page never scrolls sideways and every chart image loaded (the report itself has no script).

Skipped when ``chromium`` is not on PATH (``apt-get install -y chromium``; ``.ci/run`` installs it)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from rocketsim.present import report
from tests import present_runs

CHROMIUM = shutil.which("chromium")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None,
    reason="chromium is not on PATH (Debian: apt-get install -y chromium): the report is not rendered",
)

WIDTH = 1280  # a typical laptop's
# after the page (and its images) loaded: the document's width, the viewport's, each image, each box
# that may scroll on its own (.wide)
PROBE = """<script>
window.addEventListener("load", () => {
  const out = {
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
    images: [...document.images].map(i => ({complete: i.complete, naturalWidth: i.naturalWidth})),
    boxes: [...document.querySelectorAll(".wide")].map(d => ({scroll: d.scrollWidth, client: d.clientWidth})),
  };
  const pre = document.createElement("pre");
  pre.id = "probe";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""


def layout(page: str, tmp_path: Path) -> dict:
    """What chromium measured on ``page`` (an HTML document) at :data:`WIDTH` px."""
    path = tmp_path / "page.html"
    path.write_text(page.replace("</body>", PROBE + "</body>"), encoding="utf-8")
    profile = tmp_path / "profile"  # a new, empty one
    profile.mkdir()
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},800",
        "--virtual-time-budget=10000",  # the load event and its handler run before the dump
        "--dump-dom",
        path.as_uri(),
    ]
    out = subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)
    found = re.search(r'<pre id="probe">(.*?)</pre>', out.stdout, re.S)
    assert found, f"chromium exited {out.returncode} without the probe: {out.stderr[-2000:]}"
    measured = json.loads(html.unescape(found.group(1)))
    assert measured["innerWidth"] == WIDTH
    return measured


def test_the_probe_sees_a_page_wider_than_the_screen(tmp_path: Path) -> None:
    wide = '<!DOCTYPE html><html><body><div style="width: 2000px">x</div></body></html>'
    assert layout(wide, tmp_path)["scrollWidth"] > WIDTH


def test_the_report_fits_a_laptop_screen_and_every_chart_loads(tmp_path: Path) -> None:
    run = present_runs.small_run()
    charts = report.figures(run)
    measured = layout(report.render_page(run, charts, "a run simulated by the test"), tmp_path)
    assert measured["scrollWidth"] <= WIDTH
    drawn = [c for c in charts if c.figure is not None]
    assert len(measured["images"]) == len(drawn) == len(charts) - 1  # open-loop: no broker-load chart
    assert all(i["complete"] and i["naturalWidth"] > 0 for i in measured["images"]), measured["images"]
    # four brokers' tables (the summary, the fault windows, ...) fit without scrollbars of their own
    assert measured["boxes"] and all(b["scroll"] <= b["client"] for b in measured["boxes"]), measured["boxes"]


def test_a_report_of_many_brokers_does_not_scroll_sideways(tmp_path: Path) -> None:
    """12 brokers: the summary is 13 columns; if it is wider than the page, it scrolls in its own box."""
    run = present_runs.small_run(brokers=12)
    measured = layout(
        report.render_page(run, report.figures(run)[:1], "a run simulated by the test"), tmp_path
    )
    assert measured["scrollWidth"] <= WIDTH
    assert [i["naturalWidth"] > 0 for i in measured["images"]] == [True]
