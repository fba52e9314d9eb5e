"""`peakline` command line: one module per command (run, view, sweep); this file only dispatches."""

from __future__ import annotations

import sys

from peakline import __version__
from peakline.errors import PeaklineError

USAGE = """\
usage: peakline [--version] [--help] COMMAND ...

commands:
  run      run a Python program under the profiler and report where time went, line by line
  view     show a saved profile file (or sweep file)
  check    run a program (or read a profile) and judge it against memory/time budgets
  compare  show two or more profiles side by side: totals and the rows that changed most
  sweep    run a program at several sizes and fit how its memory and time grow
  merge    merge profiles taken anywhere (other hosts, workers) into one profile

`peakline COMMAND --help` describes each command.
"""


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(USAGE)
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        print(f"peakline {__version__}")
        return 0
    command, rest = args[0], args[1:]
    try:
        if command == "run":
            from peakline.cli import run
            return run.main(rest)
        if command == "view":
            from peakline.cli import view
            return view.main(rest)
        if command == "check":
            from peakline.cli import check
            return check.main(rest)
        if command == "compare":
            from peakline.cli import compare
            return compare.main(rest)
        if command == "sweep":
            from peakline.cli import sweep
            return sweep.main(rest)
        if command == "merge":
            from peakline.cli import merge
            return merge.main(rest)
        raise_usage(f"unknown command {command!r} (expected 'run', 'view', 'check', 'compare', "
                    "'sweep' or 'merge')")
    except PeaklineError as exc:
        print(f"peakline: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def raise_usage(message: str) -> None:
    from peakline.errors import UsageError
    raise UsageError(message)


if __name__ == "__main__":
    raise SystemExit(main())
