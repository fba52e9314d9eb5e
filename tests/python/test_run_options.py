"""One declaration of what a profiling run measures (peakline/run_options.py), read by every
surface: `peakline run`, `check`, `sweep`, `attach`, the Jupyter magics, the API, the pytest
plugin. The same text is the same value everywhere, and a bad value gets the same message
everywhere, behind the option's name as that surface spells it."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import peakline
from peakline import jupyter, run_options
from peakline.cli import attach, check, run, sweep
from peakline.cli import main as cli_main
from peakline.errors import UsageError
from peakline.pytest_plugin import _marker_budgets

DECLARED = run_options.PROFILING


def test_the_command_lines_and_the_magics_take_the_declared_options_themselves():
    for surface in (run.OPTIONS, check.OPTIONS, jupyter._magic_options()):
        assert all(any(o is d for o in surface) for d in DECLARED)
    for subset in (sweep.RUN_OPTIONS, attach.SESSION_OPTIONS):
        assert subset and all(any(o is d for d in DECLARED) for o in subset)


def test_the_api_keywords_are_the_declared_keywords():
    parameters = inspect.signature(peakline.start).parameters
    keywords = {name for name in parameters if name != "program"}
    assert keywords == set(run_options.BY_KEYWORD)
    for keyword, option in run_options.BY_KEYWORD.items():
        assert parameters[keyword].default == option.default, keyword


TOKENS = ["--cpu-sampling-rate", "0.005", "--memory-sampling-interval", "64K",
          "--profile-only", "app, lib", "--profile-exclude", "tests", "--cpu-only", "--no-gpu",
          "--no-children", "-o", "p.json"]
KEYWORDS = {"cpu_sampling_interval": 0.005, "memory_sampling_interval": 64 * 1024,
            "profile_only": ("app", "lib"), "profile_exclude": "tests", "cpu_only": True,
            "gpu": False, "children": False, "outfile": "p.json"}


def _measured(values) -> dict:
    return {o.dest: getattr(values, o.dest) for o in DECLARED}


def test_the_same_options_read_the_same_on_every_surface():
    cli = run_options.check_command_line(run.parse_options(TOKENS))
    magic = jupyter._checked(jupyter._parser().parse_args(TOKENS))
    api = run_options.from_keywords(KEYWORDS)
    assert _measured(cli) == _measured(magic) == _measured(api)
    assert run_options.session_options(cli) == run_options.session_options(api)
    assert run_options.session_options(api).memory is False
    check_values = run_options.check_command_line(check.parse_options(TOKENS))
    assert _measured(check_values) == _measured(cli)
    sweep_values, passed = sweep.parse(["--vary", "N=1,2,3", *TOKENS[:-2]])
    assert passed == TOKENS[:-2]  # every run gets them as given
    attach_values = attach.build_parser().parse_args([*TOKENS[:4], "--cpu-only", "123"])
    run_options.check_command_line(attach_values, attach.SESSION_OPTIONS)
    assert attach_values.memory_sampling_interval == 64 * 1024


def test_the_magics_take_the_command_lines_byte_sizes():
    opts = jupyter._checked(jupyter._parser().parse_args(["--memory-sampling-interval", "1M"]))
    assert opts.memory_sampling_interval == 1 << 20


def _cli(capsys, *args) -> tuple[int, str]:
    try:
        code = cli_main.main(list(args))
    except SystemExit as exc:
        code = exc.code
    return code, capsys.readouterr().err


BAD = [  # (flag, text, keyword, value, the message every surface gives)
    ("--cpu-sampling-rate", "5", "cpu_sampling_interval", 5.0,
     "must be between 0.001 and 1 second"),
    ("--cpu-sampling-rate", "0", "cpu_sampling_interval", 0, "must be between 0.001 and 1 second"),
    ("--memory-sampling-interval", "12", "memory_sampling_interval", 12, "must be at least 1K"),
    ("--memory-sampling-interval", "2T", "memory_sampling_interval", 2 << 40, "too large"),
]


@pytest.mark.parametrize("flag, text, keyword, value, message", BAD)
def test_a_bad_value_gets_the_same_message_on_every_surface(capsys, tmp_path, flag, text,
                                                            keyword, value, message):
    script = tmp_path / "never_runs.py"
    ran = tmp_path / "ran"
    script.write_text(f"open({str(ran)!r}, 'w').close()\n")
    command_lines = {
        "run": ["run", flag, text, str(script)],
        "check": ["check", flag, text, str(script)],
        "sweep": ["sweep", "--vary", "N=1,2,3", flag, text, str(script)],
        "attach": ["attach", flag, text, "999999999"],
    }
    for name, args in command_lines.items():
        code, err = _cli(capsys, *args)
        assert code == 2, (name, err)
        assert flag in err and message in err, (name, err)
        assert "Traceback" not in err and not ran.exists(), (name, err)

    assert jupyter._Magics(shell=None).line(f"{flag} {text} x = 1") is None
    err = capsys.readouterr().err
    assert flag in err and message in err and "%peakline" in err, err

    with pytest.raises(ValueError, match=f"^{keyword}: {message}"):
        peakline.start(**{keyword: value})
    assert not peakline.is_profiling()

    marker = pytest.mark.peakline(max_peak="1G", **{keyword: value}).mark

    class Item:
        def get_closest_marker(self, name):
            return marker

    with pytest.raises(UsageError, match=f"{keyword}: {message}"):
        _marker_budgets(Item())


def test_the_api_refuses_a_text_interval_and_an_unknown_keyword():
    with pytest.raises(ValueError, match="memory_sampling_interval: must be a whole number"):
        run_options.from_keywords({"memory_sampling_interval": "512K"})
    with pytest.raises(TypeError, match="cpu_sampling_rate"):
        run_options.from_keywords({"cpu_sampling_rate": 0.01})


def test_the_pytest_marker_splits_budgets_from_profiling_options():
    marker = pytest.mark.peakline(max_peak="1G", cpu_only=True,
                                  memory_sampling_interval=65536).mark

    class Item:
        def get_closest_marker(self, name):
            return marker

    budgets, options = _marker_budgets(Item())
    assert budgets == {"max_peak": 1 << 30}
    assert options == {"cpu_only": True, "memory_sampling_interval": 65536}


def test_the_pytest_markers_options_shape_the_tests_profile(tmp_path):
    (tmp_path / "test_inner.py").write_text(
        "import pytest\n\n\n@pytest.mark.peakline(cpu_only=True, profile_all=True)\n"
        "def test_work():\n    assert sum(i * i for i in range(100_000))\n")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
                           "test_inner.py", "--peakline-dir", "profiles"],
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    from peakline.model.profile_file import read_profile
    profile = read_profile(tmp_path / "profiles" / "test_inner.py_test_work.json")
    assert not profile.has_memory and profile.options.profile_all is True
