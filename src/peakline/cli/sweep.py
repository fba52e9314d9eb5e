"""`peakline sweep --vary NAME=V1,V2,... [options] (script.py | -m module) [args ...]`: run the
program once per value under `peakline run`, fit how memory and time grow, report.

The options of `peakline run` that shape a measurement (sampling rates, file filters,
--cpu-only, --gpu, --no-children) are accepted here and handed to every run unchanged; they
are declared once, in cli/run.py ``OPTIONS``, and reused from there.
"""

from __future__ import annotations

import os
import sys

from peakline import run_options
from peakline.cli import options as _options
from peakline.cli import run as _run
from peakline.cli.options import Option
from peakline.errors import UsageError
from peakline.runner import Target

DESCRIPTION = """\
Run a Python program once per value of the varied names (every combination when several
vary), each run profiled by `peakline run` in its own process, one after another. Then fit
how the whole program's peak memory, RSS, CPU and wall time, and every line, function and
phase that matters, grow with each name (constant, log, linear, n log n, quadratic, cubic or
a power law), predict them at --target, and report the share of memory and time per line as
the name grows. Values: 1000, 1e5, 100_000, 2**20, or LOW..HIGHxCOUNT for COUNT log-spaced
values. Exit status: 0 every run succeeded; 1 some or all runs failed (the others are kept
and fitted); 2 bad command line; 130 stopped by Ctrl-C (finished runs are kept)."""

USAGE = ("peakline sweep --vary NAME=V1,V2,V3 [--vary NAME2=...] [--as env|arg] "
         "[--target NAME=V] [--repeat N] [--outfile sweep.json] [--html OUT] [run options] "
         "(script.py | -m module) [args ...]")

# The options of `peakline run` that every run receives as given.
PASSED_TO_RUNS = ("cpu_sampling_rate", "profile_all", "profile_only", "profile_exclude",
                  "cpu_only", "memory_sampling_interval", "gpu", "children")
RUN_OPTIONS = run_options.cli_options(*PASSED_TO_RUNS)

# Given once per name (argparse's "append"), not declared as Options (whose rule is "the last
# one wins").
REPEATABLE = {"--vary": "vary", "--target": "targets"}


def _as(text: str) -> str:
    if text not in ("env", "arg"):
        raise ValueError(f"expected env or arg, got {text!r}")
    return text


def _repeat(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 100:
        raise ValueError(f"must be between 1 and 100, got {text!r}")
    return value


SWEEP_OPTIONS = [
    Option("-m", dest="module", metavar="MODULE", help="run a library module as a script"),
    Option("--as", dest="as_", convert=_as, default="env", metavar="env|arg",
           help="how each value reaches the program: an environment variable NAME=value "
                "(default), or substituted for {NAME} in the program's arguments"),
    Option("--repeat", dest="repeat", convert=_repeat, default=1, metavar="N",
           help="run each combination N times (the fits use every run; default 1)"),
    Option("-o", "--outfile", dest="outfile", metavar="PATH",
           help="the sweep file (default: peakline-sweep-<script>.json); each run's profile "
                "and output go to a folder beside it, PATH without .json plus .runs/"),
    Option("--html", dest="html", metavar="OUT", help="also write a self-contained HTML report"),
    Option("--no-report", dest="no_report", convert=None, const=True, default=False,
           help="write the sweep file only, no terminal report"),
]


def _parser():
    parser = _options.build_parser([*SWEEP_OPTIONS, *RUN_OPTIONS], prog="peakline sweep",
                                   description=DESCRIPTION, usage=USAGE)
    parser.add_argument("--vary", dest="vary", action="append", default=[],
                        metavar="NAME=VALUES", help="a name and its values (repeat for more)")
    parser.add_argument("--target", dest="targets", action="append", default=[],
                        metavar="NAME=V", help="predict every quantity at this size")
    return parser


def split_command_line(argv: list[str]) -> tuple[list[str], Target | None]:
    """(our options, the program), split at the first token that is not an option of ours or
    its value, by `peakline run`'s own splitter."""
    flags = _options.value_flags([*SWEEP_OPTIONS, *RUN_OPTIONS]) | set(REPEATABLE)
    return _run.split_command_line(argv, frozenset(flags))


def parse(tokens: list[str]) -> tuple[_options.Values, list[str]]:
    """(the options, the tokens to hand to every run). argparse itself: this process only
    starts the runs and fits."""
    values = _options.parse_with_parser(tokens, _parser())
    flags = _options.value_flags([*SWEEP_OPTIONS, *RUN_OPTIONS]) | set(REPEATABLE)
    return values, _options.split_tokens(tokens, RUN_OPTIONS, frozenset(flags))[0]


def default_outfile(target: Target) -> str:
    return _run.default_outfile(target).replace("peakline-", "peakline-sweep-", 1)


def main(argv: list[str]) -> int:
    ours, target = split_command_line(argv)
    try:
        opts, run_tokens = parse(ours)
    except SystemExit as exc:
        return int(exc.code or 0)
    from peakline.sweep import params
    from peakline.sweep.runner import Plan, run_sweep

    target = _run.program_to_run(target, opts, "sweep")
    run_options.check_command_line(opts, RUN_OPTIONS)
    if not opts.vary:
        raise UsageError("nothing to vary: give --vary NAME=V1,V2,V3 (see `peakline sweep "
                         "--help`)")
    vary = params.parse_vary(opts.vary)
    for v in vary:
        if len(v.values) < 3:
            raise UsageError(f"--vary {v.name}: {len(v.values)} value"
                             f"{'s' if len(v.values) != 1 else ''}; no fit with fewer than "
                             "three sizes (give at least 3, e.g. 1e4..1e6x5)")
    targets = params.parse_targets(opts.targets, vary)
    params.check_placeholders(target.args, vary, opts.as_ == "arg")
    if target.script is not None and not os.path.isfile(target.script):
        raise UsageError(f"cannot run {target.script!r}: no such file")
    outfile = os.path.abspath(opts.outfile or default_outfile(target))
    if os.path.isdir(outfile) or not os.path.isdir(os.path.dirname(outfile)):
        raise UsageError(f"--outfile {opts.outfile}: " + (
            "is a directory" if os.path.isdir(outfile)
            else f"no such directory {os.path.dirname(outfile)}"))
    from peakline.reporters import check_outputs
    check_outputs(_options.Values(html=opts.html))
    stem = outfile[:-5] if outfile.endswith(".json") else outfile
    plan = Plan(target=target, vary=vary, targets=targets, as_arg=opts.as_ == "arg",
                repeat=opts.repeat, run_options=run_tokens, outfile=outfile,
                runs_dir=stem + ".runs")
    try:
        document, status = run_sweep(plan, sys.stderr)
    finally:
        sys.stderr.flush()
    from peakline.reporters import sweep_html, sweep_terminal
    if not opts.no_report:
        sweep_terminal.render(document, sys.stdout)
        sys.stdout.flush()
    if opts.html:
        sweep_html.write(document, opts.html)
    print(f"peakline: sweep written to {outfile}", file=sys.stderr)
    return status


def view(opts) -> int:
    """`peakline view SWEEP.json`: the terminal report (default), --html OUT, --json OUT."""
    from peakline.reporters import sweep_html, sweep_terminal
    from peakline.sweep.analysis import compute_fits
    from peakline.sweep.sweep_file import dumps_sweep, read_sweep

    if getattr(opts, "speedscope", None):
        raise UsageError("--speedscope: a sweep file has no stacks (view one run's profile, "
                         "listed under runs in the sweep file)")
    sweep = read_sweep(opts.profile)
    if not (sweep.get("fits") or {}).get("program"):  # a sweep stopped before its fits
        sweep["fits"] = compute_fits(sweep["vary"], sweep["runs"], sweep.get("target"))
    if opts.json:  # --json OUT, '-' for standard output (as for a profile)
        from peakline.reporters import write_output
        write_output(opts.json if isinstance(opts.json, str) else "-", "sweep JSON",
                     lambda stream: stream.write(dumps_sweep(sweep)), notes=sys.stderr)
    if opts.html:
        sweep_html.write(sweep, opts.html)
    if opts.text or not (opts.html or opts.json):
        sweep_terminal.render(sweep, sys.stdout)
    sys.stdout.flush()
    return 0
