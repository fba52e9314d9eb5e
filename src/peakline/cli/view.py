"""`peakline view PROFILE [--text | --html OUT | --json | --speedscope OUT]`: render a saved
profile file.

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


def main(argv: list[str]) -> int:
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
