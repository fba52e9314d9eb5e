"""cli/options.py: the options `peakline run` reads without argparse mean exactly what
argparse, built from the same declarations, makes of them; everything else goes to argparse."""

from __future__ import annotations

import subprocess
import sys

import pytest

from peakline.cli import options, run, view

COMMAND_LINES = [
    [],
    ["--cpu-only"],
    ["-o", "out.json", "--no-report"],
    ["--outfile=out.json", "--profile-all", "--no-children"],
    ["--cpu-sampling-rate", "0.02", "--profile-only", "src,lib", "--profile-exclude", "tests"],
    ["--memory-sampling-interval", "64K", "--gpu"],
    ["--gpu", "--no-gpu"],                     # the last one wins
    ["--no-gpu", "--gpu"],
    ["-o", "a.json", "-o", "b.json"],          # the last one wins
    ["--html", "r.html", "--json", "p.json", "--speedscope", "s.json"],
    ["--json=-"],                              # '-' attached: standard output
    ["--reduced-profile", "--cpu-percent-threshold", "5", "--malloc-threshold", "2M"],
    ["--memory-sampling-interval=1G", "--cpu-sampling-rate=1e-2"],
]


@pytest.mark.parametrize("tokens", COMMAND_LINES, ids=lambda t: " ".join(t) or "(none)")
def test_fast_path_reads_like_argparse(tokens):
    fast = options.parse(tokens, run.OPTIONS)
    assert fast is not None, "expected the fast path to take this command line"
    slow = options.parse_with_argparse(tokens, run.OPTIONS, prog="peakline run")
    assert fast == slow, (fast, slow)


@pytest.mark.parametrize("tokens", [
    ["--help"], ["-h"],
    ["--cpu-o"],                                 # an abbreviation argparse accepts
    ["--outf", "x.json"],
    ["-ox.json"],                                # attached short value
    ["--no-such-option"],
    ["--cpu-sampling-rate", "abc"],              # does not convert
    ["--memory-sampling-interval", "12"],        # below 1K
    ["--cpu-percent-threshold", "500"],
    ["--json", "-"],                             # an option-like value: argparse's rules
    ["--cpu-sampling-rate", "-1"],
    ["--cpu-only=yes"],
    ["--outfile"],                               # value missing
])
def test_anything_else_is_left_to_argparse(tokens):
    assert options.parse(tokens, run.OPTIONS) is None


@pytest.mark.parametrize("tokens", [["-ox.json"], ["--json", "-"],
                                    ["--cpu-sampling-rate", "-1"]])
def test_what_argparse_accepts_in_the_fallback_still_works(tokens):
    values = run.parse_options(tokens)
    assert values == options.parse_with_argparse(tokens, run.OPTIONS, prog="peakline run")


def test_value_flags_are_the_value_taking_options():
    flags = options.value_flags(run.OPTIONS)
    assert {"-o", "--outfile", "--html", "--json", "--malloc-threshold"} <= flags
    assert "--cpu-only" not in flags and "--reduced-profile" not in flags


def test_view_options_are_parsed_by_argparse_with_a_positional():
    parser = options.build_parser(options.output_options(options.VIEW), prog="peakline view")
    parser.add_argument("profile")
    opts = parser.parse_args(["p.json", "--json", "-", "--malloc-threshold", "4M"])
    assert opts.profile == "p.json" and opts.json == "-" and opts.malloc_threshold == 4 << 20
    assert opts.text is False and opts.reduced_profile is False
    assert view.DESCRIPTION  # the module imports without argparse at the top


def test_errors_keep_argparses_messages(tmp_path):
    def run_cli(*args):
        return subprocess.run([sys.executable, "-m", "peakline", "run", *args, "x.py"],
                              capture_output=True, text=True, cwd=tmp_path, timeout=60)
    bad = run_cli("--memory-sampling-interval", "12")
    assert bad.returncode == 2 and "must be at least 1K" in bad.stderr
    bad = run_cli("--cpu-percent-threshold", "500")
    assert bad.returncode == 2 and "must be between 0 and 100" in bad.stderr
    bad = run_cli("--malloc-threshold", "lots")
    assert bad.returncode == 2 and "--malloc-threshold" in bad.stderr
