"""`peakline sweep` end to end: real sweeps of calibration programs whose growth is known by
construction (tests/programs/sweep_growth.py), the scikit-learn shape, failures, Ctrl-C,
bad input, `peakline view` of the sweep file, and the HTML report in headless Chromium."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from peakline_proc import PROGRAMS

from peakline.sweep.sweep_file import read_sweep

GROWTH = PROGRAMS / "sweep_growth.py"
SKLEARN = PROGRAMS / "sweep_sklearn.py"
SIZES = [1000, 1495, 2236, 3344, 5000]
TARGET = 20000  # 4x the largest size


def sweep(args: list[str], cwd: Path, timeout: float = 300,
          **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "peakline", "sweep", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, **kwargs)


def view(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "peakline", "view", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60)


def marked(path: Path, mark: str) -> int:
    return next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if text.rstrip().endswith(f"# {mark}"))


def line_fit(document: dict, lineno: int, quantity: str) -> dict:
    return next(f for f in document["fits"]["lines"]
                if f["file"] == str(GROWTH) and f["lineno"] == lineno
                and f["quantity"] == quantity)


@pytest.fixture(scope="module")
def growth(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sweep")
    proc = sweep(["--vary", "N=1000..5000x5", "--target", f"N={TARGET}",
                  "--memory-sampling-interval", "64K", "-o", "sweep.json",
                  "--html", "sweep.html", str(GROWTH)], folder)
    return folder, proc


def test_a_sweep_runs_each_size_in_its_own_profiled_process(growth):
    folder, proc = growth
    assert proc.returncode == 0, proc.stderr
    document = read_sweep(folder / "sweep.json")
    assert document["format"] == "peakline-sweep" and document["version"] == 1
    assert document["vary"] == [{"name": "N", "values": SIZES}]
    assert document["target"] == {"N": TARGET} and document["complete"] is True
    assert [r["params"] for r in document["runs"]] == [{"N": n} for n in SIZES]
    pids = set()
    for run, n in zip(document["runs"], SIZES):
        assert run["status"] == "ok" and run["exit_code"] == 0
        profile = json.loads((folder / run["profile"]).read_text())
        assert profile["memory"]["sampling_interval_bytes"] == 64 * 1024  # passed through
        assert run["peak_bytes"] == profile["peak_bytes"] > 4096 * n + n * n
        assert run["elapsed_s"] == profile["elapsed_s"]
        assert f"N={n} held" in (folder / run["log"]).read_text()  # the program's stdout
        pids.add(profile["pid"])
    assert len(pids) == len(SIZES)
    # progress: which run, elapsed, estimated remaining
    assert "[3/5] N=2236" in proc.stderr and "left" in proc.stderr
    assert "elapsed" in proc.stderr


@pytest.mark.parametrize("mark, model, truth", [
    ("LINEAR", "linear", lambda n: 4096 * n),
    ("QUADRATIC", "quadratic", lambda n: n * n),
    ("CONSTANT", "constant", lambda n: 8 << 20),
    ("NOISY", "linear", lambda n: 2048 * n),
])
@pytest.mark.parametrize("quantity", ["alloc_bytes", "live_at_peak_bytes"])
def test_lines_of_known_growth_get_their_class_and_prediction(growth, mark, model, truth,
                                                              quantity):
    folder, _ = growth
    document = read_sweep(folder / "sweep.json")
    fit = line_fit(document, marked(GROWTH, mark), quantity)
    assert fit["name"] == "N" and fit["model"] == model, fit
    assert fit["quality"] >= 0.9
    predicted = fit["prediction"]
    bound = 0.10 if mark != "NOISY" else 0.15
    assert abs(predicted["value"] / truth(TARGET) - 1) < bound, (predicted, truth(TARGET))
    assert predicted["low"] <= predicted["value"] <= predicted["high"]


def test_the_program_peak_is_fitted_and_predicted(growth):
    folder, _ = growth
    document = read_sweep(folder / "sweep.json")
    peak = document["fits"]["program"]["peak_bytes"]
    assert peak["model"] == "quadratic"  # 8 MiB + 6144 N + N^2 (+ the interpreter)
    held = (8 << 20) + 6144 * TARGET + TARGET * TARGET
    assert peak["prediction"]["low"] <= held * 1.05 and peak["prediction"]["high"] >= held
    for quantity in ("peak_rss_bytes", "cpu_s", "elapsed_s"):
        assert document["fits"]["program"][quantity]["name"] == "N"
    at = document["fits"]["at_target"][0]
    assert at["memory"][0]["lineno"] == marked(GROWTH, "QUADRATIC")
    assert 0.6 < at["memory"][0]["share"] <= 1.0


def test_terminal_report_and_view_say_the_same(growth):
    folder, proc = growth
    again = view(["sweep.json"], folder)
    assert again.returncode == 0, again.stderr
    for text in (proc.stdout, again.stdout):
        assert "How the program grows with N" in text
        assert f"at N={TARGET // 1000}K the peak is ~" in text
        assert "Share of memory held at the peak by line, as N grows" in text
        assert "quadratic = bytearray(N * N)" in text
    assert again.stdout == proc.stdout
    as_json = view(["--json", "sweep.json"], folder)
    assert json.loads(as_json.stdout) == json.loads((folder / "sweep.json").read_text())
    page = view(["--html", "again.html", "sweep.json"], folder)
    assert page.returncode == 0 and (folder / "again.html").read_text() == \
        (folder / "sweep.html").read_text()


def test_as_arg_substitutes_the_placeholder(tmp_path):
    proc = sweep(["--as", "arg", "--vary", "N=400,800,1600", "--cpu-only", "-o", "s.json",
                  "--no-report", str(GROWTH), "{N}"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = read_sweep(tmp_path / "s.json")
    for run in document["runs"]:
        log = (tmp_path / run["log"]).read_text()
        assert f"N={run['params']['N']} held" in log
        profile = json.loads((tmp_path / run["profile"]).read_text())
        assert profile["argv"][-1] == str(run["params"]["N"]) and "peak_bytes" not in profile
    assert proc.stdout == ""


FLAKY = """\
import os, signal, sys
n = int(os.environ["N"])
if n == 2000:
    raise RuntimeError("broken at 2000")
if n == 3000:
    os.kill(os.getpid(), signal.SIGKILL)
data = bytearray(4096 * n)
print("ok", n)
"""


def test_failed_and_killed_runs_are_reported_and_the_others_kept(tmp_path):
    (tmp_path / "flaky.py").write_text(FLAKY)
    proc = sweep(["--vary", "N=1000,2000,3000,4000,5000,6000", "-o", "s.json", "flaky.py"],
                 tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    runs = read_sweep(tmp_path / "s.json")["runs"]
    assert [r["status"] for r in runs] == ["ok", "failed", "killed", "ok", "ok", "ok"]
    assert runs[1]["exit_code"] == 1 and "RuntimeError: broken at 2000" in runs[1]["error"]
    assert runs[2]["exit_code"] == -signal.SIGKILL and "signal 9" in runs[2]["error"]
    assert "✗ run 2 N=2000: failed" in proc.stdout
    document = read_sweep(tmp_path / "s.json")
    assert document["fits"]["program"]["peak_bytes"]["points"] == 4  # the four that worked


def test_a_script_failing_every_run_is_one_line_and_keeps_the_record(tmp_path):
    (tmp_path / "bad.py").write_text("1 / 0\n")
    proc = sweep(["--vary", "N=1,2,3", "-o", "s.json", "bad.py"], tmp_path)
    assert proc.returncode == 1
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("peakline: error:")]
    assert len(errors) == 1 and "every run failed" in errors[0]
    assert "ZeroDivisionError: division by zero" in errors[0] and "Traceback" not in proc.stderr
    runs = read_sweep(tmp_path / "s.json")["runs"]
    assert [r["status"] for r in runs] == ["failed"] * 3


SLOW = """\
import os, time
if int(os.environ["N"]) >= 2:
    time.sleep(60)
"""


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_stops_cleanly_and_keeps_what_is_done(tmp_path, signum, status):
    (tmp_path / "slow.py").write_text(SLOW)
    proc = subprocess.Popen([sys.executable, "-m", "peakline", "sweep", "--vary", "N=1,2,3",
                             "-o", "s.json", "slow.py"], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "s.runs" / "run-002.log").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        time.sleep(1.5)  # the second run is asleep inside the program now
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, err
    assert "Traceback" not in err and "interrupted; stopping" in err
    document = read_sweep(tmp_path / "s.json")
    assert document["complete"] is False
    assert [r["status"] for r in document["runs"]] == ["ok", "interrupted"]
    assert (tmp_path / document["runs"][1]["profile"]).exists()  # written on the way out


@pytest.mark.parametrize("args, fragment", [
    (["--vary", "N=1,x,3"], "--vary N: not a number: 'x'"),
    (["--vary", "N=1e4..1e2x3"], "must go up"),
    (["--vary", "N=1000"], "1 value; no fit with fewer than three sizes"),
    (["--vary", "N=1000,2000"], "2 values; no fit with fewer than three sizes"),
    (["--as", "arg", "--vary", "N=1,2,3"], "unknown placeholder {ROWS}"),
    (["--vary", "N=1,2,3", "--target", "M=5"], "--target M: not a varied name"),
    (["--as", "both", "--vary", "N=1,2,3"], "expected env or arg"),
    ([], "nothing to vary"),
])
def test_bad_input_is_one_line_and_exit_status_2(tmp_path, args, fragment):
    (tmp_path / "p.py").write_text("print('ran')\n")
    proc = sweep([*args, "p.py", "{ROWS}", "{N}"], tmp_path, timeout=60)
    assert proc.returncode == 2
    assert fragment in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) in (1, 2)  # argparse: usage + error
    assert not any(tmp_path.glob("*.runs"))  # nothing ran


def test_a_corrupt_sweep_file_is_one_line_exit_3(tmp_path):
    (tmp_path / "s.json").write_text('{"format": "peakline-sweep", "version": 1, "program": "x"}')
    proc = view(["s.json"], tmp_path)
    assert proc.returncode == 3 and proc.stderr.count("\n") == 1
    assert "missing required field 'vary'" in proc.stderr
    (tmp_path / "s.json").write_text('{"format": "peakline-sweep", "version": 9}')
    assert "newer peakline" in view(["s.json"], tmp_path).stderr


def test_imports_dominate_small_sizes_and_data_and_fitting_large_ones(tmp_path):
    # Unprofiled on the 2-vCPU CI kind: the imports take ~2.5 s at every size; data and fit
    # take ~1.7 s at 200K rows (too close to call) and ~6 s at 800K.
    proc = sweep(["--vary", "NUM_SAMPLES=1000,20000,800000", "-o", "s.json", "--no-report",
                  str(SKLEARN)], tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    from peakline.sweep.analysis import shares
    document = read_sweep(tmp_path / "s.json")
    marks = {i: text.rsplit("# ", 1)[1] for i, text in
             enumerate(SKLEARN.read_text().splitlines(), 1) if "  # " in text}

    def by_kind(measure: str) -> list[dict[str, float]]:
        data = shares(document["vary"], document["runs"], "NUM_SAMPLES", measure, limit=20)
        out = [dict.fromkeys(("IMPORT", "DATA", "FIT"), 0.0) for _ in data["x"]]
        for series in data["series"]:
            kind = marks.get(series["lineno"], "")
            if kind in out[0]:
                for i, share in enumerate(series["shares"]):
                    out[i][kind] += share
        return out

    time_shares = by_kind("time")
    small, large = time_shares[0], time_shares[-1]
    assert small["IMPORT"] > 0.5 and small["IMPORT"] > 3 * (small["DATA"] + small["FIT"]), \
        time_shares
    assert large["DATA"] + large["FIT"] > large["IMPORT"], time_shares
    held = by_kind("held")
    assert held[-1]["DATA"] > 0.5 > held[0]["DATA"]


# ---- the HTML report in a real browser ----------------------------------------------------

ARTIFACTS = Path(os.environ.get("PEAKLINE_TEST_ARTIFACTS",
                                Path(__file__).resolve().parents[1] / "artifacts"))




def test_html_report_in_chromium(browser, growth):
    folder, _ = growth
    html = (folder / "sweep.html").read_text()
    import re
    assert "<script" not in html and "default-src 'none'" in html  # no script at all
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html) and "url(" not in html
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("request", lambda r: problems.append(f"network: {r.url}")
            if not r.url.startswith(("file:", "data:")) else None)
    try:
        page.goto((folder / "sweep.html").as_uri())
        page.wait_for_load_state("load")
        assert "at N=20K the peak is ~" in page.locator("#target").text_content()
        # the fitted curves with the measured points, one chart per program quantity
        peak_chart = page.locator("figure.fit-chart[data-quantity=peak_bytes]")
        assert peak_chart.is_visible() and "quadratic" in peak_chart.text_content()
        assert peak_chart.locator("circle.point").count() == len(SIZES)
        assert peak_chart.locator("path.curve").count() == 1
        assert peak_chart.locator("circle.predicted-point").count() == 1
        # the seed experiment: stacked shares, one bar segment per (size, line) with a share
        held = page.locator("figure.share-chart[data-measure=held]")
        assert held.is_visible()
        assert held.locator("rect.share").count() >= 3 * len(SIZES)
        heights = held.locator("rect.share").evaluate_all(
            "rs => rs.map(r => r.getBBox().height)")
        total = sum(heights) / len(SIZES)
        assert total == pytest.approx(220 - 40, rel=0.02)  # every bar adds up to 100%
        assert "QUADRATIC" in held.locator(".legend").text_content()
        for measure in ("alloc", "time"):
            assert page.locator(f"figure.share-chart[data-measure={measure}]").count() == 1
        # the growing lines' own curves: the linear, quadratic and noisy lines, not the constant
        line_charts = page.locator("figure.line-chart")
        assert line_charts.count() == 3
        largest = f"sweep_growth.py:{marked(GROWTH, 'QUADRATIC')} "
        assert line_charts.all_text_contents()[0].startswith(largest)  # the largest first
        assert line_charts.first.locator("circle.point").count() == len(SIZES)
        rows = page.locator("table.lines tbody tr")
        assert rows.count() >= 4 and page.locator("table.runs tbody tr").count() == len(SIZES)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "sweep-report.png"), full_page=True)
        assert problems == []
    finally:
        page.close()


PHASED = """\
import os
import peakline
n = int(os.environ["N"])
with peakline.phase("grow"):
    data = bytearray(1000 * n)
"""


def test_modules_run_with_dash_m_and_phases_are_fitted(tmp_path):
    (tmp_path / "phased.py").write_text(PHASED)
    proc = sweep(["--vary", "N=2000,4000,8000,16000", "--no-report", "-o", "s.json", "-m",
                  "phased"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = read_sweep(tmp_path / "s.json")
    assert document["program"] == "-m phased"
    fits = {f["quantity"]: f for f in document["fits"]["phases"] if f["phase"] == "grow"}
    assert fits["net_bytes"]["model"] == "linear" and fits["peak_bytes"]["model"] == "linear"
    assert fits["net_bytes"]["coefficients"]["b"] == pytest.approx(1000, rel=0.05)


def test_view_fits_a_sweep_that_was_killed_before_its_fits(growth, tmp_path):
    folder, proc = growth
    document = json.loads((folder / "sweep.json").read_text())
    document["fits"] = {"program": {}, "lines": [], "functions": [], "phases": []}
    document["complete"] = False
    (tmp_path / "killed.json").write_text(json.dumps(document))
    shown = view([str(tmp_path / "killed.json")], folder)
    assert shown.returncode == 0, shown.stderr
    assert "stopped early" in shown.stdout
    assert shown.stdout.split("How the program grows", 1)[1] == \
        proc.stdout.split("How the program grows", 1)[1]


TABLE = """\
import os
rows, cols = int(os.environ["ROWS"]), int(os.environ["COLS"])
table = bytearray(rows * cols * 64)  # TABLE
"""


def test_two_names_make_the_cross_product_and_each_is_fitted_along_its_slice(tmp_path):
    (tmp_path / "table.py").write_text(TABLE)
    proc = sweep(["--vary", "ROWS=1000,2000,4000", "--vary", "COLS=100,200,400",
                  "--target", "ROWS=16000", "--target", "COLS=800", "--no-report",
                  "--memory-sampling-interval", "64K", "-o", "s.json", "table.py"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = read_sweep(tmp_path / "s.json")
    assert len(document["runs"]) == 9
    assert document["runs"][1]["params"] == {"ROWS": 1000, "COLS": 200}  # first name slowest
    assert set(document["fits"]["program_by_name"]) == {"ROWS", "COLS"}
    fits = {f["name"]: f for f in document["fits"]["lines"]
            if f["lineno"] == 3 and f["quantity"] == "live_at_peak_bytes"}
    # along ROWS, COLS is held at 400 (its largest): 64 * 400 bytes per row, and vice versa
    assert fits["ROWS"]["model"] == "linear" and fits["COLS"]["model"] == "linear"
    assert fits["ROWS"]["prediction"]["value"] == pytest.approx(16000 * 400 * 64, rel=0.05)
    assert fits["COLS"]["prediction"]["value"] == pytest.approx(4000 * 800 * 64, rel=0.05)
    assert fits["ROWS"]["points"] == 3 and fits["COLS"]["points"] == 3


def test_repeat_runs_each_size_again_and_every_run_is_a_point(tmp_path):
    proc = sweep(["--repeat", "2", "--vary", "N=400,800,1600", "--no-report",
                  "--memory-sampling-interval", "64K", "-o", "s.json", str(GROWTH)], tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = read_sweep(tmp_path / "s.json")
    assert [(r["params"]["N"], r["repeat"]) for r in document["runs"]] == [
        (400, 0), (400, 1), (800, 0), (800, 1), (1600, 0), (1600, 1)]
    linear = line_fit(document, marked(GROWTH, "LINEAR"), "alloc_bytes")
    assert linear["model"] == "linear" and linear["points"] == 6 and linear["sizes"] == 3
