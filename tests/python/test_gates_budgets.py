"""Budget names and values (peakline.gates.budgets): one table for the CLI, pyproject.toml,
the pytest plugin and the JSON verdict; the check command line is read with run's options."""

from __future__ import annotations

import pytest

from peakline.cli import check, run
from peakline.errors import UsageError
from peakline.gates import budgets

MiB = 1 << 20


@pytest.mark.parametrize("text, expected", [
    ("512K", 512 * 1024), ("200MB", 200 * MiB), ("1.5GiB", 3 * (1 << 29)), ("4096", 4096),
    ("2m", None)])
def test_sizes_use_the_shared_byte_size_parser(text, expected):
    from peakline.reporters._format import parse_byte_size
    if expected is None:
        expected = parse_byte_size(text)
    assert budgets.convert("max_peak", text, source="x") == expected == parse_byte_size(text)


@pytest.mark.parametrize("text, seconds", [("90s", 90.0), ("2m", 120.0), ("500ms", 0.5),
                                           ("1.5", 1.5), ("1h", 3600.0), (" 3 s ", 3.0)])
def test_durations(text, seconds):
    assert budgets.convert("max_time", text, source="x") == seconds


def test_numbers_flags_and_rates():
    assert budgets.convert("max_peak", 1024, source="x") == 1024
    assert budgets.convert("max_cpu", 2, source="x") == 2.0
    assert budgets.convert("no_leaks", True, source="x") is True
    assert budgets.convert("no_leaks", "yes", source="x") is True
    assert budgets.convert("max_leak_rate", "10M/s", source="x") == 10 * MiB
    assert budgets.parse_assignment("max-peak=1GB", source="x") == ("max_peak", 1 << 30)
    assert budgets.parse_assignment("no_leaks", source="x") == ("no_leaks", True)


@pytest.mark.parametrize("name, value, words", [
    ("max_peek", "1G", "unknown budget 'max_peek'"), ("max_peak", "12XB", "not a byte size"),
    ("max_time", "soon", "not a duration"), ("max_peak", True, "expected a size"),
    ("max_peak", -5, "non-negative"), ("no_leaks", "maybe", "true or false"),
    ("tolerance", "ten", "not a percentage")])
def test_bad_values_are_one_line_usage_errors(name, value, words):
    with pytest.raises(UsageError) as error:
        budgets.convert(name, value, source="--x")
    assert words in str(error.value) and "\n" not in str(error.value)


def test_every_budget_is_a_check_flag_and_a_json_name():
    flags = {f for o in check.OPTIONS for f in o.flags}
    for spec in (*budgets.BUDGETS, *budgets.SETTINGS):
        assert spec.flag in flags and spec.flag == "--" + spec.name.replace("_", "-")
    # run's options are check's too, from run's own declaration (its --json excepted)
    run_flags = {f for o in run.OPTIONS for f in o.flags}
    assert run_flags - {"--json"} <= flags
    json_option = [o for o in check.OPTIONS if "--json" in o.flags]
    assert len(json_option) == 1 and json_option[0].dest == "verdict_json"


def test_check_command_line_split():
    argv = ["--max-peak", "1G", "--cpu-only", "-o", "p.json", "--json", "v.json", "--no-leaks",
            "script.py", "--max-peak", "arg"]
    ours, target = run.split_command_line(argv, check._VALUE_OPTIONS)
    assert target.script == "script.py" and target.args == ["--max-peak", "arg"]
    assert check.run_tokens(ours) == ["--cpu-only", "-o", "p.json"]
    opts = check.parse_options(ours)
    assert check.command_line_budgets(opts) == {"max_peak": 1 << 30, "no_leaks": True}
    assert opts.verdict_json == "v.json" and opts.cpu_only is True


def test_pyproject_global_script_and_module_tables(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.peakline.budgets]\nmax_peak = "1GB"\nmax_time = 30\nbaseline = "base.json"\n'
        '[tool.peakline.budgets."jobs/train.py"]\nmax_peak = "4GB"\n'
        '[tool.peakline.budgets."mypkg.serve"]\nmax_cpu = "2m"\nno_leaks = true\n')
    (tmp_path / "jobs").mkdir()
    found = budgets.find_pyproject(str(tmp_path / "jobs"))
    assert found == str(tmp_path / "pyproject.toml")
    plain = budgets.config_budgets(found, script=str(tmp_path / "other.py"))
    assert plain == {"max_peak": 1 << 30, "max_time": 30.0,
                     "baseline": str(tmp_path / "base.json")}
    train = budgets.config_budgets(found, script=str(tmp_path / "jobs" / "train.py"))
    assert train["max_peak"] == 4 << 30 and train["max_time"] == 30.0
    serve = budgets.config_budgets(found, module="mypkg.serve")
    assert serve["max_cpu"] == 120.0 and serve["no_leaks"] is True
    assert serve["max_peak"] == 1 << 30


def test_pyproject_errors_name_the_file(tmp_path):
    path = tmp_path / "pyproject.toml"
    path.write_text('[tool.peakline.budgets]\nmax_peak = "huge"\n')
    with pytest.raises(UsageError, match="pyproject.toml.*max_peak: not a byte size"):
        budgets.config_budgets(str(path))
    path.write_text('[tool.peakline.budgets\n')
    with pytest.raises(UsageError, match="not valid TOML"):
        budgets.config_budgets(str(path))


@pytest.mark.parametrize("tokens", [
    [], ["--max-peak", "1G", "--no-leaks"], ["--max-time=2m", "--cpu-only", "-o", "p.json"],
    ["--baseline", "old.json", "--tolerance", "5", "--repeat", "3", "--json=-"],
    ["--junit", "r.xml", "--summary", "s.md", "--max-line-peak", "10M", "--no-config"],
    ["--profile", "p.json", "--max-gpu-peak", "1G", "--max-leak-rate", "1M/s"],
], ids=lambda t: " ".join(t) or "(none)")
def test_check_fast_path_reads_like_argparse(tokens):
    from peakline.cli import options
    fast = options.parse(tokens, check.OPTIONS)
    assert fast is not None
    assert fast == options.parse_with_argparse(tokens, check.OPTIONS, prog="peakline check")
