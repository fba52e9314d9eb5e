"""`peakline check [run options] [budgets] (script.py | -m module) [args...]` and
`peakline check --profile P.json [budgets]`: judge a run's profile against budgets.

The program runs as `peakline run` runs it, because it *is* `peakline run`: the run options
(declared once, in cli/run.py) are read together with the budget options declared here, and
the run's own tokens are handed to `python -m peakline run` in a child process, whose
stdin, stdout and stderr are this process's. The profile file it writes is then read back
through the model and judged (peakline/gates). A child process, rather than running the
program in this one, keeps the judging code out of the measured process and lets
``--repeat N`` start each run afresh.

Exit status: 0 when every budget holds; EXIT_OVER_BUDGET (5) when any is exceeded; the
program's own status when it failed (the report is still printed); 2 for a bad command line
or budget, 3 for an unreadable, foreign or incomparable profile (docs/gates.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from peakline import run_options
from peakline.cli import options as _options
from peakline.cli import run as _run
from peakline.cli.options import Option
from peakline.errors import UsageError
from peakline.gates import budgets as _budgets
from peakline.runner import Target

DESCRIPTION = """\
Run a Python program under peakline exactly like `peakline run`, then judge its profile
against budgets; or judge an existing profile (--profile). Exit status: 0 when every budget
holds, 5 when one is exceeded, the program's own status when it failed (the report is
printed either way), 2 for a bad command line, 3 for a bad profile. Budgets can also be set
in pyproject.toml under [tool.peakline.budgets]; command-line values override them."""

USAGE = ("peakline check [run options] [budgets] (script.py | DIR | -m module) [args ...]\n"
         "       peakline check --profile PROFILE.json [budgets]")

_GROUP = "budgets"
_OUT_GROUP = "verdict outputs"
_PUSH_GROUP = "validation server"

# Budget values are kept as text here and converted by peakline.gates.budgets (one line of
# error for a bad value, and the same conversion as pyproject.toml and the pytest plugin).
CHECK_OPTIONS = [
    *(Option(spec.flag, dest=spec.name, convert=None, const=True, group=_GROUP, help=spec.help)
      if spec.kind == "flag" else
      Option(spec.flag, dest=spec.name, metavar=spec.metavar, group=_GROUP, help=spec.help)
      for spec in (*_budgets.BUDGETS, *_budgets.SETTINGS)),
    Option("--profile", dest="profile", metavar="PROFILE.json", group=_GROUP,
           help="judge this profile instead of running a program"),
    Option("--no-config", dest="no_config", convert=None, const=True, default=False,
           group=_GROUP, help="ignore [tool.peakline.budgets] in pyproject.toml"),
    Option("--json", dest="verdict_json", metavar="OUT", group=_OUT_GROUP,
           help="write the verdict as JSON ('-' for standard output). Unlike `peakline run "
                "--json`, this is not the profile: the profile goes to --outfile"),
    Option("--junit", dest="junit", metavar="OUT.xml", group=_OUT_GROUP,
           help="write the verdict as JUnit XML (one test case per budget)"),
    Option("--summary", dest="summary", metavar="OUT.md", group=_OUT_GROUP,
           help="write a Markdown summary (e.g. $GITHUB_STEP_SUMMARY)"),
    Option("--push", dest="push", metavar="URL", group=_PUSH_GROUP,
           help="upload the profile to this validation server (peakline serve) and print "
                "its verdict too; needs --model and --version"),
    Option("--model", dest="push_model", metavar="NAME", group=_PUSH_GROUP,
           help="the model's name on the --push server"),
    Option("--version", dest="push_version", metavar="V", group=_PUSH_GROUP,
           help="the model's version on the --push server"),
    Option("--token", dest="push_token", metavar="TOKEN", group=_PUSH_GROUP,
           help="write token for --push (default: $PEAKLINE_TOKEN)"),
]
# `peakline run`'s options, less its --json (the profile JSON; here --json is the verdict).
RUN_OPTIONS = [o for o in _run.OPTIONS if o.dest != "json"]
OPTIONS = [*RUN_OPTIONS, *CHECK_OPTIONS]
_VALUE_OPTIONS = _options.value_flags(OPTIONS)


def parse_options(tokens: list[str]) -> _options.Values:
    """argparse itself: this process only judges (the program runs in a child process)."""
    import argparse
    parser = _options.build_parser(OPTIONS, prog="peakline check", description=DESCRIPTION,
                                   usage=USAGE, one_line_errors=True,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    return _options.parse_with_parser(tokens, parser)


def run_tokens(tokens: list[str]) -> list[str]:
    """The tokens that are `peakline run`'s options (those of check dropped)."""
    return _options.split_tokens(tokens, CHECK_OPTIONS, _VALUE_OPTIONS)[1]


def command_line_budgets(opts: _options.Values) -> dict:
    given = {spec.name: getattr(opts, spec.name) for spec in _budgets.SPECS.values()
             if getattr(opts, spec.name, None) is not None}
    return {name: _budgets.convert(name, value, source=_budgets.SPECS[name].flag)
            for name, value in given.items()}


def _check_writable(opts: _options.Values) -> None:
    from peakline.reporters import check_output_path

    for dest, flag in (("verdict_json", "--json"), ("junit", "--junit"),
                       ("summary", "--summary")):
        path = getattr(opts, dest, None)
        if path:
            check_output_path(flag, path)


def main(argv: list[str]) -> int:
    ours, target = _run.split_command_line(argv, _VALUE_OPTIONS)
    try:
        opts = parse_options(ours)
    except SystemExit as exc:  # argparse already printed usage / help
        return int(exc.code or 0)
    if target is None and opts.module:
        target = Target(module=opts.module)
    _check_writable(opts)
    _check_push(opts)
    cli = command_line_budgets(opts)

    from peakline.model.profile_file import read_profile

    if opts.profile is not None:
        if target is not None or run_tokens(ours):
            raise UsageError("--profile judges an existing profile: give no program and no "
                             "run options")
        profile = read_profile(opts.profile)
        script, module = _target_of(profile.program)
        budgets = _merged(opts, cli, script=script, module=module)
        baseline = _read_baseline(budgets, profile.program)
        return _judge_and_report([profile], budgets, baseline, opts, exit_code=0)

    if target is None:
        raise UsageError("no program to run: give a script path, -m module or --profile "
                         "(see `peakline check --help`)")
    _run.check_script(target)
    run_options.check_command_line(opts)  # here, not only in the run: before any run starts
    budgets = _merged(opts, cli, script=target.script, module=target.module)
    baseline = _read_baseline(budgets, target.display)
    outfile = os.path.abspath(opts.outfile or _run.default_outfile(target))
    if budgets.get("baseline") and os.path.exists(outfile) and \
            os.path.samefile(outfile, budgets["baseline"]):
        raise UsageError(f"the profile would overwrite the baseline {budgets['baseline']}: "
                         "give another --outfile")
    if not budgets:
        print("peakline check: no budgets given (flags or [tool.peakline.budgets]); "
              "the run is only profiled", file=sys.stderr)
    profiles, exit_code = _run_child(run_tokens(ours), target, outfile, budgets.get("repeat") or 1)
    if not profiles:
        print(f"peakline check: no profile was written to {outfile}; budgets not judged",
              file=sys.stderr)
        return exit_code if exit_code else 1
    return _judge_and_report(profiles, budgets, baseline, opts, exit_code=exit_code)


def _target_of(program: str) -> tuple[str | None, str | None]:
    if program.startswith("-m "):
        return None, program[3:]
    return os.path.abspath(program), None


def _merged(opts: _options.Values, cli: dict, *, script: str | None,
            module: str | None) -> dict:
    config = {} if opts.no_config else _budgets.config_budgets(
        _budgets.find_pyproject(os.getcwd()), script=script, module=module)
    return {**config, **cli}


def _read_baseline(budgets: dict, program: str):
    path = budgets.get("baseline")
    if not path:
        return None
    from peakline.gates.verdict import check_same_program
    from peakline.model.profile_file import read_profile

    baseline = read_profile(path)
    check_same_program(program, baseline, path)
    return baseline


def _run_child(run_args: list[str], target: Target, outfile: str, repeat: int):
    """Runs `python -m peakline run` ``repeat`` times; (profiles read back, exit status of
    the last run, or of the first that failed)."""
    from peakline.model.profile_file import read_profile

    target_args = (["-m", target.module] if target.module is not None else
                   ["--", target.script]) + target.args
    command = [sys.executable, "-m", "peakline", "run", *run_args, "--outfile", outfile,
               *target_args]
    profiles = []
    exit_code = 0
    for _ in range(repeat):
        try:
            os.unlink(outfile)  # never judge a profile left by an earlier run
        except FileNotFoundError:
            pass
        status = _wait(command)
        if os.path.exists(outfile):
            profiles.append(read_profile(outfile))
        if status != 0:
            exit_code = status
            break
    return profiles, exit_code


def _wait(command: list[str]) -> int:
    """Runs ``command`` with our stdin/stdout/stderr. Ctrl-C reaches it from the terminal (its
    process group is ours), so here it is ignored while waiting; SIGTERM is passed on."""
    child = subprocess.Popen(command)
    previous_int = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def forward(signum, frame):  # noqa: ARG001
        child.send_signal(signum)

    previous_term = signal.signal(signal.SIGTERM, forward)
    try:
        status = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous_int)
        signal.signal(signal.SIGTERM, previous_term)
    return 128 - status if status < 0 else status


def _check_push(opts: _options.Values) -> None:
    given = [flag for flag, dest in (("--model", "push_model"), ("--version", "push_version"),
                                     ("--token", "push_token")) if getattr(opts, dest, None)]
    if opts.push is None:
        if given:
            raise UsageError(f"{given[0]} is for --push URL")
        return
    if not opts.push_model or not opts.push_version:
        raise UsageError("--push needs --model NAME and --version V")
    from peakline.cli.push import token_from
    token_from(opts.push_token)  # no token: say so before the program runs


def _push(profiles, opts: _options.Values) -> bool:
    """Uploads the run's profile (the worst of --repeat's runs by heap peak); True when the
    server's verdict is pass."""
    from peakline.cli.push import push, render_answer

    profile = max(profiles, key=lambda p: p.peak_bytes or 0)
    answer = push(profile, server=opts.push, model=opts.push_model,
                  version=opts.push_version, token=opts.push_token)
    sys.stderr.write("server: " + render_answer(answer, opts.push))
    return answer["verdict"] == "pass"


def _judge_and_report(profiles, budgets: dict, baseline, opts, *, exit_code: int) -> int:
    from peakline.gates import writers
    from peakline.gates.verdict import judge, render_text
    from peakline.reporters import write_output

    verdict = judge(profiles, budgets, baseline=baseline)
    sys.stdout.flush()
    sys.stderr.write(render_text(verdict))
    for path, render, what in ((opts.verdict_json, writers.render_json, "verdict JSON"),
                               (opts.junit, writers.render_junit, "JUnit XML"),
                               (opts.summary, writers.render_markdown, "Markdown summary")):
        if path:
            write_output(path, what, lambda stream: render(verdict, stream), notes=None)
    server_ok = _push(profiles, opts) if opts.push else True
    if exit_code:
        return exit_code
    return 0 if verdict.ok and server_ok else _budgets.EXIT_OVER_BUDGET
