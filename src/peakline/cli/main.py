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
        raise_usage(f"unknown command {command!r} (expected 'run', 'view', 'check', 'compare' "
                    "or 'sweep')" + did_you_mean(args))
    except PeaklineError as exc:
        print(f"peakline: error: {exc}", file=sys.stderr)
        return exc.exit_code
    return 0


def did_you_mean(args: list[str]) -> str:
    """`peakline script.py`, `peakline -m mod`, `peakline --cpu-only x.py`: what other
    profilers (and `python`) accept without a command; the hint names `peakline run`."""
    import os
    import shlex
    first = args[0]
    if first.startswith("-") or first.endswith((".py", ".pyw")) or os.path.exists(first):
        from peakline.cli.options import FOREIGN_FLAGS
        if first in FOREIGN_FLAGS:
            return f"; {first} is not a peakline option: {FOREIGN_FLAGS[first]}"
        return f"; did you mean `peakline run {shlex.join(args)}`?"
    return ""


def raise_usage(message: str) -> None:
    from peakline.errors import UsageError
    raise UsageError(message)


if __name__ == "__main__":
    raise SystemExit(main())
