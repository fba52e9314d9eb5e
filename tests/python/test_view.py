"""`peakline view PROFILE [--text | --html OUT | --json | --speedscope OUT]` as users run it:
a subprocess, its exit status, and what it prints on stdout and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from synthetic_memory import with_memory

from peakline.model import read_profile, write_profile
from peakline.model.profile_file import dumps_profile


def view(*args, cwd=None, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "peakline", "view", *map(str, args)],
                          capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={**os.environ, "COLUMNS": "200", **(env or {})})


@pytest.fixture
def saved(app_profile, tmp_path):
    path = tmp_path / "p.json"
    write_profile(with_memory(app_profile), path)
    return path


def test_terminal_report_is_the_default(saved):
    proc = view(saved)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("peakline · app.py --fast")
    assert "# HOT" in proc.stdout and "peak 590.5 MiB at 0.91 s" in proc.stdout
    assert "\x1b[" not in proc.stdout  # not a TTY: no colour
    assert proc.stderr == ""


def test_json_prints_the_profile_file(saved):
    proc = view(saved, "--json", "-")  # --json OUT, as for `peakline run`
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout == dumps_profile(read_profile(saved))


@pytest.mark.parametrize("args", [["--json"], ["--json", "{saved}"], ["--json", "--text"]])
def test_the_old_json_flag_still_prints_the_profile_with_a_note(saved, args):
    args = [a.format(saved=saved) for a in args]
    proc = view(*([saved] if str(saved) not in args else []), *args)
    assert proc.returncode == 0, proc.stderr
    assert dumps_profile(read_profile(saved)) in proc.stdout
    assert "`--json` now takes OUT" in proc.stderr and "--json -" in proc.stderr


def test_json_out_writes_a_file(saved, tmp_path):
    out = tmp_path / "copy.json"
    proc = view(saved, "--json", out)
    assert proc.returncode == 0 and proc.stdout == ""
    assert out.read_text() == dumps_profile(read_profile(saved))


def test_html_and_speedscope_write_files_and_say_so(saved, tmp_path):
    html_out, ss_out = tmp_path / "r.html", tmp_path / "r.speedscope.json"
    proc = view(saved, "--html", html_out, "--speedscope", ss_out)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # no terminal report unless --text
    assert f"HTML report written to {html_out}" in proc.stderr
    assert f"speedscope profile written to {ss_out}" in proc.stderr
    assert html_out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert json.loads(ss_out.read_text())["profiles"]
    both = view(saved, "--text", "--html", html_out)
    assert both.returncode == 0 and "# HOT" in both.stdout


def test_thresholds_imply_the_reduced_view(saved):
    full = view(saved, "--all-lines").stdout
    assert "def main():" in full  # a line without activity, shown with --all-lines
    assert "def main():" not in view(saved).stdout  # active lines only by default
    reduced = view(saved, "--malloc-threshold", "6M").stdout
    assert "def main():" not in reduced and "# COLD" not in reduced  # 5 MiB < 6M
    assert "# COLD" in view(saved, "--malloc-threshold", "4M").stdout
    table = [r for r in view(saved, "--cpu-percent-threshold", "30", "--malloc-threshold",
                             "1G").stdout.splitlines() if "│" in r]
    assert any("# HOT" in r for r in table) and not any("# NATIVE" in r for r in table)


@pytest.mark.parametrize("args, message", [
    (["--malloc-threshold", "lots"], "not a byte size"),
    (["--cpu-percent-threshold", "150"], "between 0 and 100"),
    (["--no-such-option"], "unrecognized arguments"),
])
def test_bad_options_fail_clearly(saved, args, message):
    proc = view(saved, *args)
    assert proc.returncode == 2 and message in proc.stderr
    assert "Traceback" not in proc.stderr


def _one_line_error(proc, *fragments):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("peakline: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0]
    assert proc.stdout == ""


def test_missing_file(tmp_path):
    _one_line_error(view(tmp_path / "nope.json"), "nope.json", "cannot read")


def test_directory_instead_of_a_file(tmp_path):
    _one_line_error(view(tmp_path), "cannot read")


def test_truncated_file(saved):
    text = saved.read_text()
    saved.write_text(text[: len(text) // 2])
    _one_line_error(view(saved), "not valid JSON (truncated or corrupt)")


@pytest.mark.parametrize("content, fragment", [
    (b"", "empty file"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not UTF-8"),
    (b"{\"format\": \"peakline\", ", "not valid JSON"),
    (b"[1, 2, 3]", "expected an object"),
    (b"{\"traceEvents\": []}", "not a peakline profile"),
    (b"{\"format\": \"speedscope\", \"version\": 1}", "not a peakline profile"),
])
def test_corrupt_and_foreign_files(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    _one_line_error(view(path), fragment)


def test_newer_format_version(saved):
    data = json.loads(saved.read_text())
    data["version"] = 99
    saved.write_text(json.dumps(data))
    _one_line_error(view(saved), "written by a newer peakline", "upgrade")


def test_unwritable_output(saved, tmp_path):
    _one_line_error(view(saved, "--html", tmp_path / "no" / "such" / "dir.html"),
                    "cannot write HTML report")


def test_a_closed_pipe_ends_quietly(saved):
    reader = subprocess.Popen([sys.executable, "-m", "peakline", "view", str(saved)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env={**os.environ, "COLUMNS": "200"})
    try:
        reader.stdout.read(10)
        reader.stdout.close()  # like `| head -c 10`
        _, err = reader.communicate(timeout=60)
    finally:
        reader.kill()
        reader.wait()
    assert b"Traceback" not in err


def test_run_writes_every_output(tmp_path):
    script = tmp_path / "tiny.py"
    script.write_text("x = [str(i) for i in range(300_000)]\nprint(len(x))\n")
    html_out, ss_out, json_out = tmp_path / "t.html", tmp_path / "t.ss.json", tmp_path / "t2.json"
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "-o", str(tmp_path / "t.json"),
                           "--html", str(html_out), "--speedscope", str(ss_out), "--json",
                           str(json_out), "--reduced-profile", str(script)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "300000\n"  # the program's stdout is its own
    assert "list" not in proc.stdout and "[str(i) for i" in proc.stderr  # report on stderr
    assert read_profile(json_out) == read_profile(tmp_path / "t.json")
    assert html_out.stat().st_size > 0 and json.loads(ss_out.read_text())["profiles"]


def test_run_checks_output_paths_before_running(tmp_path):
    script = tmp_path / "side_effect.py"
    script.write_text("open('ran', 'w').close()\n")
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--html",
                           str(tmp_path / "missing" / "r.html"), str(script)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 2 and "no such directory" in proc.stderr
    assert not (tmp_path / "ran").exists()
