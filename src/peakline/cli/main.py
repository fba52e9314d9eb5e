"""`peakline` command line: one module per command (COMMANDS); this file only dispatches."""

from __future__ import annotations

import importlib
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
  attach   profile a running Python process for a while, then leave it running as before
  serve    run the validation server (history, verdicts, co-location planner, web UI)
  push     upload a profile to a validation server and print its verdict
  merge    merge profiles taken anywhere (other hosts, workers) into one profile

`peakline COMMAND --help` describes each command.
"""


# Each command's module under peakline.cli, imported only when the command is used (start-up
# of `peakline run` must not pay for the server's or the sweep's imports).
COMMANDS = {
    "run": "run",
    "view": "view",
    "check": "check",
    "compare": "compare",
    "sweep": "sweep",
    "attach": "attach",
    "serve": "serve",
    "push": "push",
    "merge": "merge",
}


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
        module = COMMANDS.get(command)
        if module is None:
            names = ", ".join(repr(name) for name in COMMANDS)
            raise_usage(f"unknown command {command!r} (expected one of {names})"
                        + did_you_mean(args))
        return importlib.import_module(f"peakline.cli.{module}").main(rest)
    except PeaklineError as exc:
        print(f"peakline: error: {exc}", file=sys.stderr)
        return exc.exit_code


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
