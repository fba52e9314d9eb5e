"""`peakline merge P1.json P2.json ... --outfile all.json [--text] [--html OUT]`: merge
profiles taken anywhere — other hosts, a job array, shared storage — into one profile
(peakline/model/merge.py, ``merge_profiles``; docs/distributed.md).

Unreadable, foreign, corrupt or newer profiles: one line naming the file, exit 3
(ProfileFormatError); a profile given twice, or fewer than two: exit 3 as well; a bad option:
exit 2.
"""

from __future__ import annotations

import sys

from peakline.cli import options as _options
from peakline.reporters import check_output_path
from peakline.cli.options import Option

DESCRIPTION = """\
Merge profiles of processes that ran anywhere (other machines, a job array, a cluster whose
driver could not collect them) into one profile: per line and function the figures add up,
every process is listed with the host it ran on, and the peaks are given per process and
summed."""

OPTIONS = [
    Option("--outfile", dest="outfile", metavar="PATH", default="peakline-merged.json",
           help="where the merged profile goes (default: peakline-merged.json)"),
    Option("--html", dest="html", metavar="OUT", help="also write an HTML report"),
    Option("--text", dest="text", convert=None, const=True, default=False,
           help="also print the terminal report of the merged profile"),
]


def main(argv: list[str]) -> int:
    opts = _options.parse_profiles_command(
        argv, OPTIONS, prog="peakline merge", description=DESCRIPTION,
        profiles_help="profiles written by peakline run, the API or a worker plugin")
    if isinstance(opts, int):  # argparse printed the help
        return opts
    check_output_path("--outfile", opts.outfile)
    if opts.html:
        check_output_path("--html", opts.html)
    from peakline.errors import ProfileFormatError
    from peakline.model.merge import merge_profiles
    from peakline.model.profile_file import read_profile, write_profile
    profiles = [read_profile(path) for path in opts.profiles]
    try:
        merged = merge_profiles(profiles, sources=opts.profiles)
    except ValueError as exc:
        raise ProfileFormatError(str(exc)) from exc
    write_profile(merged, opts.outfile)
    from peakline.reporters import render_outputs
    render_outputs(merged, opts, text_stream=sys.stdout if opts.text else None)
    hosts = sorted({r.hostname for r in merged.processes or () if r.hostname})
    print(f"peakline: merged {len(profiles)} profiles ({len(merged.processes or ())} processes"
          f"{', hosts ' + ', '.join(hosts) if hosts else ''}) into {opts.outfile}",
          file=sys.stderr)
    return 0
