"""`peakline view PROFILE [--text | --html OUT | --json OUT | --speedscope OUT]`: render a
saved profile file.

The terminal report is the default; it is printed too when ``--text`` is given with another
output. Problems with the file (missing, truncated, corrupt, foreign, newer format) surface as
``ProfileFormatError`` from the reader and are printed by cli/main.py as one line, exit 3.
"""

from __future__ import annotations

import os
import sys

from peakline.cli import options as _options
from peakline.model.profile_file import read_profile
from peakline.reporters import render_outputs, wants_files

DESCRIPTION = """\
Show a saved profile file: a terminal report by default, or an HTML page, the profile JSON,
or a speedscope file of the sampled stacks."""


def _old_json_spelling(argv: list[str]) -> list[str]:
    """`view P --json` / `view --json P`, the older spelling of `view P --json -` (before
    `--json` took OUT, as it does for `peakline run`), read as that with a note on stderr.
    Old when --json is the last token, or when taking the next token as OUT would leave no
    profile to view."""
    if "--json" not in argv or "--" in argv:
        return argv
    i = argv.index("--json")
    takes_value = _options.value_flags(_options.output_options(_options.VIEW))
    rest, j = argv[:i] + argv[i + 2:], 0
    positional = []
    while j < len(rest):
        if rest[j] in takes_value:
            j += 2
            continue
        if not rest[j].startswith("-"):
            positional.append(rest[j])
        j += 1
    no_profile_left = not positional
    if i == len(argv) - 1 or argv[i + 1].startswith("-") and argv[i + 1] != "-" \
            or no_profile_left:
        print("peakline: note: `--json` now takes OUT, as in `peakline run`; read as "
              "`--json -` (standard output)", file=sys.stderr)
        return argv[:i] + ["--json", "-"] + argv[i + 1:]
    return argv


def main(argv: list[str]) -> int:
    argv = _old_json_spelling(list(argv))
    try:
        parser = _options.build_parser(_options.output_options(_options.VIEW),
                                       prog="peakline view", description=DESCRIPTION)
        parser.add_argument("profile", help="a profile file written by `peakline run`, or a sweep "
                                               "file written by `peakline sweep`")
        opts = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed usage / help
        return int(exc.code or 0)
    from peakline.sweep.sweep_file import is_sweep_file
    if is_sweep_file(opts.profile):
        from peakline.cli import sweep
        return sweep.view(opts)
    profile = read_profile(opts.profile)
    text = opts.text or not wants_files(opts)
    try:
        render_outputs(profile, opts, text_stream=sys.stdout if text else None)
        sys.stdout.flush()
    except BrokenPipeError:
        # `peakline view p | head`: the reader left; stop quietly, as other tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return 0
