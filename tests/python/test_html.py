"""HTML report: one self-contained file; checked as data, then in a real headless Chromium.

The browser tests need Debian's chromium (/usr/bin/chromium, or $PEAKLINE_CHROMIUM) and the
`playwright` package from PyPI (never `playwright install`: no browser downloads). Screenshots
go to $PEAKLINE_TEST_ARTIFACTS, default tests/artifacts/ (git-ignored).
"""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHROMIUM
from peakline_proc import line_record, marked_lines
from synthetic_memory import with_memory

from peakline.reporters import html
from peakline.reporters._format import human_bytes

ARTIFACTS = Path(os.environ.get("PEAKLINE_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[1] / "artifacts"))

PROGRAM = """\
import time


def hot(n):
    total = 0
    for i in range(n):
        total += i * i  # HOT LINE
    return total


def hold():
    return [bytearray(1 << 20) for _ in range(96)]  # HOLD LINE


kept = hold()
hot(12_000_000)  # 0.6-0.9 s: the top line by total time, whatever the run delay of the others
del kept
time.sleep(0.05)
"""


def render(profile, **options) -> str:
    stream = io.StringIO()
    html.render(profile, stream, **options)
    return stream.getvalue()


def embedded(page: str) -> dict:
    match = re.search(r'<script type="application/json" id="peakline-data">(.*?)</script>',
                      page, re.S)
    assert match
    return json.loads(match.group(1))


# ---- as data ------------------------------------------------------------------------------

def test_one_file_with_everything_inline(app_profile):
    page = render(with_memory(app_profile))
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "{{" not in page  # every template slot filled
    # nothing is fetched: no external scripts, styles, images or fonts
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", page)
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page  # and the page forbids it anyway
    data = embedded(page)
    assert data["profile"]["peak_bytes"] == with_memory(app_profile).peak_bytes
    assert [h[1] for h in data["peakHolders"]] == [5, 9]
    assert [ln[1] for ln in data["leaks"]] == [9]
    source = next(iter(data["sources"].values()))
    assert "    total = sum(i * i for i in range(n))  # HOT" in source


def test_script_closing_tags_in_data_cannot_break_out(app_profile):
    app_profile.program = "</script><script>alert(1)</script><!--"
    app_profile.argv = ["</SCRIPT>", "&amp;"]
    page = render(app_profile)
    assert page.lower().count("</script>") == 3  # the data element and the two scripts
    assert "alert(1)</script>" not in page and "<!--" not in page
    data = embedded(page)
    assert data["profile"]["program"] == "</script><script>alert(1)</script><!--"
    assert data["profile"]["argv"] == ["</SCRIPT>", "&amp;"]
    assert "<title>peakline: &lt;/script&gt;" in page


def test_embed_json_is_ascii_and_still_json():
    text = html.embed_json({"s": "</script> & <!-- \u2028 é"})
    assert text.isascii() and "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == {"s": "</script> & <!-- \u2028 é"}


def test_missing_source_is_said_not_guessed(build):
    profile = build([("/nonexistent/gone.py", "f", 1, 3)], [(1, (0,), 10_000_000, 0, 0, 0, 1, 0)])
    data = embedded(render(profile))
    assert data["sources"] == {} and data["sourceErrors"] == {"/nonexistent/gone.py":
                                                              "file not found"}


def test_thresholds_pick_the_active_lines(app_profile):
    data = embedded(render(with_memory(app_profile), reduced=True, cpu_percent_threshold=30,
                           malloc_threshold_bytes=6 << 20))
    assert sorted(next(iter(data["activeLines"].values()))) == [3, 5, 9]  # 11: 0.35%, 5 MiB
    assert data["settings"]["reduced"] is True


def test_templates_ship_inside_the_package():
    from importlib import resources
    folder = resources.files("peakline.reporters").joinpath("templates")
    assert {p.name for p in folder.iterdir()} >= {"page_head.html", "report.html", "report.css",
                                                   "charts.js", "report.js"}


# ---- in a real browser ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_report(tmp_path_factory):
    """A real run of PROGRAM under `peakline run --html`."""
    folder = tmp_path_factory.mktemp("html")
    script = folder / "workload.py"
    script.write_text(PROGRAM)
    out = folder / "report.html"
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--no-report", "-o",
                           str(folder / "p.json"), "--html", str(out), str(script)],
                          capture_output=True, text=True, timeout=180, cwd=folder)
    assert proc.returncode == 0, proc.stderr
    return out


def open_page(browser, path: Path, width: int = 1400):
    page = browser.new_page(viewport={"width": width, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"network: {r.url}")
            if not r.url.startswith(("file:", "data:")) else None)
    page.goto(path.as_uri())
    page.wait_for_load_state("load")
    return page, problems


def shoot(page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def test_real_report_in_chromium(browser, real_report):
    page, problems = open_page(browser, real_report)
    try:
        assert problems == []
        shoot(page, "html-report")
        hot = page.locator("table.lines tr", has_text="total += i * i  # HOT LINE")
        assert hot.count() == 1 and hot.is_visible()
        assert "hot" in hot.get_attribute("class")
        marker = page.locator("#peak-marker")
        assert marker.count() == 1 and "peak" in marker.text_content()
        holder = page.locator("table.lines tr.peak", has_text="HOLD LINE")
        assert holder.count() == 1  # the 96 MiB list holds the peak
        assert page.locator("#peak-holders").is_visible()
        assert page.locator("table.lines svg.spark").count() >= 1
        # sorting: source order first; clicking "total" puts the hottest line on top
        rows = page.locator("table.lines tbody tr")
        first = rows.first.get_attribute("id")
        page.locator("table.lines th", has_text="total").first.click()
        assert rows.first.get_attribute("id") != first
        assert "HOT LINE" in rows.first.text_content()
        page.locator("table.lines th", has_text="total").first.click()  # ascending now
        assert "HOT LINE" not in rows.first.text_content()
        # the flame graph: folded by default, the user's functions are there
        assert page.locator("#flame-graph .fnode").count() >= 4
        assert page.locator("#flame-graph .fnode", has_text="hot:").count() >= 1
        page.locator("#fold-library").uncheck()
        assert page.locator("#flame-graph .fnode").count() >= 4
        shoot(page, "html-report-sorted-unfolded")
        assert problems == []
    finally:
        page.close()


def test_flame_graph_zooms_on_click(browser, real_report):
    page, problems = open_page(browser, real_report)
    try:
        node = page.locator("#flame-graph .fnode", has_text="hot:").first
        before = node.bounding_box()["width"]
        node.click()
        zoomed = page.locator("#flame-graph .fnode:not(.ancestor)", has_text="hot:").first
        assert zoomed.bounding_box()["width"] > before
        assert page.locator("#flame-graph .fnode.ancestor").count() >= 1
        assert problems == []
    finally:
        page.close()


def test_synthetic_memory_report_in_a_narrow_window(browser, app_profile, tmp_path):
    path = tmp_path / "synthetic.html"
    path.write_text(render(with_memory(app_profile)), encoding="utf-8")
    page, problems = open_page(browser, path, width=800)
    try:
        assert page.locator("#leaks").is_visible()
        leak_row = page.locator("#leaks tbody tr")
        assert leak_row.count() == 1 and "99%" in leak_row.text_content()
        assert page.locator("table.lines tr.leak", has_text="# WAIT").count() == 1
        box = page.locator("table.lines input[type=checkbox], .toolbar input").first
        box.check()  # only lines with activity
        assert not page.locator("table.lines tr", has_text="def main():").is_visible()
        shoot(page, "html-synthetic-narrow")
        assert problems == []
    finally:
        page.close()


def test_cpu_only_report_has_no_memory_sections(browser, app_profile, tmp_path):
    path = tmp_path / "cpu.html"
    path.write_text(render(app_profile), encoding="utf-8")
    page, problems = open_page(browser, path)
    try:
        assert not page.locator("#memory").is_visible()
        assert page.locator("#peak-marker").count() == 0
        assert "not profiled" in page.locator("#summary").text_content()
        assert page.locator("table.lines th", has_text="net").count() == 0
        assert problems == []
    finally:
        page.close()


def test_merged_processes_report_names_the_tree_peak(browser, tmp_path):
    """Children holding 50 and 100 MiB at once: the page shows the tree's 150 MiB peak and the
    lines' holdings at it, never a share over 100% (docs/processes.md, "Merged profiles")."""
    program = Path(__file__).resolve().parents[1] / "programs" / "mp_known_peaks.py"
    out = tmp_path / "merged.html"
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--no-report", "-o",
                           str(tmp_path / "p.json"), "--html", str(out), str(program),
                           "together"], capture_output=True, text=True, timeout=180,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    tree_peak = json.loads((tmp_path / "p.json").read_text())["tree_peak_bytes"]
    page, problems = open_page(browser, out)
    try:
        summary = page.locator("#summary").text_content()
        assert "peak of the process tree" in summary and "largest single-process peak" in summary
        title = page.locator("#peak-holders h2").text_content()
        assert "process tree" in title and "all processes together" in title, title
        shares = [int(t.strip().rstrip("%")) for t in  # line, source, held, % of peak
                  page.locator("#peak-holders tbody tr td:nth-child(4)").all_text_contents()]
        assert shares and all(share <= 100 for share in shares), shares
        held = page.locator("#peak-holders tbody tr", has_text="LINE hold_100")
        # The 100 MiB block exactly, and its bytearray's 56-byte object, sampled once in 9,400
        # runs (+512 KiB): the row shows what the profile says, and that is the block.
        line = line_record(json.loads((tmp_path / "p.json").read_text()), program,
                           marked_lines(program)["hold_100"])
        assert 100 * (1 << 20) <= line["live_at_tree_peak_bytes"] < 101 * (1 << 20), line
        assert held.count() == 1
        assert human_bytes(line["live_at_tree_peak_bytes"]) in held.text_content()
        assert abs(tree_peak - 150 * (1 << 20)) < 6 * (1 << 20)
        # The per-process breakdown: one row per process, the parent first.
        processes = json.loads((tmp_path / "p.json").read_text())["processes"]
        assert page.locator("#processes").is_visible()
        rows = page.locator("#processes table").first.locator("tbody tr")
        assert rows.count() == len(processes)
        assert rows.first.locator("td").first.text_content() == str(processes[0]["pid"])
        shoot(page, "html-merged-processes")
        assert problems == []
    finally:
        page.close()
