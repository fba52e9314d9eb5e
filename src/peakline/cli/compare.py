"""`peakline compare A.json B.json [C.json ...] [--by line|function|phase|file] [--top N]
[--html OUT] [--json OUT]`: profiles side by side (peakline/gates/compare.py).

The text comparison goes to standard output (unless --json -). Unreadable, foreign or newer
profiles: one line, exit 3 (ProfileFormatError); a bad option: exit 2.
"""

from __future__ import annotations

import sys

from peakline.cli import options as _options
from peakline.cli.options import Option

DESCRIPTION = """\
Show profiles side by side: totals (heap peak, RSS, CPU, wall, copies, GPU), then the rows
that changed most against the first profile, with absolute and relative change. Lines are
matched by file and line (moved lines by their source text or function); --by phase compares
the named phases (peakline.phase) of different implementations."""


def _by(text: str) -> str:
    from peakline.gates.compare import BY_CHOICES
    if text not in BY_CHOICES:
        raise ValueError(f"must be one of {', '.join(BY_CHOICES)}, got {text!r}")
    return text


def _top(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(f"must be at least 0, got {text!r}")
    return value


OPTIONS = [
    Option("--by", dest="by", convert=_by, default="line", metavar="line|function|phase|file",
           help="what the rows are (default: line)"),
    Option("--top", dest="top", convert=_top, default=15, metavar="N",
           help="show the N rows that changed most (default: 15)"),
    Option("--html", dest="html", metavar="OUT", help="write the comparison as an HTML page"),
    Option("--json", dest="json", metavar="OUT",
           help="write the comparison as JSON ('-' for standard output)"),
]


def main(argv: list[str]) -> int:
    opts = _options.parse_profiles_command(
        argv, OPTIONS, prog="peakline compare", description=DESCRIPTION,
        profiles_help="profiles written by peakline; the first is the reference")
    if isinstance(opts, int):  # argparse printed the help
        return opts
    from peakline.errors import UsageError
    from peakline.gates import compare as _compare
    from peakline.model.profile_file import read_profile
    from peakline.reporters import check_output_path, write_output

    if len(opts.profiles) < 2:
        raise UsageError("compare needs at least two profiles")
    for flag, path in (("--html", opts.html), ("--json", opts.json)):
        if path:
            check_output_path(flag, path)
    profiles = [read_profile(p) for p in opts.profiles]
    comparison = _compare.compare(profiles, opts.profiles, by=opts.by, top=opts.top)
    if opts.json != "-":
        sys.stdout.write(_compare.render_text(comparison))
    outputs = []
    if opts.json:
        import json
        outputs.append((opts.json, "comparison JSON", lambda s: (
            json.dump(comparison.to_dict(), s, indent=1, allow_nan=False), s.write("\n"))))
    if opts.html:
        outputs.append((opts.html, "comparison HTML",
                        lambda s: _compare.render_html(comparison, s)))
    for path, what, render in outputs:
        write_output(path, what, render, notes=sys.stderr)
    return 0
