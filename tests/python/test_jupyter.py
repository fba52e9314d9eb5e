"""%load_ext peakline, %peakline and %%peakline in a real kernel (nbclient + ipykernel): three
reports in one notebook, each about its cell and standing alone, then the executed notebook
converted by nbconvert (HTML, Markdown, text) and the HTML opened in headless Chromium.

The browser part needs Debian's chromium and the `playwright` package, as tests/python/
test_html.py does; screenshots go to $PEAKLINE_TEST_ARTIFACTS (default tests/artifacts/)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

from conftest import CHROMIUM  # noqa: E402
from peakline.model import read_profile  # noqa: E402

ARTIFACTS = Path(os.environ.get("PEAKLINE_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[1] / "artifacts"))

CELLS = [
    "%load_ext peakline",
    # cell [2]: 64 MiB on line 2, held at the peak
    "%%peakline -o cell2.json\n"
    "import numpy as np\n"
    "big = np.ones(64 * 1024 * 1024 // 8)\n"
    "total = sum(i * i for i in range(300_000))\n",
    # cell [3]: the line magic, with the command line's byte-size spelling
    "%peakline --memory-sampling-interval 64K -o cell3.json sum(i * i for i in range(200_000))",
    # cell [4]: the older --reduced spelling; a function defined and run in the cell
    "%%peakline --reduced -o cell4.json\n"
    "def spin(n):\n"
    "    return sum(i * i for i in range(n))\n"
    "\n"
    "spun = spin(1_500_000)\n",
    "print('PEAK', __import__('json').load(open('cell2.json'))['peak_bytes'], 'TOTAL', total)",
]
REPORT_CELLS = {1: "cell [2]", 2: "cell [3]", 3: "cell [4]"}  # cell index: its name


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebook")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source) for source in CELLS]
    client = nbclient.NotebookClient(nb, timeout=180, kernel_name="python3",
                                     resources={"metadata": {"path": str(folder)}})
    client.execute()
    nbformat.write(nb, folder / "executed.ipynb")
    return nb, folder


def _display(cell) -> dict:
    shown = [o for o in cell.outputs if o.output_type == "display_data"]
    assert len(shown) == 1, cell.outputs  # one report, not two
    return shown[0].data


def test_each_report_is_about_its_cell(executed):
    nb, folder = executed
    for index, name in REPORT_CELLS.items():
        data = _display(nb.cells[index])
        text = data["text/plain"]
        assert text.startswith(f"peakline · {name}\n"), text[:200]  # not the kernel's argv
        assert "ipykernel" not in text and "/tmp/" not in text
        assert f"{name}:" in text or "│" in text
        profile = read_profile(folder / f"cell{index + 1}.json")
        assert profile.program == name and profile.argv == [name]
        assert name in profile.files and not any("ipykernel" in f for f in profile.files)
        # The kernel's own threads wait all the time: shown apart, not the cell's wait.
        background = profile.background_wait_by_thread()
        names = {t.name for t in profile.threads if t.tid in background}
        assert background and ({"IOPub", "Heartbeat", "Control", "Shell channel"} & names
                               or any(n and n.startswith("Thread-") for n in names)), names
        assert "idle background threads waited" in text
        assert profile.user_sampled_s < profile.sampled_s
        assert profile.user_attributed_fraction > profile.attributed_fraction
        if index != 2:  # cell [3] runs for ~10 ms: peakline's own start and stop weigh more
            assert profile.user_attributed_fraction >= 0.5, profile.user_attributed_fraction


def test_the_cells_measurements_are_right(executed):
    nb, folder = executed
    cell2 = read_profile(folder / "cell2.json")
    line2 = next(ln for ln in cell2.files["cell [2]"].lines if ln.lineno == 2)
    assert line2.alloc_bytes >= 60 * 2**20 and (line2.live_at_peak_bytes or 0) >= 60 * 2**20
    assert cell2.peak_bytes >= 64 * 2**20
    text = _display(nb.cells[1])["text/plain"]
    assert "▲ cell [2]:2" in text and "big = np.ones" in text
    cell3 = read_profile(folder / "cell3.json")
    assert cell3.memory.sampling_interval_bytes == 64 * 1024
    cell4 = read_profile(folder / "cell4.json")
    assert any(f.name == "spin" for f in cell4.files["cell [4]"].functions)
    check = "".join(o.get("text", "") for o in nb.cells[4].outputs)
    assert f"TOTAL {sum(i * i for i in range(300_000))}" in check
    assert int(check.split("PEAK")[1].split()[0]) >= 64 * 2**20


def test_each_output_is_isolated_with_a_static_fallback(executed):
    nb, _ = executed
    ids = set()
    for index, name in REPORT_CELLS.items():
        page = _display(nb.cells[index])["text/html"]
        ids |= set(re.findall(r'id="(peakline-[0-9a-f]{32})"', page))
        assert page.count('class="peakline-static"') == 1 and "<table" in page
        assert f"peakline · {name}" in page  # the static summary, readable without scripts
        assert "</script" not in page.split('class="peakline-page">', 1)[1].split("</script>")[0]
        assert "getElementById(\"peakline-" in page and 'id="summary"' not in page
    assert len(ids) == 3  # a random id per output: nothing shared between reports


def _count_titles(text: str) -> dict[str, int]:
    return {name: text.count(f"peakline · {name}\n") + text.count(f"peakline · {name}<")
            for name in REPORT_CELLS.values()}


def test_nbconvert_text_and_markdown_show_each_report_once(executed):
    nb, _ = executed
    from nbconvert import MarkdownExporter
    from traitlets.config import Config

    # Text: what a converter that prefers text/plain shows (the terminal report), as
    # `jupyter nbconvert --to markdown --NbConvertBase.display_data_priority="['text/plain']"`
    text_only = Config({"NbConvertBase": {"display_data_priority": ["text/plain"]}})
    body, _ = MarkdownExporter(config=text_only).from_notebook_node(nb)
    assert _count_titles(body) == dict.fromkeys(REPORT_CELLS.values(), 1), _count_titles(body)
    assert "IPython.core.display.HTML object" not in body and "<script" not in body
    # Markdown keeps the HTML: the static summary of each report, once.
    body, _ = MarkdownExporter().from_notebook_node(nb)
    assert _count_titles(body) == dict.fromkeys(REPORT_CELLS.values(), 1), _count_titles(body)


@pytest.fixture(scope="module")
def notebook_html(executed):
    nb, folder = executed
    from nbconvert import HTMLExporter
    body, _ = HTMLExporter().from_notebook_node(nb)
    path = folder / "executed.html"
    path.write_text(body, encoding="utf-8")
    return path



def test_the_notebook_html_shows_three_distinct_reports(browser, notebook_html):
    page = browser.new_page(viewport={"width": 1200, "height": 900})
    problems = []
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type == "error" else None)
    # nbconvert's page links MathJax and RequireJS from a CDN: nothing leaves this machine
    page.route(re.compile(r"^https?://"), lambda route: route.abort())
    page.goto(notebook_html.as_uri())
    page.wait_for_function("document.querySelectorAll('iframe.peakline-report').length == 3")
    frames = page.query_selector_all("iframe.peakline-report")
    titles, holders = [], []
    for frame_element in frames:
        frame = frame_element.content_frame()
        frame.wait_for_selector("#summary h1")
        titles.append(frame.inner_text("#summary h1"))
        holders.append(frame.eval_on_selector_all("table tbody tr", "rows => rows.length"))
        box = frame_element.bounding_box()
        assert box and box["height"] > 300 and box["width"] > 600
    assert [t.replace("peakline", "").strip() for t in titles] == list(REPORT_CELLS.values())
    assert all(n > 0 for n in holders)
    # where scripts ran, each static summary is hidden behind its report
    assert page.eval_on_selector_all(".peakline-static",
                                     "els => els.map(e => getComputedStyle(e).display)") == \
        ["none"] * 3
    first = frames[0].content_frame()
    # cell [2]'s own peak holder: the 64 MiB block, and the array's 96-byte object, sampled at
    # 512 KiB once in 5,500 runs (64.5 MiB)
    assert re.search(r"\b64\.[05] MiB", first.inner_text("body"))
    assert "cell [2]" not in frames[1].content_frame().inner_text("#summary")
    problems = [p for p in problems if "Failed to load resource" not in p]  # the CDN links
    assert not problems, problems
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "jupyter-notebook.png"), full_page=False)
    frames[0].scroll_into_view_if_needed()
    frames[0].screenshot(path=str(ARTIFACTS / "jupyter-cell-report.png"))
    page.close()


def test_without_scripts_the_static_summaries_show(browser, notebook_html):
    context = browser.new_context(java_script_enabled=False,
                                  viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.goto(notebook_html.as_uri())
    assert page.query_selector_all("iframe.peakline-report") == []
    statics = page.query_selector_all(".peakline-static")
    assert len(statics) == 3
    for element, name in zip(statics, REPORT_CELLS.values()):
        assert element.is_visible() and f"peakline · {name}" in element.inner_text()
    statics[0].screenshot(path=str(ARTIFACTS / "jupyter-static-fallback.png"))
    context.close()


def test_old_and_new_option_spellings_agree():
    from peakline import jupyter
    parser = jupyter._parser()
    old = parser.parse_args(["--reduced", "--memory-sampling-interval", "512K"])
    new = parser.parse_args(["--reduced-profile", "--memory-sampling-interval", "524288"])
    assert vars(old) == vars(new) and old.memory_sampling_interval == 512 * 1024
    opts, statement = jupyter._split("--cpu-only -o out.json  total = sum(range(10))")
    assert opts.cpu_only and opts.outfile == "out.json" and statement == "total = sum(range(10))"
    with pytest.raises(SystemExit):
        parser.parse_args(["--memory"])  # no abbreviations, as on the command line
    assert json.loads(json.dumps(vars(opts)))  # plain values
