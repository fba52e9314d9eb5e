"""What users coming from Scalene, memray or py-spy type, and what peakline answers: no prefix
abbreviations, other profilers' flags answered with peakline's equivalent, `peakline
script.py`, `--html script.py`, a --profile-only that matches nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from peakline.cli import main as cli_main
from peakline.cli import options, run, view


def peakline(capsys, *args) -> tuple[int, str]:
    """In-process `peakline ARGS`: (exit status, stderr)."""
    try:
        code = cli_main.main(list(args))
    except SystemExit as exc:  # argparse in a command that does not catch it
        code = exc.code
    return code, capsys.readouterr().err


@pytest.mark.parametrize("command", ["run", "view", "check", "compare", "sweep"])
def test_no_command_accepts_abbreviated_options(capsys, command):
    # --memory-s would have been --memory-sampling-interval, --cpu-o --cpu-only
    code, err = peakline(capsys, command, "--cpu-o", "x.py")
    assert code == 2 and "unrecognized arguments: --cpu-o" in err, err


@pytest.mark.parametrize("flag, answer", [
    ("--cpu", "--cpu-only"),
    ("--memory", "--memory-sampling-interval"),
    ("--cli", "terminal report is the default"),
    ("--native", "always measured"),
    ("--reduced", "--all-lines"),
    ("--web", "--html OUT.html"),
    ("--rate", "--cpu-sampling-rate"),
    ("--subprocesses", "--no-children"),
])
def test_other_profilers_flags_get_the_peakline_equivalent(capsys, flag, answer):
    code, err = peakline(capsys, "run", flag, "x.py")
    assert code == 2, err
    assert f"{flag} is not a peakline option" in err and answer in err, err
    assert err.count("\n") <= 3  # usage line(s) and one error line, no traceback


def test_other_profilers_flags_are_answered_in_view_too(capsys, tmp_path):
    code, err = peakline(capsys, "view", "--cli", str(tmp_path / "p.json"))
    assert code == 2 and "--cli is not a peakline option" in err


def test_peaklines_own_flags_are_never_answered_as_foreign():
    ours = {f for o in run.OPTIONS for f in o.flags}
    ours |= {f for o in options.output_options(options.VIEW) for f in o.flags}
    assert not ours & set(options.FOREIGN_FLAGS)


def test_a_value_that_looks_like_a_foreign_flag_is_a_value():
    assert options.foreign_flag(["-o", "--cpu"], run.OPTIONS) is None
    assert options.foreign_flag(["--profile-only=--memory"], run.OPTIONS) is None


@pytest.mark.parametrize("args", [["script.py"], ["script.py", "--epochs", "3"],
                                  ["--cpu-only", "train.py"], ["-m", "pkg.mod"]])
def test_a_script_without_a_command_suggests_run(capsys, args):
    code, err = peakline(capsys, *args)
    assert code == 2
    assert f"did you mean `peakline run {' '.join(args)}`?" in err, err


def test_a_foreign_flag_without_a_command_gets_its_answer(capsys):
    code, err = peakline(capsys, "--cpu", "x.py")
    assert code == 2 and "--cpu is not a peakline option" in err


def test_an_unknown_word_gets_no_run_suggestion(capsys):
    code, err = peakline(capsys, "profile")
    assert code == 2 and "unknown command 'profile'" in err and "did you mean" not in err


@pytest.mark.parametrize("flag", ["--html", "--json", "--speedscope", "-o"])
def test_an_output_flag_that_swallowed_the_script_says_so(capsys, tmp_path, flag):
    script = tmp_path / "train.py"
    script.write_text("print('ran')\n")
    code, err = peakline(capsys, "run", flag, str(script))
    assert code == 2, err
    assert "takes the output file name and got the script" in err
    suffix = ".html" if flag == "--html" else ".json"
    assert f"`peakline run {flag} train{suffix} {script}`" in err
    assert script.read_text() == "print('ran')\n"  # not overwritten


def test_profile_only_that_matches_nothing_says_so_at_the_end(tmp_path):
    script = tmp_path / "app.py"
    script.write_text("total = sum(i * i for i in range(100_000))\nprint(total)\n")
    proc = subprocess.run([sys.executable, "-m", "peakline", "run", "--cpu-only",
                           "--profile-only", "app,no_such_dir", "-o", str(tmp_path / "p.json"),
                           str(script)], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "--profile-only 'no_such_dir' matched no file the program ran" in last, proc.stderr
    assert "'app' matched" not in proc.stderr  # the script: it ran, sampled or not


def test_profile_only_unmatched_lists_each_part_that_matched_nothing():
    files = ["/src/app/main.py", "/src/lib/util.py"]
    assert run.profile_only_unmatched(("app", "lib", "tests", "x"), files) == ["tests", "x"]
    assert run.profile_only_unmatched((), files) == []


def test_view_json_reads_the_old_spelling_as_standard_output():
    assert view._old_json_spelling(["p.json", "--json"]) == ["p.json", "--json", "-"]
    assert view._old_json_spelling(["--json", "p.json"]) == ["--json", "-", "p.json"]
    assert view._old_json_spelling(["p.json", "--json", "out.json"]) == \
        ["p.json", "--json", "out.json"]
    assert view._old_json_spelling(["p.json", "--json", "-"]) == ["p.json", "--json", "-"]
    assert view._old_json_spelling(["--json", "p.json", "--html", "r.html"]) == \
        ["--json", "-", "p.json", "--html", "r.html"]  # r.html is --html's, not a profile
